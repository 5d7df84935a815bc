"""A training step judged: a GRPO-shaped manifest, its samples judged as groups and as single candidates by this
judge, and one at a time by upstream KernelBench's evaluator, side by side in one run.

The step (`step_lines`): `--tasks` tasks of the built-in suite at their production-like sizes (the fp32 and fp16
task of each operation, no edge case; kerneljudge/suite), `--samples` samples each, mixed as a policy early in
training writes them: per task two honest Triton kernels (the suite's), two honest torch ones (the reference as
its own candidate), one bug (the output's last element zeroed) and the rest reward hacks drawn from
throughput_manifest.py's (an output cache keyed on addresses, the previous call's output, bfloat16 rounding, an
unjoined side stream), in an order drawn per task from `--seed`. Every sample's text is its own (a comment names
its place), as a policy's samples are: no two are one judgment.

Each way, the figures of the step: candidates per GPU-minute, the step's wall time (until the last reward), the
GPU's busy share over it (gpu_busy.py), the p50 and p99 of a reward's latency (from the step's start until the
reward was stored), and how long the lanes waited beyond the candidates' own work (the wall time against the
sum of the judgments' durations over the lanes). The groups' verdicts are set against the single candidates'
(batch_throughput.agreement: the same status and failure kind per item, each timed speedup inside the other's
interval).

    python benchmarks/training_step.py --device cuda --jobs 8 --out step [--kernelbench ext/KernelBench] > step.md
    python benchmarks/training_step.py --device cpu --tasks 1 --samples 3 --small --no-timing --jobs 1 --out step-cpu

On a machine lent for limited calls the ways can be split (`--ways groups` in one call, then `--ways single
--kernelbench ... --upstream-limit 32 --join <the first call's --out>`): the manifest is drawn from `--seed` alike
in each, so the stores' items are the same and the agreement joins them.

Prints a Markdown table and writes the same figures to `--out/step.json` after each way.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import batch_throughput
import throughput_manifest
from gpu_busy import BusySampler

from kerneljudge.config import JudgeConfig
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import read_manifest, run_batch
from kerneljudge.suite import HERE as SUITE
from kerneljudge.suite import resolve

# A task's samples before its hacks, in this order as far as `--samples` goes: two honest Triton kernels, two
# honest torch ones, one bug.
HONEST_SHARE = ("honest_triton", "tail_zeroed", "honest_torch", "honest_triton", "honest_torch")
HACK_KINDS = ("cache_by_pointer", "deferred_output", "bf16_rounded", "side_stream")


def step_tasks(count: int) -> list[Any]:
    """The suite's tasks of the step: the fp32 and the fp16 task of each operation (no edge case), fp32 first."""
    plain = [t for t in resolve("builtin:all") if not t.case]
    ordered = [t for t in plain if t.dtype == "fp32"] + [t for t in plain if t.dtype == "fp16"]
    if count > len(ordered):
        raise SystemExit(f"the suite has {len(ordered)} tasks for a step, not {count}")
    return ordered[:count]


def sample_kinds(samples: int, rng: random.Random) -> list[str]:
    """One task's samples: the honest ones and the bug of `HONEST_SHARE` (as far as `samples` goes), the rest
    hacks, in a drawn order."""
    kinds = list(HONEST_SHARE[:samples]) + [rng.choice(HACK_KINDS) for _ in range(samples - len(HONEST_SHARE))]
    rng.shuffle(kinds)
    return kinds


