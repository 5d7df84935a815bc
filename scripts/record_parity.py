"""Judge the built-in suite's reference candidates on the CPU with a fixed source of randomness and write every
record, less what differs from run to run, as one JSON line each: the same judge code must write the same lines.

Run it with two versions of the source (PYTHONPATH) and compare the files, to show that a change of structure
changed no verdict, no finding and no figure of correctness:

    PYTHONPATH=ext/before/src python scripts/record_parity.py --out before.jsonl
    PYTHONPATH=src python scripts/record_parity.py --out after.jsonl
    python scripts/record_parity.py --compare before.jsonl after.jsonl

Left out of each record: times and durations (keys ending in `_s` or `_ms`, `created_at`, `seconds`), paths
and the judge's version, the sandbox layers' details (a worker's random uid, its fresh root's folder), the
machine's own figures (memory peaks, process ids) and timing (judged with
`timing=False`, since timed figures are samples of a clock). The hidden plan is drawn from `--seed` per item.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DROPPED = {
    "created_at",
    "path",
    "kerneljudge_version",
    "kerneljudge",
    "seconds",
    "pid",
    "memory_peaks",
    "peak_bytes",
    "stages",
}
DROPPED_SUFFIXES = ("_s", "_ms", "_ns", "_us")


def normalized(value: Any, key: str = "") -> Any:
    """The record's JSON without what differs between two runs of the same code."""
    if isinstance(value, dict):
        if key == "sandbox_layers":  # each layer's state, not its detail (a worker's random uid, its root's folder)
            return {
                name: normalized({k: v for k, v in layer.items() if k != "detail"}) for name, layer in value.items()
            }
        return {
            name: normalized(item, name)
            for name, item in sorted(value.items())
            if name not in DROPPED and not name.endswith(DROPPED_SUFFIXES)
        }
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def judge_suite(out: Path, modes: list[str], seed: int, jobs: int, only: str) -> None:
    from kerneljudge import JudgeConfig, judge, suite

    work = out.parent / (out.stem + "-tasks")
    work.mkdir(parents=True, exist_ok=True)
    items = []
    for task in suite.resolve(only):
        path = work / f"{task.name}.py"
        path.write_text(task.text(task.small_shape(), task.small_family()))
        for mode in modes:
            items.append((mode, task.name, path, task.candidate_path()))

    def one(item: tuple[str, str, Path, Path]) -> str:
        mode, name, task_path, candidate_path = item
        config = JudgeConfig(device="cpu", mode=mode, policy="strict", timing=False)
        record = judge(task_path, candidate_path, config, rng=random.Random(f"{seed}:{mode}:{name}"))
        print(f"{mode:8} {name}: {record.status}", file=sys.stderr, flush=True)
        return json.dumps({"mode": mode, "task": name, "record": normalized(json.loads(record.to_json()))})

    with ThreadPoolExecutor(jobs) as pool:
        lines = list(pool.map(one, items))
    out.write_text("\n".join(sorted(lines)) + "\n")


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'after' if key in b else 'before'}")
            else:
                out += differences(a[key], b[key], f"{where}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"]


def compare(before: Path, after: Path) -> int:
    def load(path: Path) -> dict[tuple[str, str], Any]:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return {(row["mode"], row["task"]): row["record"] for row in rows}

    old, new = load(before), load(after)
    found = 0
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            print(f"{key}: judged in one run only")
            found += 1
            continue
        for line in differences(old[key], new[key]):
            print(f"{key[0]} {key[1]}{line}")
            found += 1
    print(f"{len(old)} and {len(new)} records compared, {found} difference(s)")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the JSONL file to write")
    parser.add_argument("--modes", nargs="+", default=["audit", "enforce"], choices=["off", "audit", "enforce"])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="builtin:all", help="builtin:NAME, builtin:OP or builtin:all")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give --out, or --compare BEFORE AFTER")
    judge_suite(args.out, args.modes, args.seed, args.jobs, args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
