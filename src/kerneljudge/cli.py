"""The command line: a thin layer over the library that maps outcomes to exit codes.

Exit codes: 0 verified (or, in --mode off, correct by KernelBench's check);
2 the candidate is not verified (FAIL or SUSPICIOUS); 3 a required capability
is missing (UNSUPPORTED); 1 a judge error or bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kerneljudge import __version__
from kerneljudge.batch import BATCH_COMMANDS, add_batch_commands
from kerneljudge.config import (
    DEVICES,
    MODES,
    POLICIES,
    SANDBOX_MODES,
    SANITIZER_MODES,
    TIMING_METHODS,
    TIMING_REGIMES,
    JudgeConfig,
)
from kerneljudge.errors import KernelJudgeError, UsageError

EXIT_CODES = {"PASS": 0, "FAIL": 2, "SUSPICIOUS": 2, "UNSUPPORTED": 3, "ERROR": 1}

NEXT_STEP = {
    "FAIL": "the candidate is not correct: see the failure above and the record's trials",
    "SUSPICIOUS": "the candidate is correct but its evidence is suspect: see the findings",
    "UNSUPPORTED": "a required capability is missing on this machine: run `kerneljudge env`, or use --device auto",
    "ERROR": "the judge or the task failed (no verdict on the candidate): see the failure above and rerun",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kerneljudge", description="Judge AI-written GPU kernels.")
    parser.add_argument("--version", action="version", version=f"kerneljudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    j = sub.add_parser("judge", help="judge a candidate against a KernelBench-format reference")
    j.add_argument("reference", help="task file: Model, get_inputs(), get_init_inputs()")
    j.add_argument("candidate", help="candidate file defining ModelNew, or a model's response with a code block")
    j.add_argument("--device", choices=DEVICES, default="auto")
    j.add_argument("--mode", choices=MODES, default="audit")
    j.add_argument("--policy", choices=POLICIES, default="strict")
    j.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="wall-clock limit for each worker step (import and build, one call, one timing block)",
    )
    j.add_argument("--json", type=Path, metavar="PATH", help="write the verdict record here")
    j.add_argument("--no-timing", action="store_true", help="check correctness only")
    j.add_argument(
        "--shape-trials",
        type=int,
        default=JudgeConfig.shape_trials,
        metavar="N",
        help="hidden shapes of the task's shape family to check (default 3; 0: the public shape only)",
    )
    j.add_argument(
        "--timing-method",
        choices=TIMING_METHODS,
        default="auto",
        help="interleaved paired blocks (hardened default), kernelbench (--mode off's), or Triton's do_bench",
    )
    j.add_argument(
        "--regime",
        choices=TIMING_REGIMES,
        default="cuda_graph",
        help="CUDA launch-latency regime: a CUDA graph of each sample's calls replayed behind a GPU-busy precursor "
        "(default; falls back to busy_precursor when a side cannot be captured), the precursor alone, or back-to-back "
        "calls",
    )
    j.add_argument("--warm-cache", action="store_true", help="do not flush the L2 before each sample")
    j.add_argument("--compile-baseline", action="store_true", help="also time the reference under torch.compile")
    j.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        default="auto",
        help="OS confinement of the workers: every layer the machine allows (auto), a missing layer is an error "
        "(require), or none (off); docs/security.md",
    )
    j.add_argument(
        "--sanitizer",
        choices=SANITIZER_MODES,
        default="auto",
        help="compute-sanitizer on one call: for custom CUDA in the hardened modes (auto), for every candidate "
        "(always), or never (off); docs/sanitizer.md",
    )
    j.add_argument("--quiet", action="store_true", help="print only the one-line outcome")
    e = sub.add_parser("env", help="report what this machine offers (CUDA, Triton, interpreter, namespaces)")
    e.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("schema", help="print the JSON Schema of the verdict record")
    r = sub.add_parser("redteam", help="run the red-team suite: known hacks must fail, honest look-alikes pass")
    r.add_argument("--device", choices=DEVICES, default="auto")
    r.add_argument("--mode", choices=("audit", "enforce"), default="audit")
    r.add_argument("--json", type=Path, metavar="PATH", help="write the outcomes here")
    r.add_argument("--only", nargs="+", metavar="FIXTURE", help="run only these fixtures")
    r.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")
    r.add_argument("--jobs", type=int, default=1, metavar="N", help="fixtures judged side by side (default 1)")
    c = sub.add_parser("confirm", help="re-measure a candidate in fresh process pairs and label its speedup claim")
    c.add_argument("reference", help="task file: Model, get_inputs(), get_init_inputs()")
    c.add_argument("candidate", help="candidate file defining ModelNew, or a model's response with a code block")
    c.add_argument("--runs", type=int, default=5, metavar="K", help="fresh process pairs (default 5)")
    c.add_argument("--margin", type=float, default=0.02, help="what each interval's lower bound must clear (0.02)")
    c.add_argument("--device", choices=DEVICES, default="auto")
    c.add_argument("--policy", choices=POLICIES, default="strict")
    c.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS")
    c.add_argument("--json", type=Path, metavar="PATH", help="write the confirmation here")
    t = sub.add_parser("tasks", help="task sets: screen KernelBench-format tasks for flaws that let wrong kernels pass")
    tasks = t.add_subparsers(dest="tasks_command", required=True)
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
    lint.add_argument("--device", choices=DEVICES, default="auto")
    lint.add_argument("--json", type=Path, metavar="PATH", help="write every task's flags and facts here")
    lint.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS", help="per worker step")
    lint.add_argument("--memory-gib", type=float, metavar="GIB", help="the device memory to size against")
    add_batch_commands(sub)
    return parser


def cmd_tasks(args: argparse.Namespace) -> int:
    """`tasks list` and `tasks show`; `tasks lint`: exit 0 when every task is clean, 2 when one is flagged or
    could not be run."""
    from rich.console import Console
    from rich.table import Table

    from kerneljudge import suite
    from kerneljudge.tasks.lint import lint_paths, write_json

    if args.tasks_command == "list":
        listed = Table(title=f"kerneljudge built-in suite ({len(suite.SUITE)} tasks; judge one as builtin:NAME)")
        for column in ("name", "op", "dtype", "shape"):
            listed.add_column(column, no_wrap=True)
        listed.add_column("case")
        for task in suite.SUITE:
            listed.add_row(task.name, task.op, task.dtype, "x".join(map(str, task.shape)), task.why)
        Console().print(listed)
        print("reference Triton candidates: kerneljudge tasks show builtin:NAME --candidate")
        if args.json is not None:
            rows = [
                {**asdict(task), "name": task.name, "candidate": str(task.candidate_path())} for task in suite.SUITE
            ]
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
        return 0
    if args.tasks_command == "show":
        chosen = suite.resolve(args.name)
        if len(chosen) != 1:
            raise UsageError(f"{args.name} names {len(chosen)} built-in tasks; give one (kerneljudge tasks list)")
        print(chosen[0].candidate_path().read_text() if args.candidate else chosen[0].text(), end="")
        return 0

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


def cmd_confirm(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from kerneljudge.candidate import load_candidate
    from kerneljudge.confirm import confirm
    from kerneljudge.tasks import gpumode
    from kerneljudge.tasks.load import load_task

    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    if not 0 <= args.margin < 1:
        raise UsageError("--margin must be in [0, 1)")
    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the confirmation: directory {args.json.parent} does not exist")
    config = JudgeConfig(device=args.device, mode="audit", policy=args.policy, timeout_s=args.timeout)
    task = load_task(args.reference)
    candidate = gpumode.adapt_candidate(task, load_candidate(args.candidate))
    with Console(stderr=True).status("confirming") as status:
        result = confirm(task, candidate, config, args.runs, args.margin, progress=lambda s: status.update(s))
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


def cmd_judge(args: argparse.Namespace) -> int:
    from kerneljudge.pipeline import judge
    from kerneljudge.report.table import print_verdict

    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the record: directory {args.json.parent} does not exist")
    config = JudgeConfig(
        device=args.device,
        mode=args.mode,
        policy=args.policy,
        timeout_s=args.timeout,
        timing=not args.no_timing,
        shape_trials=args.shape_trials,
        timing_method=args.timing_method,
        timing_regime=args.regime,
        timing_l2_flush=not args.warm_cache,
        timing_compile=args.compile_baseline,
        sandbox=args.sandbox,
        sanitizer=args.sanitizer,
    )
    if args.quiet:
        record = judge(args.reference, args.candidate, config)
    else:
        from rich.console import Console

        with Console(stderr=True).status("judging") as status:
            record = judge(args.reference, args.candidate, config, progress=lambda stage: status.update(stage))
    if args.json is not None:
        args.json.write_text(record.to_json())
    if not args.quiet:
        print_verdict(record)
    code = EXIT_CODES[record.status]
    line = f"{record.status}: " + (
        "verified"
        if record.verified
        else ("correct by KernelBench's native check" if record.status == "PASS" else NEXT_STEP[record.status])
    )
    print(line, file=sys.stderr if code else sys.stdout)
    return code


def cmd_env(args: argparse.Namespace) -> int:
    from kerneljudge.env import report

    info = report()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kerneljudge.verdict import record_json_schema

    print(json.dumps(record_json_schema(), indent=2))
    return 0


def cmd_redteam(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from kerneljudge.redteam.suite import FIXTURES, codes_not_raised, run_suite, to_json

    if args.json is not None and not args.json.parent.exists():
        raise UsageError(f"cannot write the outcomes: directory {args.json.parent} does not exist")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
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

    with Console(stderr=True).status(f"red team on {device}, mode {args.mode}"):
        outcomes, skipped = run_suite(device, args.mode, args.only, args.timeout, args.jobs, heard)
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


COMMANDS = {
    "judge": cmd_judge,
    "env": cmd_env,
    "schema": cmd_schema,
    "redteam": cmd_redteam,
    "tasks": cmd_tasks,
    "confirm": cmd_confirm,
    **BATCH_COMMANDS,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KernelJudgeError as exc:
        print(f"kerneljudge: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kerneljudge: interrupted", file=sys.stderr)
        return 1
