"""How the command line reads its arguments: one-line usage errors that exit 1, help that shows defaults.

argparse's own errors print the whole usage and exit 2, which `kerneljudge` keeps for "not verified": a
script must tell a typo from a failed candidate. Every parser of the program is a `UsageParser`
(subparsers inherit the class), whose errors become `ArgumentError`s that `main` prints as one line and a
hint, and maps to exit 1.
"""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from kerneljudge.errors import UsageError

EXIT_CODES_HELP = """exit codes:
  0  verified (with --mode off: correct by KernelBench's native check)
  2  not verified: the candidate FAILed or is SUSPICIOUS (redteam: a fixture missed its expectation;
     tasks lint: a task is flagged; confirm: the speedup is not confirmed)
  3  a required capability is missing (UNSUPPORTED, for instance --device cuda with no GPU)
  1  a judge error or bad usage, with a one-line message"""

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
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
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
