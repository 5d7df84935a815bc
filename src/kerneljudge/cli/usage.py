"""How the command line reads its arguments: one-line usage errors that exit 1, help that shows defaults.

argparse's own errors print the whole usage and exit 2, which `kerneljudge` keeps for "not verified": a
script must tell a typo from a failed candidate. Every parser of the program is a `UsageParser`
(subparsers inherit the class), whose errors become `ArgumentError`s that `main` prints as one line and a
hint, and maps to exit 1.

Each command's help ends with the exit codes that command returns (`EXIT_CODES_OF`, read from its `cmd_*`
function), the program's own help with what the codes mean across commands: `judge`'s table (3 for
UNSUPPORTED, say) is not `export`'s.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import NoReturn

from kerneljudge.errors import UsageError

ERROR_ROW = (1, "an error or bad usage (a missing file, an unknown option), with a one-line message")

# Each command's exit codes, keyed by the command as typed after `kerneljudge`; the empty key is the program's
# own help. A command absent here gets no table rather than another command's.
EXIT_CODES_OF: dict[str, tuple[tuple[int, str], ...]] = {
    "": (
        (0, "success: verified (judge), every fixture matched (redteam), confirmed (confirm), done (the others)"),
        (
            2,
            "a negative answer: not verified (judge, improve), a fixture missed its expectation (redteam), the "
            "speedup not confirmed (confirm), a task flagged (tasks lint), a bundle not verified (verify)",
        ),
        (3, "judge only: a required capability is missing (UNSUPPORTED)"),
        (1, "an error or bad usage, with a one-line message; each command's --help gives its own codes"),
    ),
    "judge": (
        (0, "PASS: verified (with --mode off: correct by KernelBench's native check)"),
        (2, "not verified: the candidate FAILed or is SUSPICIOUS"),
        (3, "UNSUPPORTED: a required capability is missing (for instance --device cuda with no GPU)"),
        (1, "ERROR: the judge or the task failed, no verdict on the candidate; or bad usage, with a one-line message"),
    ),
    "env": ((0, "the report printed"), ERROR_ROW),
    "schema": ((0, "the schema printed"), ERROR_ROW),
    "redteam": (
        (0, "every fixture judged had the outcome it must have"),
        (2, "a fixture missed its expectation (a hack verified, or an honest look-alike rejected)"),
        ERROR_ROW,
    ),
    "confirm": (
        (0, "the speedup is confirmed in fresh processes"),
        (
            2,
            "not confirmed: a run not verified, or a speedup interval's lower bound short of 1 + --margin (the "
            "claim line says how far the claim goes)",
        ),
        ERROR_ROW,
    ),
    "tasks": (
        (0, "done (tasks lint: every task clean)"),
        (2, "tasks lint: a task is flagged or could not be run"),
        ERROR_ROW,
    ),
    "tasks list": ((0, "the suite listed"), ERROR_ROW),
    "tasks show": ((0, "the source printed"), (1, "the name is not one built-in task, or bad usage")),
    "tasks lint": ((0, "every task is clean"), (2, "a task is flagged, or could not be run"), ERROR_ROW),
    "generate": (
        (0, "every sample written"),
        (1, "a request failed for good (the same command again retries it), an error or bad usage"),
    ),
    "improve": (
        (0, "every chain ended verified"),
        (2, "a chain ended unverified"),
        (1, "a request failed for good (the same command again resumes), an error or bad usage"),
    ),
    "serve": ((0, "the server stopped (Ctrl-C, SIGTERM)"), ERROR_ROW),
    "batch": (
        (0, "every item judged or already in the store, whatever its verdict (the summary line counts them)"),
        (1, "a judgment ended in ERROR (no verdict on its candidate), an error or bad usage"),
        (
            130,
            "stopped by SIGINT (Ctrl-C): nothing more started, the judgments in flight stopped and not stored, "
            "the summary printed; the same command again judges the rest (a second signal ends it at once)",
        ),
        (143, "stopped by SIGTERM, as for SIGINT"),
    ),
    "export": ((0, "everything asked for written"), ERROR_ROW),
    "verify": ((0, "the bundle verifies: every hash and source as recorded"), (2, "it does not"), ERROR_ROW),
    "report": ((0, "the report printed (and written)"), ERROR_ROW),
}


def exit_codes_help(rows: tuple[tuple[int, str], ...], width: int = 100) -> str:
    """An epilog of exit codes, one code a row, its meaning wrapped under it."""
    lines = ["exit codes:"]
    for code, meaning in rows:
        lines.extend(textwrap.wrap(meaning, width, initial_indent=f"  {code}  ", subsequent_indent="     "))
    return "\n".join(lines)


def exit_codes_of(prog: str | None) -> str | None:
    """The exit-code epilog of the parser named `prog` ("kerneljudge tasks lint"), None for a command not listed."""
    words = (prog or "").split()
    rows = EXIT_CODES_OF.get(" ".join(words[1:]))
    return exit_codes_help(rows) if rows else None


# argparse says "argument --timeout: must be positive, got -5"; a type check's message reads as the flag's.
_FLAG_MESSAGE = re.compile(r"^argument (?:\S+/)?(--?[\w-]+): (must .*)$")


class ArgumentError(UsageError):
    """A command line argparse could not read; `hint` names the help to read."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's help followed by its default, where it has one worth saying (not None, not False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default in (None, False, argparse.SUPPRESS) or "%(default)" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise ArgumentError instead of printing the usage and exiting 2."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        if "epilog" not in kwargs:  # a command's own exit codes (argparse names a sub-command's parser by its path)
            prog = kwargs.get("prog", args[0] if args else None)
            kwargs["epilog"] = exit_codes_of(prog if isinstance(prog, str) else None)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        flagged = _FLAG_MESSAGE.match(message)
        text = f"{flagged.group(1)} {flagged.group(2)}" if flagged else message
        raise ArgumentError(text, f"run `{self.prog} --help` for the options")


def positive_seconds(text: str) -> float:
    """A --timeout value: a number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def positive_int(text: str) -> int:
    """A count that must be at least 1 (--jobs, --runs)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def count(text: str) -> int:
    """A count that may be 0 (--shape-trials)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
