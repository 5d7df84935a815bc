"""`kerneljudge tasks`: the built-in suite listed and shown, and `tasks lint` of any task set."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kerneljudge.cli.options import add_judge_options
from kerneljudge.errors import UsageError

LIST_COLUMNS = ("name", "op", "dtype", "shape", "case")


def add_tasks_parser(sub: Any) -> None:
    t = sub.add_parser("tasks", help="task sets: screen KernelBench-format tasks for flaws that let wrong kernels pass")
    tasks = t.add_subparsers(dest="tasks_command", required=True, metavar="list|show|lint")
    listing = tasks.add_parser("list", help="the built-in suite: each task's dtype, shape and edge case (builtin:NAME)")
    listing.add_argument("--json", type=Path, metavar="PATH", help="write the suite's tasks here")
    show = tasks.add_parser("show", help="print a built-in task's source, or with --candidate its reference candidate")
    show.add_argument("name", metavar="builtin:NAME")
    show.add_argument("--candidate", action="store_true", help="the honest Triton candidate of its operation")
    lint = tasks.add_parser("lint", help="run each task's reference (sandboxed); flag what a wrong kernel could pass")
    lint.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="task files, folders searched for *.py, or builtin:NAME, builtin:OP, builtin:all",
    )
    add_judge_options(lint, "device")
    lint.add_argument("--json", type=Path, metavar="PATH", help="write every task's flags and facts here")
    add_judge_options(lint, "timeout")
    lint.add_argument("--memory-gib", type=float, metavar="GIB", help="the device memory to size against")


def suite_rows() -> list[tuple[str, ...]]:
    """One row of LIST_COLUMNS per built-in task, every value whole."""
    from kerneljudge import suite

    return [(t.name, t.op, t.dtype, "x".join(map(str, t.shape)), t.why) for t in suite.SUITE]


def plain_listing(rows: list[tuple[str, ...]]) -> str:
    """The listing for a pipe or a file: aligned columns, nothing cut, one task a line."""
    lines = [LIST_COLUMNS, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(LIST_COLUMNS) - 1)]
    return "\n".join("  ".join([*(line[i].ljust(w) for i, w in enumerate(widths)), line[-1]]) for line in lines)


def terminal_listing(rows: list[tuple[str, ...]]) -> Any:
    """The listing for a terminal: a table whose columns wrap (never cut with an ellipsis) where it is narrow."""
    from rich.table import Table

    table = Table(title=f"kerneljudge built-in suite ({len(rows)} tasks; judge one as builtin:NAME)")
    for column in LIST_COLUMNS:
        table.add_column(column, overflow="fold", min_width=len(column))
    for row in rows:
        table.add_row(*row)
    return table


def list_suite(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kerneljudge import suite

    rows = suite_rows()
    if sys.stdout.isatty():
        Console().print(terminal_listing(rows))
    else:
        print(plain_listing(rows))
    print("reference Triton candidates: kerneljudge tasks show builtin:NAME --candidate")
    if args.json is not None:
        listed = [{**asdict(task), "name": task.name, "candidate": str(task.candidate_path())} for task in suite.SUITE]
        args.json.write_text(json.dumps(listed, indent=2) + "\n")
    return 0


def show_task(args: argparse.Namespace) -> int:
    from kerneljudge import suite

    chosen = suite.resolve(args.name)
    if len(chosen) != 1:
        raise UsageError(f"{args.name} names {len(chosen)} built-in tasks; give one (kerneljudge tasks list)")
    print(chosen[0].candidate_path().read_text() if args.candidate else chosen[0].text(), end="")
    return 0


def lint_tasks(args: argparse.Namespace) -> int:
    """Exit 0 when every task is clean, 2 when one is flagged or could not be run."""
    from rich.console import Console
    from rich.table import Table

    from kerneljudge.tasks.lint import lint_paths, write_json

    if args.json is not None and not args.json.parent.is_dir():
        raise UsageError(f"cannot write {args.json}: directory {args.json.parent} does not exist")
    if args.memory_gib is not None and not args.memory_gib > 0:
        raise UsageError(f"--memory-gib must be positive, got {args.memory_gib}")
    memory = int(args.memory_gib * 2**30) if args.memory_gib else None
    console = Console(stderr=True)
    results, skipped = lint_paths(
        args.paths, args.device, args.timeout, memory, progress=lambda task: console.print(f"linting {task.name}")
    )
    table = Table(title="kerneljudge tasks lint")
    for column in ("task", "flags", "what"):
        table.add_column(column)
    for result in results:
        if result.error is not None:
            table.add_row(result.task, "error", result.error)
        else:
            what = "\n".join(f.summary for f in result.flags) or "clean"
            names = ", ".join(f.id if f.severity == "warning" else f"{f.id} (note)" for f in result.flags)
            table.add_row(result.task, names or "-", what)
    Console().print(table)
    flagged = sum(not r.clean for r in results)
    print(f"{len(results)} task(s) linted, {flagged} flagged, {len(skipped)} file(s) skipped as not tasks")
    for reason in skipped:
        print(f"  skipped: {reason}")
    if args.json is not None:
        write_json(args.json, results, skipped)
    return 2 if flagged else 0


def cmd_tasks(args: argparse.Namespace) -> int:
    """`tasks list`, `tasks show` and `tasks lint`."""
    return {"list": list_suite, "show": show_task, "lint": lint_tasks}[args.tasks_command](args)
