"""Timer fidelity: does the judge's speedup survive fresh processes, and does the A/A control never win?

For kernels from a few microseconds to a few milliseconds (built in below), in one run:

- the A/A control (the reference judged against itself) timed `--pairs` fresh worker pairs x
  `--repeats` timings each, with kerneljudge's interleaved timer and with the KernelBench-compatible
  timer (one call per event pair, 100 trials, mean): how often each declares a win at the margin
  (kerneljudge: the interval's lower bound clears 1 + margin; KernelBench: the speedup does), and how
  far the first timing of each fresh pair spreads;
- a known-slowdown control (the reference's work done twice per call) in `--pairs` fresh pairs: its
  median speedup (0.5x expected) and the spread across fresh pairs ((max - min) / median), per timer.

The judgments run in `--mode off` with three correctness trials: this measures the timer, not the checks
(the calibration controls in tests/gpu run the hardened path). Each timing is the judge's own timing
code on the same worker pair, so the figures are those a record would carry.

    python benchmarks/timer_fidelity.py --device cuda --json out.json > table.md

Prints a Markdown table (docs/timing.md keeps the one measured on an H200).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import Judgment
from kerneljudge.results.verdict import Timing
from kerneljudge.runs.backends.lane import A_A_CANDIDATE
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks.load import load_task

# name -> (task source, what it is); sizes chosen for ~5 us to ~5 ms on an H200. Each keeps its inputs and
# outputs small enough that a judgment's correctness trials (which move every input and output through the
# parent) short: with a 8192 x 8192 softmax (256 MiB each way) one trial took 23-32 s on a 2-core CPU machine,
# and on an H200 six judgments did not finish within a ten-minute call.
KERNELS: dict[str, tuple[str, str]] = {
    "softmax_64x1000": (
        "x = torch.softmax(x, dim=-1)",
        "torch.randn(64, 1000)",
    ),
    "softmax_2048x4096": (
        "x = torch.softmax(x, dim=-1)",
        "torch.randn(2048, 4096)",
    ),
    "matmul_2048_fp32": (
        "x = x @ x",
        "torch.randn(2048, 2048)",
    ),
    "matmul_5120_fp32": (
        "x = x @ x",
        "torch.randn(5120, 5120)",
    ),
}

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}
        return x


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

TWICE = (
    "\n\nclass ModelNew(Model):\n"
    "    def forward(self, x):\n"
    "        super().forward(x)\n"
    "        return super().forward(x)\n"
)


# The timers compared: kerneljudge's interleaved timer behind a busy precursor alone, the same replaying
# CUDA graphs (the judge's default), and the KernelBench-compatible one.
TIMERS: dict[str, dict[str, str]] = {
    "interleaved": {"timing_method": "interleaved", "timing_regime": "busy_precursor"},
    "interleaved_graph": {"timing_method": "interleaved", "timing_regime": "cuda_graph"},
    "kernelbench": {"timing_method": "kernelbench"},
}


class RepeatedTiming(Judgment):
    """A judgment whose timing phase runs once per entry of `timers`, on the same worker pair."""

    def __init__(self, *args: Any, timers: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timers = timers
        self.timings: list[tuple[str, Timing]] = []

    def _timing(self) -> None:
        base = self.config
        try:
            for timer in self.timers:
                self.progress(f"timing with {timer}")
                self.config = base.with_(**TIMERS[timer])
                super()._timing()
                self.timings.append((timer, self.results.timing.timing))
        finally:
            self.config = base


def judged_pair(workdir: Path, kernel: str, candidate: str, timers: list[str], config: JudgeConfig) -> Any:
    body, inputs = KERNELS[kernel]
    task_path = workdir / f"{kernel}.py"
    task_path.write_text(TASK.format(body=body, inputs=inputs))
    cand_path = workdir / f"{kernel}_{candidate}.py"
    cand_path.write_text(task_path.read_text() + (A_A_CANDIDATE if candidate == "aa" else TWICE))
    started = time.monotonic()

    def progress(stage: str) -> None:  # to stderr with the time since this judgment began: where a run spends it
        print(f"  {kernel}/{candidate} +{time.monotonic() - started:6.1f} s  {stage}", file=sys.stderr, flush=True)

    judgment = RepeatedTiming(load_task(task_path), load_candidate(cand_path), config, progress, timers=timers)
    record = judgment.run()
    if record.status != "PASS":
        raise SystemExit(f"{kernel}/{candidate}: {record.status}: {record.failure}")
    return judgment.timings


def spread(values: list[float]) -> float | None:
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else None


def wins(timing: Timing, margin: float) -> bool:
    if timing.speedup_interval:
        return timing.speedup_interval[0] > 1 + margin
    return (timing.speedup or 0.0) > 1 + margin


def measure(kernel: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    # Three trials: the interleaved timer rotates their three input sets, so consecutive calls differ.
    config = JudgeConfig(device=args.device, mode="off", public_trials=3, hidden_trials=0, timeout_s=300.0)
    timers = args.timers
    aa: dict[str, list[Timing]] = {m: [] for m in timers}
    aa_first: dict[str, list[Timing]] = {m: [] for m in timers}
    twice: dict[str, list[Timing]] = {m: [] for m in timers}
    for _ in range(args.pairs):
        timings = judged_pair(workdir, kernel, "aa", timers * args.repeats, config)
        for index, (timer, timing) in enumerate(timings):
            aa[timer].append(timing)
            if index < len(timers):
                aa_first[timer].append(timing)
        for timer, timing in judged_pair(workdir, kernel, "twice", timers, config):
            twice[timer].append(timing)
    row: dict[str, Any] = {"kernel": kernel}
    for timer in timers:
        first = [t.speedup for t in aa_first[timer] if t.speedup]
        doubled = [t.speedup for t in twice[timer] if t.speedup]
        row[timer] = {
            "reference_median_us": statistics.median(t.reference.median_ms for t in aa[timer]) * 1e3,
            "aa_judgments": len(aa[timer]),
            "aa_false_wins": sum(wins(t, args.margin) for t in aa[timer]),
            "aa_median": statistics.median(t.speedup for t in aa[timer] if t.speedup),
            "aa_fresh_spread": spread(first),
            "twice_median": statistics.median(doubled) if doubled else None,
            "twice_fresh_spread": spread(doubled),
            "twice_speedups": doubled,
            "regimes": sorted({t.launch_regime or "" for t in aa[timer]}),
            "stop_reasons": sorted({t.stop_reason or "" for t in aa[timer]}),
            "throttled_blocks": sum(len((t.clocks or {}).get("throttled_blocks", [])) for t in aa[timer]),
        }
    return row


def markdown(rows: list[dict[str, Any]], margin: float) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.2%}"

    lines = [
        f"| kernel | timer | reference | A/A wins at {margin:.0%} | A/A median | A/A spread (fresh) "
        "| 2x-work median | 2x-work spread (fresh) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for method in [key for key in TIMERS if key in row]:
            m = row[method]
            lines.append(
                f"| {row['kernel']} | {method} | {m['reference_median_us']:.1f} us | "
                f"{m['aa_false_wins']}/{m['aa_judgments']} | {m['aa_median']:.4f}x | {pct(m['aa_fresh_spread'])} | "
                f"{m['twice_median']:.4f}x | {pct(m['twice_fresh_spread'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--pairs", type=int, default=5, help="fresh worker pairs per control (default 5)")
    parser.add_argument("--repeats", type=int, default=4, help="A/A timings per pair and timer (default 4)")
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument(
        "--timers",
        nargs="+",
        default=["interleaved_graph", "kernelbench"],
        choices=list(TIMERS),
        help="default: the judge's default timer and the KernelBench-compatible one",
    )
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    rows = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kj-fidelity-") as tmp:
        for kernel in args.kernels:
            rows.append(measure(kernel, args, Path(tmp)))
            print(f"{kernel} done after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            if args.json:  # after every kernel, so a run cut short keeps what it measured
                args.json.write_text(json.dumps({"margin": args.margin, "rows": rows}, indent=2))
    print(markdown(rows, args.margin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
