"""Batch throughput: candidates judged per GPU-minute, hardened against native, on the same candidates.

One manifest of the packaged examples (each task's candidates) and red-team fixtures (honest kernels and
reward hacks, each against its task), in that order, cut to `--limit`; judged by `kerneljudge batch`
once per mode asked for (default: `enforce`, then `off`, KernelBench's native checks and timer), each
into its own store under `--out`, with the same lanes. The stores stay for `kerneljudge report`.

    python benchmarks/batch_throughput.py --device cuda --jobs 4 --limit 32 --out tp > table.md
    python benchmarks/batch_throughput.py --device cuda --gpus 0 all --jobs 4 --modes enforce --limit 40 --out tp2
    python benchmarks/batch_throughput.py --manifest real --modes enforce --jobs 8 --kernelbench ../KernelBench \\
        --out tp3

`--manifest real` judges real-size work instead (throughput_manifest.py: the built-in suite's eight fp32 tasks
of 64 and 128 MiB tensors, each with two honest candidates, four reward hacks and a bug), and the table says
how many honest candidates were verified and how many of the others were not. `--kernelbench PATH` also
runs upstream KernelBench's own evaluator on the same manifest, one fresh process per candidate as its
scripts do (upstream_eval.py), for candidates per GPU-minute side by side; without it that half is skipped
with a message.

With several `--gpus` sets (`--jobs` lanes per GPU of each set) the manifest is judged once per set and mode,
and the first two runs of a mode are compared: the same status for every item, and each timed speedup
inside the other run's interval.

Prints a Markdown table: per mode, the candidates judged, the wall time, candidates per GPU-minute
(candidates / minutes / GPUs in use), how many passed, how many were verified, how many were timed.
Writes the same figures to `--out/throughput.json` after each mode, so a run cut short keeps what it
measured. docs/batch.md keeps the table measured on an H200.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import throughput_manifest
import upstream_eval
from gpu_busy import BusySampler

from kerneljudge.config import JudgeConfig
from kerneljudge.redteam import FIXTURES_DIR, TASKS_DIR
from kerneljudge.redteam.suite import FIXTURES
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import read_manifest, run_batch

ROOT = Path(__file__).resolve().parents[1]


def manifest_lines(device: str) -> list[dict[str, str]]:
    """The examples' candidates, then every red-team fixture that runs on this device, as manifest items."""
    lines = [
        {"task": str(example / "reference.py"), "candidate": str(candidate)}
        for example in sorted((ROOT / "examples").iterdir())
        for candidate in sorted(example.glob("candidate_*.py"))
    ]
    lines += [
        {"task": str(TASKS_DIR / f"{fixture.task}.py"), "candidate": str(FIXTURES_DIR / f"{fixture.name}.py")}
        for fixture in FIXTURES
        if device == "cuda" or not fixture.cuda_only
    ]
    return lines


