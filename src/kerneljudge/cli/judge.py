"""`kerneljudge judge`: one candidate against one task, the verdict table, and the exit code of its status.

The last line on stdout is the verdict line, whatever the status, so that `out=$(kerneljudge judge ... --quiet)`
holds it on a FAIL as on a PASS; it stands alone (`--quiet` prints nothing else): the status, then the
speedup of a PASS, or the failure's kind, phase and one-line summary (or the finding or missing capability
that decided the status). Progress and the next-step hint go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerneljudge.cli.options import add_judge_options
from kerneljudge.cli.usage import count
from kerneljudge.config import (
    SANDBOX_MODES,
    SANITIZER_MODES,
    TIMING_METHODS,
    TIMING_REGIMES,
    JudgeConfig,
)
from kerneljudge.errors import UsageError

if TYPE_CHECKING:
    from kerneljudge.results.verdict import Record

EXIT_CODES = {"PASS": 0, "FAIL": 2, "SUSPICIOUS": 2, "UNSUPPORTED": 3, "ERROR": 1}

NEXT_STEP = {
    "FAIL": "the candidate is not correct: see the failure above and the record's trials",
    "SUSPICIOUS": "the candidate is correct but its evidence is suspect: see the findings",
    "UNSUPPORTED": "a required capability is missing on this machine: run `kerneljudge env`, or use --device auto",
    "ERROR": "the judge or the task failed (no verdict on the candidate): see the failure above and rerun",
}

SUMMARY_CHARS = 300  # a failure's summary in the outcome line: one line, whatever the worker said


# The help of the lane options (add_lane_options) and of the timing options `judge` and `redteam` share; the
# options every judging command shares are declared in cli/options.py.
SPARE_WORKERS_HELP = (
    "keep a worker pair started ahead of each lane's next judgment, which takes the workers' start off it; "
    "each spare holds a CUDA context while it waits (docs/batch.md)"
)
TIMING_WARM_HELP = (
    "one untimed call of each side before the measurement, outside the batch's measuring hold: the first call's "
    "compiles run beside the other lanes (the candidate sees one more call; docs/batch.md)"
)
TIMING_CARRY_HELP = (
    "carry the candidate's compiled kernels (Triton, Inductor, the driver's caches) to its fresh timing worker, "
    "which then compiles none of them again (docs/batch.md)"
)
TIMING_AHEAD_HELP = (
    "make the fresh timing pair ready while correctness still runs (loaded, its pool staged on fresh hidden "
    "inputs, each side's first call made), so that the timing stage is the samples and their checks (docs/batch.md)"
)


def add_lane_options(parser: argparse.ArgumentParser) -> None:
    """The options of how a lane runs its judgments, shared by `batch` and `serve`."""
    parser.add_argument("--spare-workers", action="store_true", help=SPARE_WORKERS_HELP)
    parser.add_argument("--timing-warm", action="store_true", help=TIMING_WARM_HELP)
    parser.add_argument("--timing-carry", action="store_true", help=TIMING_CARRY_HELP)
    parser.add_argument("--timing-ahead", action="store_true", help=TIMING_AHEAD_HELP)


EXTRACTED_NOTE = "candidate: extracted from a model's response (its last fenced Python block; extracted_from_response)"


def add_judge_parser(sub: Any) -> None:
    j = sub.add_parser("judge", help="judge a candidate against a KernelBench-format reference")
    j.add_argument("reference", help="task file: Model, get_inputs(), get_init_inputs(); or builtin:NAME")
    j.add_argument("candidate", help="candidate file defining ModelNew, or a model's response with a code block")
    add_judge_options(j, "device", "mode", "policy", "timeout")
    j.add_argument("--json", type=Path, metavar="PATH", help="write the verdict record here")
    j.add_argument("--no-timing", action="store_true", help="check correctness only")
    j.add_argument(
        "--shape-trials",
        type=count,
        default=JudgeConfig.shape_trials,
        metavar="N",
        help="hidden shapes of the task's shape family to check (0: the public shape only)",
    )
    j.add_argument(
        "--timing-method",
        choices=TIMING_METHODS,
        default="auto",
        help="interleaved paired blocks (auto in the hardened modes), kernelbench (auto in --mode off), or "
        "Triton's do_bench",
    )
    j.add_argument(
        "--regime",
        choices=TIMING_REGIMES,
        default="cuda_graph",
        help="CUDA launch-latency regime: a CUDA graph of each sample's calls replayed behind a GPU-busy precursor "
        "(falls back to busy_precursor when a side cannot be captured), the precursor alone, or back-to-back calls",
    )
    j.add_argument("--warm-cache", action="store_true", help="do not flush the L2 before each sample")
    j.add_argument("--compile-baseline", action="store_true", help="also time the reference under torch.compile")
    j.add_argument("--timing-warm", action="store_true", help=TIMING_WARM_HELP)
    j.add_argument("--timing-carry", action="store_true", help=TIMING_CARRY_HELP)
    j.add_argument("--timing-ahead", action="store_true", help=TIMING_AHEAD_HELP)
    j.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        default="auto",
        help="OS confinement of the workers: every layer the machine allows (auto), a missing layer is an error "
        "(require), or none (off); docs/security.md",
    )
    j.add_argument(
        "--sanitizer",
        choices=SANITIZER_MODES,
        default="auto",
        help="compute-sanitizer on one call: for custom CUDA in the hardened modes (auto), for every candidate "
        "(always), or never (off); docs/sanitizer.md",
    )
    j.add_argument("--quiet", action="store_true", help="print only the verdict line: the status and what decided it")


def config_of(args: argparse.Namespace) -> JudgeConfig:
    """The judge configuration of the options `batch`, `serve` and `improve` share: device, mode, policy,
    timeout, --no-timing and, where the command has it, --cached-baselines."""
    return JudgeConfig(
        device=args.device,
        mode=args.mode,
        policy=args.policy,
        timeout_s=args.timeout,
        timing=not args.no_timing,
        timing_baseline="cached" if getattr(args, "cached_baselines", False) else "paired",
        timing_warm=getattr(args, "timing_warm", False),
        timing_carry=getattr(args, "timing_carry", False),
        timing_ahead=getattr(args, "timing_ahead", False),
    )


def cmd_judge(args: argparse.Namespace) -> int:
    from kerneljudge.judgment.pipeline import judge
    from kerneljudge.report.table import print_verdict

    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the record: directory {args.json.parent} does not exist")
    config = JudgeConfig(
        device=args.device,
        mode=args.mode,
        policy=args.policy,
        timeout_s=args.timeout,
        timing=not args.no_timing,
        shape_trials=args.shape_trials,
        timing_method=args.timing_method,
        timing_regime=args.regime,
        timing_l2_flush=not args.warm_cache,
        timing_compile=args.compile_baseline,
        timing_warm=args.timing_warm,
        timing_carry=args.timing_carry,
        timing_ahead=args.timing_ahead,
        sandbox=args.sandbox,
        sanitizer=args.sanitizer,
    )
    record = judge(args.reference, args.candidate, config, progress=not args.quiet)
    if args.json is not None:
        args.json.write_text(record.to_json())
    if not args.quiet:
        print_verdict(record)
        if record.candidate.extracted_from_response:
            print(EXTRACTED_NOTE)
    print(outcome_line(record), flush=True)
    if not args.quiet and record.status in NEXT_STEP:
        print(f"next: {NEXT_STEP[record.status]}", file=sys.stderr)
    return EXIT_CODES[record.status]


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` on one line (its whitespace runs as single spaces), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def speed_of(record: Record) -> str:
    """A PASS's speedup and its interval, or why it was not timed."""
    timing = record.timing
    if not timing.measured or timing.speedup is None:
        return f"not timed ({one_line(timing.reason or 'timing off')})"
    interval = timing.speedup_interval
    bounds = f" [{interval[0]:.3g}, {interval[1]:.3g}]" if interval else ""
    where = " (CPU timings, not a GPU speedup)" if record.device == "cpu" else ""
    return f"speedup {timing.speedup:.3g}x{bounds} over the reference{where}"


