"""The conformance ledger: what each judgment of the sweep came to, kept in the repository between machines.

A sweep of every public problem takes more device time than one GPU machine is lent for, and a GPU machine's
stores do not outlive it. The ledger is a JSON-lines file of one row per judgment (the outcome, the reason, the
seconds, and the keys below), with no source of any problem in it: a later run on another machine reads
it, judges only what it does not hold, and writes it out again with the new rows (`--ledger IN`, written to
`--out/ledger.jsonl`; the committed one is docs/data/conformance-ledger.jsonl).

A row answers for a judgment only for the same problem text, the same candidate text, the same timing
choice and the same judge version (`kerneljudge.__version__`, raised with every change that can alter a
verdict: docs/batch.md, "The key"), as a store's record does, with one exception: a judgment without timing
is answered by a row of an earlier version where every raise since changed only timed judgments
(`kerneljudge.UNTIMED_SAME_AS`: 0.3.2 added a check after the timing's measurement), and a judgment that
passed is answered by a passing row of an earlier version where every raise since changed only judgments
that fail in enforce mode (`kerneljudge.PASSED_SAME_AS`: 0.3.3 stopped timing a candidate whose CUDA graph
capture showed unjoined work). Rows of other versions stay in the file as history and count for nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kerneljudge import PASSED_SAME_AS, UNTIMED_SAME_AS

KEY_FIELDS = ("task_sha256", "candidate_sha256", "timing", "kerneljudge_version")
# The outcomes a rerun keeps (`--again` judges the others again).
SETTLED = ("ok", "unsupported", "degenerate_task")


def key(task_sha256: str, candidate_sha256: str, timing: bool, version: str) -> tuple[str, str, bool, str]:
    return (task_sha256, candidate_sha256, bool(timing), version)


def versions_answering(version: str, timing: bool) -> list[str]:
    """`version` and, for a judgment without timing, the versions before it back across raises that changed
    only timed judgments."""
    versions = [version]
    while not timing and versions[-1] in UNTIMED_SAME_AS:
        versions.append(UNTIMED_SAME_AS[versions[-1]])
    return versions


def key_of_row(row: dict[str, Any]) -> tuple[str, str, bool, str]:
    return key(*(row[f] for f in KEY_FIELDS))


class Ledger:
    """The rows read from a ledger file (none for None) and those added since, by key; the last row of a key
    wins, so that a judgment made again replaces the one before."""

    def __init__(self, path: Path | None = None) -> None:
        self.rows: dict[tuple[str, str, bool, str], dict[str, Any]] = {}
        if path is None:
            return
        if not path.is_file():
            raise SystemExit(f"no conformance ledger at {path}")
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                self.rows[key_of_row(row)] = row
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{number}: not a ledger row ({type(exc).__name__}: {exc})") from None

    def get(self, task_sha256: str, candidate_sha256: str, timings: Iterable[bool], version: str) -> dict | None:
        """The row that answers for this judgment with any of `timings`, in their order; None where none does.
        Without timing, a row of an earlier version answers too where every raise since changed only timed
        judgments (`kerneljudge.UNTIMED_SAME_AS`), and a passing row of an earlier version where every raise
        since changed only judgments that fail in enforce mode (`kerneljudge.PASSED_SAME_AS`)."""
        for timing in timings:
            passing_only, current = False, version
            while current is not None:
                for answering in versions_answering(current, timing):
                    row = self.rows.get(key(task_sha256, candidate_sha256, timing, answering))
                    if row is not None and (not passing_only or row.get("status") == "PASS"):
                        return row
                passing_only, current = True, PASSED_SAME_AS.get(current)
        return None

    def add(self, row: dict[str, Any]) -> None:
        self.rows[key_of_row(row)] = row

    def forget(self, task_sha256: str, candidate_sha256: str, timing: bool, version: str) -> bool:
        return self.rows.pop(key(task_sha256, candidate_sha256, timing, version), None) is not None

    def write(self, path: Path) -> None:
        """Every row, by set, problem and solution, then version and timing: a diff of two ledgers reads well."""
        order = sorted(
            self.rows.values(),
            key=lambda r: (r.get("group", ""), r.get("problem", ""), r.get("solution", ""), *map(str, key_of_row(r))),
        )
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in order))


def rows_of_report(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger rows in a sweep's report (`--out/conformance.json`): every row of it made from a record
    (a row that names its keys), of every set. A call whose stores and ledger did not come back (a device
    call returns few files) still returns its report, and the ledger is rebuilt from it."""
    rows = []
    for value in report.values():
        if isinstance(value, list):
            rows += [row for row in value if isinstance(row, dict) and all(f in row for f in KEY_FIELDS)]
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="add the rows of sweep reports (conformance.json) to a ledger")
    parser.add_argument("ledger", type=Path, help="the ledger to read and write again with the reports' rows")
    parser.add_argument("reports", type=Path, nargs="+", help="a sweep's --out/conformance.json")
    args = parser.parse_args(argv)
    ledger = Ledger(args.ledger)
    before = len(ledger.rows)
    for path in args.reports:
        for row in rows_of_report(json.loads(path.read_text())):
            ledger.add(row)
    ledger.write(args.ledger)
    print(f"{args.ledger}: {before} rows, now {len(ledger.rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
