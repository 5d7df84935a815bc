"""The built-in suite's reference Triton candidates, judged: status and speedup per task.

Writes a manifest of every built-in task (`builtin:NAME`, or those named by --only) with its operation's
reference candidate, judges it with `kerneljudge batch` (enforce mode, strict policy by default) into
`--out/suite.db`, and prints a Markdown table: per task, its dtype and shape, the status, whether verified,
the reference's and the candidate's median time per call, the speedup with its interval, and the calls per
sample. docs/tasks.md keeps the table measured on an H200.

    python benchmarks/suite_candidates.py --device cuda --jobs 4 --out suite-run > table.md
    python benchmarks/suite_candidates.py --device cpu --small --only builtin:softmax --out cpu-run
    python benchmarks/suite_candidates.py --out suite-run --table-only    # the table of a store, judging nothing

A store already in --out is resumed: its judged tasks are skipped (same configuration and machine), so a run
cut short by a time limit goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from kerneljudge import suite
from kerneljudge.config import JudgeConfig
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import BatchItem, run_batch


def row(task: suite.SuiteTask, record: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    timing = record.timing if record.timing and record.timing.measured else None
    return {
        "task": task.name,
        "dtype": task.dtype,
        "shape": "x".join(map(str, shape)),
        "status": record.status,
        "verified": record.verified,
        "failure": record.failure.summary if record.failure else None,
        "reference_us": timing.reference.median_ms * 1e3 if timing else None,
        "candidate_us": timing.candidate.median_ms * 1e3 if timing else None,
        "speedup": timing.speedup if timing else None,
        "interval": timing.speedup_interval if timing else None,
        "calls_per_sample": timing.calls_per_sample if timing else None,
        "not_timed": None if timing else (record.timing.reason if record.timing else None),
        "shape_trials": [t.shape for t in record.correctness.trials if t.kind == "shape"],
        "duration_s": record.duration_s,
        "stages_s": record.stages_s,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| task | dtype | shape | status | verified | hidden shapes | reference | candidate | speedup (95% interval) "
        "| calls/sample | wall (correctness, timing) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["speedup"] is None:
            timed = ("-", "-", r["not_timed"] or "-", "-")
        else:
            low, high = r["interval"] or (r["speedup"], r["speedup"])
            calls = r["calls_per_sample"]
            timed = (
                f"{r['reference_us']:.1f} us",
                f"{r['candidate_us']:.1f} us",
                f"{r['speedup']:.3f}x ({low:.3f}-{high:.3f})",
                f"{calls.get('reference')} / {calls.get('candidate')}",
            )
        verdict = r["status"] if not r["failure"] else f"{r['status']}: {r['failure'][:80]}"
        shapes = ", ".join("x".join(map(str, s["SHAPE"])) for s in r["shape_trials"] if "SHAPE" in s) or "-"
        stages = r["stages_s"]
        wall = f"{r['duration_s']:.0f} s ({stages.get('correctness', 0):.0f}, {stages.get('timing', 0):.0f})"
        lines.append(
            f"| {r['task']} | {r['dtype']} | {r['shape']} | {verdict} | {'yes' if r['verified'] else 'no'} | "
            f"{shapes} | " + " | ".join(timed) + f" | {wall} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--mode", default="enforce", choices=("off", "audit", "enforce"))
    parser.add_argument("--policy", default="strict", choices=("strict", "practical"))
    parser.add_argument("--jobs", type=int, default=1, help="lanes (per GPU with --gpus)")
    parser.add_argument("--gpus", help="lanes on these GPUs (as kerneljudge batch --gpus)")
    parser.add_argument("--only", nargs="+", default=["builtin:all"], help="builtin:NAME, builtin:OP or builtin:all")
    parser.add_argument("--small", action="store_true", help="judge each task at its small CPU-test shape")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker step")
    parser.add_argument(
        "--out", type=Path, required=True, help="a folder for the store and JSON; a store there is resumed"
    )
    parser.add_argument("--table-only", action="store_true", help="judge nothing: the table of the store in --out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = list(dict.fromkeys(task for spec in args.only for task in suite.resolve(spec)))
    items = []
    for task in chosen:
        path = Path(f"builtin:{task.name}")
        if args.small:  # a task file at the small shape and family, beside the store
            path = args.out / "tasks" / f"{task.name}.py"
            path.parent.mkdir(exist_ok=True)
            path.write_text(task.text(task.small_shape(), task.small_family()))
        items.append(BatchItem(path, task.candidate_path(), task.name))
    config = JudgeConfig(
        device=args.device, mode=args.mode, policy=args.policy, timeout_s=args.timeout, timing=not args.no_timing
    )
    began = time.monotonic()

    def judged(item: Any, record: Any) -> None:
        print(f"  +{time.monotonic() - began:5.0f} s  {item.where}: {record.status}", file=sys.stderr, flush=True)

    store = args.out / "suite.db"
    if not args.table_only:
        run_batch(items, config, store, False, judged, lanes_for(args.device, args.gpus, args.jobs))
    with Store(store) as s:
        by_name = {record.task.name: record for record in s}
    rows = [
        row(task, by_name[task.name], task.small_shape() if args.small else task.shape)
        for task in chosen
        if task.name in by_name
    ]
    (args.out / "suite.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))
    print(f"\n{sum(r['verified'] for r in rows)} of {len(rows)} verified in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
