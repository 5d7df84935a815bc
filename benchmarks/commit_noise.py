"""How far two honest processes' untimed spans differ under a batch's load: the commit check's noise.

The commit check (judgment/stages/untimed_work.py, KJ-R027) sets the candidate worker's least commit span against
the reference worker's, both on the parent's clock, and allows NOISE_SHARE of it on a CUDA device. Here every
candidate is the reference itself (`honest_torch`: the same code in the other process), at the built-in suite's
production-like sizes, judged with timing by `--jobs` lanes at once: whatever sets the two sides' spans apart is
the processes', not the work's. Per record: the ratio of the candidate's least commit span to the reference's, the
same of the medians, and the ratio of the host time per call the two workers report (the same calls), which shows
whether a side's whole process ran slower on the host; and whether KJ-R027 was found.

    python benchmarks/commit_noise.py --device cuda --jobs 8 --samples 2 --out noise > noise.md

Prints a Markdown table (the ratios' quantiles and the false KJ-R027 count) and writes each record's figures to
`--out/noise.json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import throughput_manifest
import training_step

from kerneljudge.config import JudgeConfig
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import read_manifest, run_batch


def honest_lines(out: Path, tasks: int, samples: int, small: bool) -> list[dict[str, str]]:
    """`samples` honest torch candidates (each text its own) of each of the step's first `tasks` tasks."""
    lines = []
    for suite_task in training_step.step_tasks(tasks):
        folder = out / suite_task.name
        folder.mkdir(parents=True, exist_ok=True)
        text = suite_task.text(suite_task.small_shape(), suite_task.small_family()) if small else suite_task.text()
        (folder / "reference.py").write_text(text)
        for index in range(samples):
            candidate = folder / f"honest_torch{index}.py"
            body = throughput_manifest.candidate_text("honest_torch", text, suite_task.name)
            candidate.write_text(body.rstrip() + f"\n\n# sample {index} of {suite_task.name}\n")
            lines.append({"task": str(folder / "reference.py"), "candidate": str(candidate)})
    return lines


def figures(record: Any) -> dict[str, Any] | None:
    """One record's commit and host-time ratios (candidate over reference), or None where it was not timed."""
    timing = record.timing
    commit = (timing.untimed_work or {}).get("commit", {}) if timing else {}
    if "candidate_least_ms" not in commit or not timing.host_ms_per_call:
        return None
    host = timing.host_ms_per_call
    return {
        "item": f"{record.task.name}/{record.candidate.name}",
        "least_ratio": commit["candidate_least_ms"] / commit["reference_least_ms"],
        "median_ratio": commit["candidate_median_ms"] / commit["reference_median_ms"],
        "host_ratio": host["candidate"] / host["reference"] if host.get("reference") else None,
        "reference_least_ms": commit["reference_least_ms"],
        "r027": any(f.code == "KJ-R027" for f in record.findings),
        "status": record.status,
    }


def quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    pick = [ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] for q in (0.0, 0.5, 0.9, 1.0)]
    return " / ".join(f"{v:.2f}" for v in pick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tasks", type=int, default=16, help="the step's tasks (training_step.py)")
    parser.add_argument("--samples", type=int, default=2, help="honest candidates per task")
    parser.add_argument("--jobs", type=int, default=8, help="lanes")
    parser.add_argument("--small", action="store_true", help="the suite's small shapes (a run on the CPU)")
    parser.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = args.out / "manifest.jsonl"
    lines = honest_lines(args.out / "tasks", args.tasks, args.samples, args.small)
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store_path = args.out / "noise.db"
    config = JudgeConfig(device=args.device, mode="enforce", policy="practical")
    run_batch(read_manifest(manifest), config, store_path, False, None, lanes_for(args.device, None, args.jobs))
    with Store(store_path) as store:
        records = list(store)
    rows = [row for row in (figures(r) for r in records) if row is not None]
    (args.out / "noise.json").write_text(json.dumps(rows, indent=1))
    host = [r["host_ratio"] for r in rows if r["host_ratio"] is not None]
    flagged = [r for r in rows if r["r027"]]
    print(f"Machine: {training_step.machine_name(args.device)}; {len(records)} honest candidates, {args.jobs} lanes.\n")
    print("| figure (candidate over reference) | least / median / p90 / most |")
    print("|---|---|")
    print(f"| least commit span | {quantiles([r['least_ratio'] for r in rows])} |")
    print(f"| median commit span | {quantiles([r['median_ratio'] for r in rows])} |")
    print(f"| host time per call (worker's own) | {quantiles(host)} |")
    if len(host) > 2:
        paired = [(r["least_ratio"], r["host_ratio"]) for r in rows if r["host_ratio"] is not None]
        print(
            f"\nCorrelation of the least commit ratio with the host-time ratio: "
            f"{statistics.correlation([a for a, _ in paired], [b for _, b in paired]):.2f}."
        )
    print(
        f"Honest candidates found KJ-R027: {len(flagged)} of {len(rows)} timed ("
        f"{', '.join(r['item'] for r in flagged) or 'none'})."
    )
    print(f"passed: {sum(r.status == 'PASS' for r in records)} of {len(records)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
