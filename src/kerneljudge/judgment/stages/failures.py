"""The three ways a judgment stops early, and an error response or a set of findings read as a failure.

The candidate's failure (`CandidateFailed`: a verdict) and the judge's own (`JudgeFailed`: the record is
invalid and punishes nobody) are never mixed; a reference that cannot run here is `TaskUnsupported`.
"""

from __future__ import annotations

from kerneljudge.protocol import Failed
from kerneljudge.results.verdict import Failure, Finding

COMPILE_ERROR_TYPES = {
    "CompilationError",
    "CompileTimeAssertionFailure",
    "SyntaxError",
    "IndentationError",
    "ImportError",
    "ModuleNotFoundError",
    "NameError",
}


class CandidateFailed(Exception):
    """The candidate failed a stage; carries the typed failure for the record."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.summary)
        self.failure = failure


class JudgeFailed(Exception):
    """The judge (or the trusted task) failed: the record is invalid and punishes nobody."""


class TaskUnsupported(Exception):
    """The task's reference cannot run on this machine (checks/support.py): UNSUPPORTED, with the reason."""


def classify_error(error: Failed) -> str:
    """A candidate's error answer as a failure kind: `compile_error` or `runtime_error`."""
    if error.phase == "import" or error.exc_type in COMPILE_ERROR_TYPES:
        return "compile_error"
    if "Error building extension" in error.message:
        return "compile_error"
    return "runtime_error"


def error_failure(error: Failed, phase: str) -> Failure:
    """A candidate's error answer as the failure of `phase`, its exception and traceback kept."""
    return Failure(
        kind=classify_error(error),
        phase=phase,  # type: ignore[arg-type]
        summary=f"{error.exc_type}: {error.message[:500]}",
        exception=f"{error.exc_module}.{error.exc_type}",
        traceback=error.traceback[-8000:],
    )


def integrity_failure(findings: list[Finding], phase: str, prefix: str) -> Failure:
    """The failure that error-severity findings amount to."""
    errors = [f for f in findings if f.severity == "error"]
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    return Failure(kind="integrity_violation", phase=phase, summary=f"{prefix}: {codes}: {errors[0].summary}")