def outcome_line(record: Record) -> str:
    """The verdict in one line that needs nothing printed before it: `STATUS: why`."""
    status = record.status
    if status == "PASS":
        what = "verified" if record.verified else "correct by KernelBench's native check (not verified in --mode off)"
        return f"PASS: {what}; {speed_of(record)}"
    if record.failure is not None:
        failure = record.failure
        return f"{status}: {failure.kind} in {failure.phase}: {one_line(failure.summary)}"
    if status == "UNSUPPORTED":
        missing = [
            f"{name} ({one_line(cap.detail)})" if cap.detail else name
            for name, cap in record.capabilities.items()
            if cap.required and cap.status == "unavailable"
        ]
        return "UNSUPPORTED: missing " + ("; ".join(missing) or "a required capability")
    severity = "warning" if status == "SUSPICIOUS" else "error"
    deciding = [f for f in record.findings if f.severity == severity]
    if not deciding:
        return f"{status}: no failure or finding recorded; the record (--json PATH) has the evidence"
    first = deciding[0]
    more = f" (and {len(deciding) - 1} more finding(s))" if len(deciding) > 1 else ""
    lead = "correct, not verified: " if status == "SUSPICIOUS" else ""
    return f"{status}: {lead}finding {first.code}: {one_line(first.summary)}{more}"
