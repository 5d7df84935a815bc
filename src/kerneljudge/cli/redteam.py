"""`kerneljudge redteam`: the red-team suite's fixtures judged, each against the outcome it must have."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kerneljudge.cli.judge import TIMING_AHEAD_HELP, TIMING_CARRY_HELP
from kerneljudge.cli.options import add_judge_options
from kerneljudge.cli.usage import positive_int
from kerneljudge.errors import UsageError


def add_redteam_parser(sub: Any) -> None:
    r = sub.add_parser("redteam", help="run the red-team suite: known hacks must fail, honest look-alikes pass")
    # The suite's expectations are of the hardened modes: `off` is not offered.
    hardened = {
        "choices": ("audit", "enforce"),
        "help": "the hardened mode to judge every fixture in: risky constructs recorded (audit) or rejected (enforce)",
    }
    add_judge_options(r, "device", "mode", mode=hardened)
    r.add_argument("--json", type=Path, metavar="PATH", help="write the outcomes here, updated as each comes")
    r.add_argument("--only", nargs="+", metavar="FIXTURE", help="run only these fixtures (default: all)")
    r.add_argument("--records", type=Path, metavar="DIR", help="write each fixture's whole record here, as NAME.json")
    add_judge_options(r, "timeout", timeout={"default": 120.0})  # the fixtures are small: a hang ends sooner
    r.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="fixtures judged side by side")
    r.add_argument("--timing-carry", action="store_true", help=TIMING_CARRY_HELP)
    r.add_argument("--timing-ahead", action="store_true", help=TIMING_AHEAD_HELP)


def cmd_redteam(args: argparse.Namespace) -> int:
    """Exit 0 when every fixture matched its expectation, 2 when one did not."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from kerneljudge.judgment.progress import spinner
    from kerneljudge.redteam.runner import codes_not_raised, run_suite, to_json
    from kerneljudge.redteam.suite import FIXTURES

    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the outcomes: directory {args.json.parent} does not exist")
    if args.records is not None:
        if not args.records.parent.is_dir():
            raise UsageError(f"cannot write the records: directory {args.records.parent} does not exist")
        args.records.mkdir(exist_ok=True)
    unknown = sorted(set(args.only or []) - {f.name for f in FIXTURES})
    if unknown:
        raise UsageError(f"unknown fixture(s) {', '.join(unknown)}; `kerneljudge redteam` lists them all")
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"

    def heard(outcome: Any, so_far: list[Any]) -> None:
        """Each outcome as it comes, on stderr and in the JSON: a run cut short still leaves what it judged."""
        mark = "matched" if outcome.matched else f"NOT MATCHED: {outcome.note}"
        print(f"{outcome.fixture}: {outcome.status} ({mark})", file=sys.stderr, flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps(to_json(so_far, [], device, args.mode, complete=False), indent=2))

    with spinner(f"red team on {device}, mode {args.mode}"):
        outcomes, skipped = run_suite(
            device,
            args.mode,
            args.only,
            args.timeout,
            args.jobs,
            heard,
            timing={"timing_carry": args.timing_carry, "timing_ahead": args.timing_ahead},
            records=args.records,
        )
    table = Table(title=f"kerneljudge red team: device {device}, mode {args.mode}")
    for column in ("fixture", "attack", "expected", "actual", "evidence", "match"):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        actual = o.status + (" (verified)" if o.verified else "")
        table.add_row(
            o.fixture,
            o.attack,
            escape(o.expected),
            actual,
            escape(", ".join(o.evidence) or "-"),
            "[green]yes[/]" if o.matched else f"[red]NO[/] {escape(o.note)}",
        )
    for name in skipped:
        table.add_row(name, "", "", "skipped: needs CUDA", "", "-")
    Console().print(table)
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(outcomes, skipped, device, args.mode), indent=2))
    matched = sum(o.matched for o in outcomes)
    print(f"{matched}/{len(outcomes)} fixtures matched their expectation, {len(skipped)} skipped")
    missing = codes_not_raised(outcomes)
    print(
        "catalog codes raised by no fixture in this run: " + ", ".join(missing)
        if missing
        else "every catalog code was raised by at least one fixture"
    )
    return 0 if matched == len(outcomes) else 2