def step_lines(out: Path, tasks: int, samples: int, seed: int, small: bool = False) -> list[dict[str, str]]:
    """The step's manifest lines (each with its `kind`), task by task, its files written under `out`; `small`: the
    suite's small shapes (a CPU run)."""
    rng = random.Random(seed)
    lines = []
    for suite_task in step_tasks(tasks):
        folder = out / suite_task.name
        folder.mkdir(parents=True, exist_ok=True)
        task = folder / "reference.py"
        text = suite_task.text(suite_task.small_shape(), suite_task.small_family()) if small else suite_task.text()
        task.write_text(text)
        for index, kind in enumerate(sample_kinds(samples, rng)):
            if kind == "honest_triton":
                body = (SUITE / "candidates" / f"{suite_task.op}.py").read_text()
            else:
                body = throughput_manifest.candidate_text(kind, text, suite_task.name)
            candidate = folder / f"sample{index}_{kind}.py"
            candidate.write_text(body.rstrip() + f"\n\n# sample {index} of {suite_task.name}\n")
            lines.append({"task": str(task), "candidate": str(candidate), "kind": kind})
    return lines


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))] if ordered else float("nan")


WAYS = {"groups": "groups", "single": "single candidates"}
START = time.monotonic()  # --stop-after counts from here


def judged(key: str, args: argparse.Namespace, manifest: Path, lanes: list[str | None], group_size: int) -> dict:
    """The step judged by this judge, as groups of `group_size` (1: single candidates), into a fresh store."""
    way = WAYS[key]
    store_path = args.out / f"{key}.db"
    if store_path.exists():
        raise SystemExit(f"{store_path} exists: a store that holds records would be skipped, not judged")
    config = JudgeConfig(device=args.device, mode=args.mode, policy=args.policy, timeout_s=args.timeout)
    config = config.with_(timing=not args.no_timing)
    began = time.monotonic()
    latencies: list[float] = []

    def rewarded(item: Any, record: Any) -> None:
        latencies.append(time.monotonic() - began)
        print(
            f"  {way} +{latencies[-1]:5.0f} s  {record.task.name}/{record.candidate.name}: {record.status}",
            file=sys.stderr,
            flush=True,
        )

    with BusySampler() as busy:
        counts = run_batch(
            read_manifest(manifest),
            config,
            store_path,
            False,
            rewarded,
            lanes,
            deadline=None if args.stop_after is None else START + args.stop_after,
            spare_workers=args.spare_workers,
            group_size=group_size,
        )
    wall_s = time.monotonic() - began
    with Store(store_path) as store:
        records = list(store)
    gpus = len({lane for lane in lanes if lane is not None}) or 1
    waiting_s = sum(r.stages_s.get("waiting", 0.0) for r in records)
    work_s = sum(r.duration_s for r in records) - waiting_s  # the candidates' own work: their time less the gate's
    return {
        "way": way,
        "lanes": len(lanes),
        "gpus": gpus,
        "candidates": counts.judged,
        "wall_s": round(wall_s, 1),
        "per_gpu_minute": round(counts.judged / (wall_s / 60) / gpus, 2) if wall_s > 0 else 0.0,
        "gpu_busy_pct": busy.percent(),
        "latency_p50_s": round(percentile(latencies, 0.5), 1),
        "latency_p99_s": round(percentile(latencies, 0.99), 1),
        "wall_over_work": round(wall_s / (work_s / len(lanes)), 2) if work_s > 0 else None,
        "work_s": round(work_s, 1),
        "waiting_s": round(waiting_s, 1),
        "not_started": counts.not_started,
        "passed": sum(r.status == "PASS" for r in records),
        "verified": sum(r.verified for r in records),
        "timed": sum(bool(r.timing and r.timing.measured) for r in records),
        "errors": counts.errors,
        "store": str(store_path),
    }


def spread(lines: list[dict[str, str]], limit: int | None) -> list[dict[str, str]]:
    """At most `limit` of the step's lines, evenly spaced through it (every task's share alike when `limit`
    divides the step); all of them without a limit."""
    if limit is None or limit >= len(lines):
        return lines
    stride = len(lines) / limit
    return [lines[int(i * stride)] for i in range(limit)]


