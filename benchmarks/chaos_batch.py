"""A batch of hostile candidates mixed with honest ones: does the trusted side come through whole?

Writes `--hostile` candidates drawn by kerneljudge/redteam/chaos.py (each leaves one to three kinds of hostile
artefact in its workspace: deep folder chains, wide folders, odd names, links, huge sparse files, locked modes,
FIFOs and sockets, at its construction, its first call or its exit) and `--honest` honest ones, shuffled into one
manifest, and judges them with `kerneljudge batch` under a temporary folder of its own. With `--kill-after N` the
batch is SIGKILLed once N records are stored and run again to the end, as a crashed batch would be resumed.

Then it checks and tables what the issue asks of the judge: no judge ERROR, no honest candidate rejected, nothing
left in the temporary folder, the store's integrity check clean; and how the hostile candidates were judged (by
status and by the kinds they left). It exits 1 when a check fails.

    python benchmarks/chaos_batch.py --hostile 200 --honest 20 --jobs 2 --markdown chaos.md
    python benchmarks/chaos_batch.py --device cuda --hostile 200 --honest 20 --jobs 8 --kill-after 40

docs/security.md keeps the tables measured ("The chaos suite").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kerneljudge import __version__
from kerneljudge.redteam import chaos


def stored(store: Path) -> list[dict]:
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store) as conn:
            return [json.loads(row[0]) for row in conn.execute("SELECT record_json FROM judgments")]
    except sqlite3.OperationalError:  # the batch has not made its tables yet
        return []


def run_batch(
    args: argparse.Namespace, manifest: Path, store: Path, tmp: Path, kill_after: int | None, deadline: float
) -> int:
    command = [sys.executable, "-m", "kerneljudge", "batch", str(manifest), "--store", str(store)]
    command += ["--device", args.device, "--mode", args.mode, "--policy", "practical", "--jobs", str(args.jobs)]
    command += ["--no-timing", "--timeout", "180"] + (["--gpus", "all"] if args.device == "cuda" else [])
    env = {**os.environ, "TMPDIR": str(tmp)}
    with (store.parent / "batch.log").open("ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        while proc.poll() is None and time.monotonic() < deadline:
            if kill_after is not None and len(stored(store)) >= kill_after:
                break
            time.sleep(1)
        if proc.poll() is None:  # killed in the middle, as a crash or a machine's limit would end it
            proc.send_signal(signal.SIGKILL)
        return proc.wait()


def table(rows: list[tuple[str, ...]], head: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=200)
    parser.add_argument("--honest", type=int, default=20)
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--mode", choices=("audit", "enforce", "off"), default="audit")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--kill-after", type=int, default=None, help="SIGKILL the batch after N records, then rerun")
    parser.add_argument("--out", type=Path, default=None, help="keep the manifest, store and logs here")
    parser.add_argument("--resume", type=Path, default=None, help="start from this store (a copy of it)")
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="SIGKILL the batch then, and table what it judged"
    )
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="chaos-batch-"))
    tmp = out / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    cases = chaos.generated_cases(args.hostile, args.seed)
    manifest = chaos.write_manifest(out / "items", cases, honest=args.honest, seed=args.seed)
    store = out / "results.db"
    if args.resume is not None:  # a store another run began, its WAL folded in (sqlite's backup)
        with sqlite3.connect(args.resume) as source, sqlite3.connect(store) as copy:
            source.backup(copy)
    resumed = len(stored(store))
    began = time.monotonic()
    deadline = began + (args.max_seconds if args.max_seconds is not None else 1e9)
    first_rc = run_batch(args, manifest, store, tmp, args.kill_after, deadline)
    rerun_rc = run_batch(args, manifest, store, tmp, None, deadline) if args.kill_after is not None else None
    wall_s = time.monotonic() - began

    records = {Path(r["candidate"]["path"]).stem: r for r in stored(store)}
    kinds = {f"{c.name}-{c.moment}": [k for k, _ in c.actions] for c in cases}
    errors = sorted(n for n, r in records.items() if r["status"] == "ERROR")
    honest_rejected = sorted(n for n, r in records.items() if n.startswith("honest") and r["status"] != "PASS")
    missing = sorted((set(kinds) | {f"honest{n:03d}" for n in range(args.honest)}) - set(records))
    left = sorted(n for n in os.listdir(tmp) if n.startswith("kerneljudge-") and "bytecode" not in n)
    with sqlite3.connect(store) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]

    by_kind: dict[str, Counter[str]] = {}
    for name, record in records.items():
        for kind in kinds.get(name, ["honest"]):
            codes = {f["code"] for f in record["findings"]}
            outcome = record["status"] + (" KJ-R070" if "KJ-R070" in codes else "")
            by_kind.setdefault(kind, Counter())[outcome] += 1
    machine = f"{platform.machine()}, {os.cpu_count()} cores" + (", CUDA" if args.device == "cuda" else "")
    checks = [
        ("judge ERRORs", str(len(errors)), "0"),
        ("honest candidates rejected", str(len(honest_rejected)), "0"),
        ("items without a record", str(len(missing)), "0"),
        ("workspaces left in the temporary folder", str(len(left)), "0"),
        ("store integrity_check", integrity, "ok"),
    ]
    text = "\n\n".join(
        [
            f"{time.strftime('%Y-%m-%d')}, kerneljudge {__version__}, {args.device} ({machine}), mode {args.mode}, "
            f"{args.hostile} hostile + {args.honest} honest candidates, {args.jobs} lanes, "
            + (f"{resumed} records resumed from an earlier run's store, " if args.resume else "")
            + (f"SIGKILLed after {args.kill_after} records and rerun, " if args.kill_after else "")
            + f"{wall_s:.0f} s in all (batch exits {first_rc}, {rerun_rc})",
            table([(what, got, want) for what, got, want in checks], ("check", "measured", "expected")),
            table(
                [(kind, ", ".join(f"{n} {o}" for o, n in sorted(c.items()))) for kind, c in sorted(by_kind.items())],
                ("artefact left", "verdicts (a candidate with several kinds counts under each)"),
            ),
        ]
    )
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    failed = [what for what, got, want in checks if got != want]
    if failed:
        print(f"failed: {', '.join(failed)}; errors {errors[:5]} rejected {honest_rejected[:5]} left {left[:5]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
