"""`kerneljudge confirm`: a candidate re-measured in fresh process pairs and its speedup claim labelled."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kerneljudge.cli.options import add_judge_options
from kerneljudge.cli.usage import positive_int
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError


def add_confirm_parser(sub: Any) -> None:
    c = sub.add_parser("confirm", help="re-measure a candidate in fresh process pairs and label its speedup claim")
    c.add_argument("reference", help="task file: Model, get_inputs(), get_init_inputs(); or builtin:NAME")
    c.add_argument("candidate", help="candidate file defining ModelNew, or a model's response with a code block")
    c.add_argument("--runs", type=positive_int, default=5, metavar="K", help="fresh process pairs")
    c.add_argument("--margin", type=float, default=0.02, help="what each interval's lower bound must clear, in [0, 1)")
    add_judge_options(c, "device", "policy", "timeout")
    c.add_argument("--json", type=Path, metavar="PATH", help="write the confirmation here")


def cmd_confirm(args: argparse.Namespace) -> int:
    """Exit 0 when the claim is confirmed in fresh processes, 2 when it is not."""
    from rich.console import Console
    from rich.table import Table

    from kerneljudge.judgment.progress import spinner
    from kerneljudge.runs.confirm import confirm
    from kerneljudge.sources.candidate import load_candidate
    from kerneljudge.tasks import gpumode
    from kerneljudge.tasks.load import load_task

    if not 0 <= args.margin < 1:
        raise UsageError("--margin must be in [0, 1)")
    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the confirmation: directory {args.json.parent} does not exist")
    config = JudgeConfig(device=args.device, mode="audit", policy=args.policy, timeout_s=args.timeout)
    task = load_task(args.reference)
    candidate = gpumode.adapt_candidate(task, load_candidate(args.candidate))
    with spinner("confirming") as update:
        result = confirm(task, candidate, config, args.runs, args.margin, progress=update)
    table = Table(title=f"kerneljudge confirm: margin {args.margin:.0%}")
    for column in ("run", "status", "speedup", "interval", "stopped by"):
        table.add_column(column)
    for run in result.runs:
        table.add_row(
            str(run.index),
            run.status + (" (verified)" if run.verified else ""),
            f"{run.speedup:.4g}x" if run.speedup is not None else "-",
            f"[{run.interval[0]:.4g}, {run.interval[1]:.4g}]" if run.interval else "-",
            run.stop_reason or "-",
        )
    Console().print(table)
    for rung in result.rungs:
        mark = {True: "yes", False: "no", None: "not measured"}[rung.holds]
        print(f"  {rung.name:<28} {mark:<13} {rung.detail}")
    if result.spread is not None:
        print(f"spread of the speedups across runs: {result.spread:.2%}")
    print(f"claim: {result.claim or 'none (not verified)'}")
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_dict(), indent=2))
    return 0 if result.claim == "confirmed_fresh_processes" else 2
