"""Typed exceptions of the library; the CLI maps each to an exit code and a one-line message."""

from __future__ import annotations


class KernelJudgeError(Exception):
    """Base class: something the user or the judge must fix, never the candidate's fault."""

    exit_code = 1


class UsageError(KernelJudgeError):
    """Bad input from the user: a missing file, a task without Model, an unknown option."""


class ConfigError(UsageError):
    """A configuration value is out of range or unknown."""


class TaskError(UsageError):
    """The task file is not a usable KernelBench-format reference."""