def upstream(args: argparse.Namespace, lines: list[dict[str, str]]) -> dict[str, Any]:
    """Upstream KernelBench's evaluator on the step's samples (`--upstream-limit` of them, evenly spaced), one
    fresh process each, one after another: its rate is the same on a share of the step, since nothing is shared
    between its candidates."""
    folder = args.out / "upstream"
    folder.mkdir(exist_ok=True)
    began = time.monotonic()
    with BusySampler() as busy:
        results = batch_throughput.upstream_each(args, spread(lines, args.upstream_limit), folder, began)
    wall_s = time.monotonic() - began
    (folder / "results.json").write_text(json.dumps(results, indent=1))
    seconds = [r.get("seconds", 0.0) for r in results]
    ends = [sum(seconds[: i + 1]) for i in range(len(seconds))]  # one after another: each reward at its end
    return {
        "way": "upstream, one at a time",
        "lanes": 1,
        "gpus": 1,
        "candidates": len(results),
        "wall_s": round(wall_s, 1),
        "per_gpu_minute": round(len(results) / (wall_s / 60), 2) if wall_s > 0 else 0.0,
        "gpu_busy_pct": busy.percent(),
        "latency_p50_s": round(percentile(ends, 0.5), 1),
        "latency_p99_s": round(percentile(ends, 0.99), 1),
        "wall_over_work": None,
        "passed": sum(bool(r.get("correctness")) for r in results),
        "verified": "-",
        "timed": sum((r.get("runtime") or -1) > 0 for r in results),
        "errors": sum("error" in r for r in results),
    }


def failure_kinds_differ(first: Path, second: Path) -> list[str]:
    """The items whose failure kind differs between two stores of the same manifest."""

    def by_item(path: Path) -> dict[tuple[str, str], Any]:
        with Store(path) as store:
            return {(r.task.sha256, r.candidate.sha256): r for r in store}

    a, b = by_item(first), by_item(second)
    return [
        f"{a[k].task.name}/{a[k].candidate.name}"
        for k in sorted(set(a) & set(b))
        if a[k].failure_kind != b[k].failure_kind
    ]


