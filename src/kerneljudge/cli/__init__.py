"""The command line: a thin layer over the library that maps outcomes to exit codes.

Exit codes of `judge`: 0 verified (or, in --mode off, correct by KernelBench's check);
2 the candidate is not verified (FAIL or SUSPICIOUS); 3 a required capability
is missing (UNSUPPORTED); 1 a judge error or bad usage, argparse's own errors
included (cli/usage.py). Every other command returns 0, 1 and, where it answers
no (redteam, confirm, tasks lint, improve, verify), 2: each command's own are in
usage.py's EXIT_CODES_OF, which its --help ends with (docs/cli.md). One module per command:

- `judge.py`: `kerneljudge judge`: one candidate against one task, the verdict table, the exit code;
- `info.py`: `kerneljudge env` and `kerneljudge schema`: what this machine offers, the record's JSON Schema;
- `tasks.py`: `kerneljudge tasks`: the built-in suite listed and shown, and `tasks lint`;
- `redteam.py`: `kerneljudge redteam`: the red-team fixtures judged against the outcomes they must have;
- `confirm.py`: `kerneljudge confirm`: a candidate re-measured in fresh process pairs, its claim labelled;
- `batch.py`: `batch`, `export`, `verify` and `report`: the commands over a results store;
- `serve.py`: `kerneljudge serve`: the judge as an HTTP reward service;
- `generate.py`: `kerneljudge generate` and `improve`: candidates from a model, and the repair loop;
- `usage.py`: how arguments are read: one-line usage errors that exit 1, help that shows defaults.
- `options.py`: the options several commands share (--device, --mode, --policy, --timeout), declared once.
"""

from __future__ import annotations

import sys

from kerneljudge import __version__
from kerneljudge.cli.batch import BATCH_COMMANDS, add_batch_commands
from kerneljudge.cli.confirm import add_confirm_parser, cmd_confirm
from kerneljudge.cli.generate import GENERATE_COMMANDS, add_generate_commands
from kerneljudge.cli.info import add_info_parsers, cmd_env, cmd_schema
from kerneljudge.cli.judge import EXIT_CODES, NEXT_STEP, add_judge_parser, cmd_judge
from kerneljudge.cli.redteam import add_redteam_parser, cmd_redteam
from kerneljudge.cli.serve import add_serve_parser, cmd_serve
from kerneljudge.cli.tasks import add_tasks_parser, cmd_tasks
from kerneljudge.cli.usage import ArgumentError, UsageParser
from kerneljudge.errors import KernelJudgeError

__all__ = ["COMMANDS", "EXIT_CODES", "NEXT_STEP", "build_parser", "main"]

COMMANDS = {
    "judge": cmd_judge,
    "env": cmd_env,
    "schema": cmd_schema,
    "redteam": cmd_redteam,
    "tasks": cmd_tasks,
    "confirm": cmd_confirm,
    "serve": cmd_serve,
    **GENERATE_COMMANDS,
    **BATCH_COMMANDS,
}


def build_parser() -> UsageParser:
    parser = UsageParser(prog="kerneljudge", description="Judge AI-written GPU kernels.")
    parser.add_argument("--version", action="version", version=f"kerneljudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_judge_parser(sub)
    add_info_parsers(sub)
    add_redteam_parser(sub)
    add_confirm_parser(sub)
    add_tasks_parser(sub)
    add_generate_commands(sub)
    add_batch_commands(sub)
    add_serve_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code (a usage error of any kind is 1, with a one-line message)."""
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except ArgumentError as exc:
        print(f"kerneljudge: error: {exc}\n{exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KernelJudgeError as exc:
        print(f"kerneljudge: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kerneljudge: interrupted", file=sys.stderr)
        return 1
