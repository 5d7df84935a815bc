"""The three ways a judgment stops early, and an error response or a set of findings read as a failure.

The candidate's failure (`CandidateFailed`: a verdict) and the judge's own (`JudgeFailed`: the record is
invalid and punishes nobody) are never mixed; a reference that cannot run here is `TaskUnsupported`.
"""

from __future__ import annotations

from typing import Any

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


def classify_error(response: dict[str, Any]) -> str:
    """A candidate's error response as a failure kind: `compile_error` or `runtime_error`."""
    phase = response.get("phase")
    if phase == "import" or response.get("exc_type") in COMPILE_ERROR_TYPES:
        return "compile_error"
    if "Error building extension" in str(response.get("message", "")):
        return "compile_error"
    return "runtime_error"


def error_failure(response: dict[str, Any], phase: str) -> Failure:
    """A candidate's error response as the failure of `phase`, its exception and traceback kept."""
    kind = classify_error(response)
    return Failure(
        kind=kind,
        phase=phase,  # type: ignore[arg-type]
        summary=f"{response.get('exc_type')}: {str(response.get('message', ''))[:500]}",
        exception=f"{response.get('exc_module')}.{response.get('exc_type')}",
        traceback=str(response.get("traceback", ""))[-8000:],
    )


def integrity_failure(findings: list[Finding], phase: str, prefix: str) -> Failure:
    """The failure that error-severity findings amount to."""
    errors = [f for f in findings if f.severity == "error"]
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    return Failure(kind="integrity_violation", phase=phase, summary=f"{prefix}: {codes}: {errors[0].summary}")