def markdown(rows: list[dict[str, Any]], agreement: dict[str, Any] | None, machine: str) -> str:
    lines = [
        f"Machine: {machine}.",
        "",
        "| way | lanes | candidates | step wall | per GPU-minute | GPU busy | reward latency p50 / p99 | wall over "
        "work/lanes | passed | verified | timed | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        busy = "-" if r.get("gpu_busy_pct") is None else f"{r['gpu_busy_pct']:.0f}%"
        over = "-" if r["wall_over_work"] is None else f"{r['wall_over_work']:.2f}"
        lines.append(
            f"| {r['way']} | {r['lanes']} | {r['candidates']} | {r['wall_s']:.0f} s | {r['per_gpu_minute']:.2f} | "
            f"{busy} | {r['latency_p50_s']:.0f} / {r['latency_p99_s']:.0f} s | {over} | {r['passed']} | "
            f"{r['verified']} | {r['timed']} | {r['errors']} |"
        )
    by_way = {r["way"]: r for r in rows}
    groups, single = by_way.get("groups"), by_way.get("single candidates")
    native = next((r for r in rows if r["way"].startswith("upstream")), None)
    if groups and single and single["per_gpu_minute"]:
        lines.append(
            f"\nGroups judged {groups['per_gpu_minute'] / single['per_gpu_minute']:.2f}x the candidates "
            "per GPU-minute of single candidates on this step."
        )
    if groups and native and native["per_gpu_minute"]:
        lines.append(
            f"Groups judged {groups['per_gpu_minute'] / native['per_gpu_minute']:.2f}x the candidates per "
            "GPU-minute of upstream KernelBench's evaluator, one candidate at a time."
        )
    if agreement is not None:
        lines.append(
            f"Groups against single candidates: {agreement['items']} items, status differs on "
            f"{len(agreement['status_differs'])}, failure kind on {len(agreement['failure_kind_differs'])}, "
            f"{len(agreement['speedup_outside_interval'])} of {agreement['timed_in_both']} timed speedups outside "
            "the other's interval."
        )
    return "\n".join(lines)


def machine_name(device: str) -> str:
    """The machine in words: its GPU's name, or that it is the CPU."""
    if device == "cpu":
        return "the CPU (Triton through its interpreter)"
    import torch

    return f"one {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no GPU visible"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tasks", type=int, default=16, help="tasks in the step (prompts)")
    parser.add_argument("--samples", type=int, default=8, help="samples per task (the group's size)")
    parser.add_argument("--seed", type=int, default=1, help="the draw of each task's mix of samples")
    parser.add_argument("--mode", default="enforce", choices=("audit", "enforce"))
    parser.add_argument("--policy", default="practical", choices=("strict", "practical"))
    parser.add_argument("--jobs", type=int, default=8, help="lanes per GPU (with --gpus), else on the device")
    parser.add_argument("--gpus", default=None, help="all or a comma list (as kerneljudge batch --gpus)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per worker step")
    parser.add_argument("--no-timing", action="store_true", help="correctness only")
    parser.add_argument("--small", action="store_true", help="the suite's small shapes (a run on the CPU)")
    parser.add_argument("--spare-workers", action="store_true", help="the lanes keep spare worker pairs")
    parser.add_argument(
        "--ways", nargs="*", default=["groups", "single"], choices=("groups", "single"), help="this judge's ways"
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        help="seconds from the start: no judgment of this judge's ways starts later (the counts say how many did not)",
    )
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout: also upstream's evaluator")
    parser.add_argument(
        "--upstream-limit", type=int, help="upstream's evaluator on this many samples, evenly spaced (its rate)"
    )
    parser.add_argument(
        "--join",
        type=Path,
        nargs="+",
        default=[],
        help="--out folders of earlier runs of the same step (tasks, samples, seed): their rows and stores join "
        "this run's table and agreement (a step split over calls of a limited machine)",
    )
    parser.add_argument("--out", type=Path, required=True, help="a new or empty folder: manifest, stores, JSON")
    args = parser.parse_args(argv)
    if args.upstream_limit is not None and args.upstream_limit < 1:
        parser.error("--upstream-limit must be at least 1")
    for folder in args.join:
        if not (folder / "step.json").is_file():
            parser.error(f"--join {folder}: no step.json there")
    args.out.mkdir(parents=True, exist_ok=True)
    lines = step_lines(args.out / "step", args.tasks, args.samples, args.seed, args.small)
    kinds = {line["candidate"]: line.pop("kind") for line in lines}
    manifest = args.out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (args.out / "kinds.json").write_text(json.dumps(kinds, indent=1))
    lanes = lanes_for(args.device, args.gpus, args.jobs)
    rows: list[dict[str, Any]] = [
        row for folder in args.join for row in json.loads((folder / "step.json").read_text())["rows"]
    ]
    report = args.out / "step.json"
    for key in args.ways:
        rows.append(judged(key, args, manifest, lanes, args.samples if key == "groups" else 1))
        report.write_text(json.dumps({"rows": rows}, indent=1))
    if args.kernelbench is not None:
        rows.append(upstream(args, lines))
        report.write_text(json.dumps({"rows": rows}, indent=1))
    agreement = None
    stores = {
        key: next((f / f"{key}.db" for f in [args.out, *args.join] if (f / f"{key}.db").is_file()), None)
        for key in WAYS
    }
    if stores["groups"] is not None and stores["single"] is not None:
        agreement = batch_throughput.agreement(stores["groups"], stores["single"])
        agreement["failure_kind_differs"] = failure_kinds_differ(stores["groups"], stores["single"])
    report.write_text(json.dumps({"rows": rows, "agreement": agreement}, indent=1))
    print(markdown(rows, agreement, machine_name(args.device)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