def judged(
    mode: str,
    args: argparse.Namespace,
    manifest: Path,
    lanes: list[str | None],
    store_path: Path,
    kinds: dict[str, str],
) -> dict[str, Any]:
    config = JudgeConfig(device=args.device, mode=mode, policy=args.policy, timeout_s=args.timeout)
    config = config.with_(timing_warm=args.timing_warm, timing_carry=args.timing_carry, timing_ahead=args.timing_ahead)
    if store_path.exists():
        raise SystemExit(f"{store_path} exists: a store that holds records would be skipped, not timed")
    began = time.monotonic()

    def judged_one(item: Any, record: Any) -> None:  # progress on stderr: how far a run cut short got
        print(
            f"  {mode} +{time.monotonic() - began:5.0f} s  {record.task.name}/{record.candidate.name}: "
            f"{record.status} ({record.duration_s:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    with BusySampler() as busy:
        counts = run_batch(
            read_manifest(manifest), config, store_path, False, judged_one, lanes, spare_workers=args.spare_workers
        )
    wall_s = time.monotonic() - began
    with Store(store_path) as store:
        records = list(store)
    gpus = len({lane for lane in lanes if lane is not None}) or 1
    by_kind = kind_counts(kinds, [(str(r.candidate.path), r.verified) for r in records])
    return {
        **by_kind,
        **greeted_ahead(records),
        "mode": mode,
        "timing_method": config.resolved_timing_method(),
        "lanes": len(lanes),
        "spare_workers": args.spare_workers,
        "timing_warm": args.timing_warm,
        "timing_carry": args.timing_carry,
        "timing_ahead": args.timing_ahead,
        "gpus": gpus if args.device == "cuda" else 0,
        "candidates": counts.judged,
        "wall_s": round(wall_s, 1),
        "per_gpu_minute": counts.judged / (wall_s / 60) / gpus,
        "passed": sum(r.status == "PASS" for r in records),
        "verified": sum(r.verified for r in records),
        "timed": sum(bool(r.timing and r.timing.measured) for r in records),
        "errors": counts.errors,
        "gpu_busy_pct": busy.percent(),
        "store": str(store_path),
    }


def kind_counts(kinds: dict[str, str], answers: list[tuple[str, bool]]) -> dict[str, str]:
    """Of the candidates whose kind the manifest gave, how many honest ones were accepted (`accepted` true) and
    how many of the others were not; "-" for a manifest without kinds."""
    if not kinds:
        return {"honest_verified": "-", "others_rejected": "-"}
    honest = [ok for path, ok in answers if kinds.get(path) in throughput_manifest.HONEST]
    others = [not ok for path, ok in answers if path in kinds and kinds[path] not in throughput_manifest.HONEST]
    return {"honest_verified": f"{sum(honest)}/{len(honest)}", "others_rejected": f"{sum(others)}/{len(others)}"}


def upstream(args: argparse.Namespace, lines: list[dict[str, str]], kinds: dict[str, str]) -> dict[str, Any]:
    """Upstream KernelBench's evaluator on every item, one fresh process each, one after another (as its
    scripts run it); the same figures as a mode's row."""
    folder = args.out / "upstream"
    folder.mkdir(exist_ok=True)
    began = time.monotonic()
    with BusySampler() as busy:
        results = upstream_each(args, lines, folder, began)
    wall_s = time.monotonic() - began
    (folder / "results.json").write_text(json.dumps(results, indent=1))
    by_kind = kind_counts(kinds, [(r["candidate"], bool(r.get("correctness"))) for r in results])
    return {
        "mode": "upstream",
        "timing_method": (
            f"eval_kernel_against_ref ({upstream_eval.CORRECT_TRIALS} trials, {upstream_eval.PERF_TRIALS} runs)"
        ),
        "gpu_set": "default",
        "lanes": 1,
        "gpus": 1,
        "candidates": len(results),
        "wall_s": round(wall_s, 1),
        "per_gpu_minute": len(results) / (wall_s / 60) if wall_s > 0 else 0.0,
        "gpu_busy_pct": busy.percent(),
        "passed": sum(bool(r.get("correctness")) for r in results),
        "verified": "-",
        "timed": sum((r.get("runtime") or -1) > 0 for r in results),
        "errors": sum("error" in r for r in results),
        **by_kind,
    }


def upstream_each(
    args: argparse.Namespace, lines: list[dict[str, str]], folder: Path, began: float
) -> list[dict[str, Any]]:
    """Each item's answer from upstream's evaluator, in a fresh process of its own."""
    results = []
    for number, line in enumerate(lines):
        answer = folder / f"{number:03d}.json"
        command = [
            sys.executable,
            str(ROOT / "benchmarks" / "upstream_eval.py"),
            "--kernelbench",
            str(args.kernelbench),
        ]
        command += ["--task", line["task"], "--candidate", line["candidate"], "--json", str(answer)]
        try:
            done = subprocess.run(command, timeout=4 * args.timeout, capture_output=True, text=True, check=False)
            if answer.is_file():
                result = json.loads(answer.read_text())
            else:  # the process died before answering: keep why
                result = {"error": f"no answer (exit {done.returncode}): {done.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            result = {"error": f"still running after {4 * args.timeout:.0f} s"}
        results.append({**result, "candidate": line["candidate"]})
        print(
            f"  upstream +{time.monotonic() - began:5.0f} s  {Path(line['candidate']).parent.name}/"
            f"{Path(line['candidate']).stem}: {result.get('correctness', result.get('error'))}",
            file=sys.stderr,
            flush=True,
        )
    return results


def agreement(first: Path, second: Path) -> dict[str, Any]:
    """Do two stores of the same manifest agree? Same status per item, and each timed speedup inside the
    other run's interval for it (both ways)."""

    def by_item(path: Path) -> dict[tuple[str, str], Any]:
        with Store(path) as store:
            return {(r.task.sha256, r.candidate.sha256): r for r in store}

    a, b = by_item(first), by_item(second)
    common = sorted(set(a) & set(b))
    statuses = [k for k in common if a[k].status != b[k].status]

    def inside(record: Any, other: Any) -> bool:
        low_high = other.timing.speedup_interval if other.timing else None
        return not low_high or low_high[0] <= record.timing.speedup <= low_high[1]

    timed = [k for k in common if a[k].timing and a[k].timing.speedup and b[k].timing and b[k].timing.speedup]
    outside = [k for k in timed if not (inside(a[k], b[k]) and inside(b[k], a[k]))]
    differences = [abs(math.log(a[k].timing.speedup / b[k].timing.speedup)) for k in timed]
    name = {k: f"{a[k].task.name}/{a[k].candidate.name}" for k in common}
    return {
        "stores": [str(first), str(second)],
        "items": len(common),
        "status_differs": [name[k] for k in statuses],
        "timed_in_both": len(timed),
        "speedup_outside_interval": [
            f"{name[k]}: {a[k].timing.speedup:.4f}x vs {b[k].timing.speedup:.4f}x" for k in outside
        ],
        # the largest ratio between the two runs' speedups of one item, as a percentage (0 when none timed)
        "largest_difference_pct": round(100 * (math.exp(max(differences, default=0.0)) - 1), 2),
    }


GREETED_S = 0.05  # a worker's hello read within this long was waiting already: it started before its judgment


def greeted_ahead(records: list[Any]) -> dict[str, str]:
    """How many judgments found their pairs started and greeted before they began (a spare that had finished
    starting: its reference's hello already waiting), the checked pair and the timing pair apart (greeted in the
    timing stage, or by the thread of timing ahead); in a batch of several lanes on one GPU the lanes share one
    queue of spares (judgment/stages/spare_pairs.py), so this says whether the spares kept up with the takes."""
    checked = [r.stages_s["build.reference.hello"] for r in records if "build.reference.hello" in r.stages_s]
    timing = [
        r.stages_s.get("timing.reference.hello", r.stages_s.get("ahead.reference.hello"))
        for r in records
        if "timing.reference.hello" in r.stages_s or "ahead.reference.hello" in r.stages_s
    ]

    def share(waits: list[float]) -> str:
        return f"{sum(wait < GREETED_S for wait in waits)}/{len(waits)}" if waits else "-"

    return {"greeted_checked": share(checked), "greeted_timing": share(timing)}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| mode | timer | GPUs | lanes | candidates | wall | per GPU-minute | GPU busy | passed | verified | timed "
        "| errors | honest verified | others not verified | pairs greeted ahead: checked, timing |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mode = r["mode"] + (" (spare workers)" if r.get("spare_workers") else "")
        mode += " (timing warm)" if r.get("timing_warm") else ""
        mode += " (timing carry)" if r.get("timing_carry") else ""
        mode += " (timing ahead)" if r.get("timing_ahead") else ""
        busy = "-" if r.get("gpu_busy_pct") is None else f"{r['gpu_busy_pct']:.0f}%"
        lines.append(
            f"| {mode} | {r['timing_method']} | {r['gpu_set']} | {r['lanes']} | {r['candidates']} | "
            f"{r['wall_s']:.0f} s | {r['per_gpu_minute']:.2f} | {busy} | {r['passed']} | {r['verified']} | "
            f"{r['timed']} | {r['errors']} | {r['honest_verified']} | {r['others_rejected']} | "
            f"{r.get('greeted_checked', '-')}, {r.get('greeted_timing', '-')} |"
        )
    native = [r for r in rows if r["mode"] == "upstream"]
    for hardened in [r for r in rows if r["mode"] == "enforce"]:
        if native and native[0]["per_gpu_minute"] > 0:
            ratio = hardened["per_gpu_minute"] / native[0]["per_gpu_minute"]
            lines.append(
                f"\nenforce with {hardened['lanes']} lanes judged {ratio:.2f}x the candidates per GPU-minute of "
                "upstream KernelBench's evaluator."
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--modes", nargs="+", default=["enforce", "off"], choices=("off", "audit", "enforce"))
    parser.add_argument("--policy", default="practical", choices=("strict", "practical"))
    parser.add_argument(
        "--jobs",
        type=int,
        nargs="+",
        default=[1],
        help="lanes per GPU with --gpus, else lanes on the one device; several (--jobs 1 2 4 8) judge the manifest "
        "once with each (lane scaling)",
    )
    parser.add_argument(
        "--gpus",
        nargs="+",
        help="`--jobs` lanes per GPU: all or a comma list (as kerneljudge batch --gpus); several (--gpus 0 all) judge "
        "the manifest once with each, and the first two runs of a mode are compared",
    )
    parser.add_argument("--limit", type=int, help="judge only the first N candidates of the manifest")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per worker step")
    parser.add_argument("--out", type=Path, required=True, help="a new or empty folder: manifest, stores, JSON")
    parser.add_argument("--manifest", default="fixtures", choices=("fixtures", "real"), help="what to judge")
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout: also run upstream's evaluator")
    parser.add_argument(
        "--spare-workers",
        action="store_true",
        help="the judge's lanes keep spare worker pairs (judgment/stages/spare_pairs.py)",
    )
    parser.add_argument(
        "--timing-warm", action="store_true", help="the judge's first calls before the measuring hold (timing_warm)"
    )
    parser.add_argument(
        "--timing-carry", action="store_true", help="the candidates' compiler caches carried to the timing worker"
    )
    parser.add_argument(
        "--timing-ahead", action="store_true", help="the timing pair made ready while correctness runs (timing_ahead)"
    )
    args = parser.parse_args(argv)
    if args.timing_carry and args.timing_ahead:
        parser.error("--timing-carry and --timing-ahead do not go together (JudgeConfig)")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.manifest == "real":
        lines = throughput_manifest.write(args.out / "real")[: args.limit]
    else:
        lines = manifest_lines(args.device)[: args.limit]
    kinds = {line["candidate"]: line.pop("kind") for line in lines if "kind" in line}
    manifest = args.out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    gpu_sets = args.gpus or [None]
    rows: list[dict[str, Any]] = []
    compared: list[dict[str, Any]] = []
    for mode in args.modes:
        stores = []
        for gpus, jobs in [(gpus, jobs) for gpus in gpu_sets for jobs in args.jobs]:
            lanes = lanes_for(args.device, gpus, jobs)
            suffix = "" if gpus is None else f"-gpus-{gpus.replace(',', '_')}"
            suffix += "" if len(args.jobs) == 1 else f"-jobs-{jobs}"
            stores.append(args.out / f"{mode}{suffix}.db")
            rows.append({**judged(mode, args, manifest, lanes, stores[-1], kinds), "gpu_set": gpus or "default"})
            print(f"{mode}: {rows[-1]['candidates']} judged in {rows[-1]['wall_s']} s", file=sys.stderr, flush=True)
            (args.out / "throughput.json").write_text(json.dumps({"rows": rows, "agreement": compared}, indent=2))
        if len(stores) > 1:
            compared.append({"mode": mode, **agreement(stores[0], stores[1])})
            (args.out / "throughput.json").write_text(json.dumps({"rows": rows, "agreement": compared}, indent=2))
    if args.kernelbench is None:
        print("upstream KernelBench not measured: give --kernelbench PATH (a KernelBench checkout)", file=sys.stderr)
    elif args.device != "cuda":
        print("upstream KernelBench not measured: its evaluator needs CUDA", file=sys.stderr)
    else:
        rows.append(upstream(args, lines, kinds))
        (args.out / "throughput.json").write_text(json.dumps({"rows": rows, "agreement": compared}, indent=2))
    print(markdown(rows))
    for check in compared:
        print(
            f"\n{check['mode']}: {check['items']} items in both runs; status differs for "
            f"{len(check['status_differs'])} {check['status_differs']}; of {check['timed_in_both']} timed in both, "
            f"{len(check['speedup_outside_interval'])} speedups outside the other run's interval "
            f"{check['speedup_outside_interval']}; the largest difference {check['largest_difference_pct']}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
