"""A candidate's error at a derived hidden shape: whether it is a refusal, the failure it is, and the finding
that keeps each one.

A derived shape family (kerneljudge/worker/correctness/derived.py) holds only shapes where the task's own reference
builds from the task's init inputs and runs on its inputs: sizes the task's `Model` handles. A candidate
that raises at one of them (a ValueError, an assert, a `view` that does not fit, a block that must be a power
of two) handles less than the model it replaces, and fails with its own kind, `shape_refused`, naming the
shapes it refused, apart from a wrong answer there (`tolerance`). KJ-C003 keeps each refusal (its shape,
phase and error) as evidence. A crash, a timeout, memory running short or an error the device keeps (an
illegal memory access leaves the CUDA context unusable) is a fault, not a refusal, and fails as such.
docs/tasks.md#derived-shape-families.
"""

from __future__ import annotations

from kerneljudge.checks.catalog import finding
from kerneljudge.checks.support import out_of_memory
from kerneljudge.results.verdict import Failure, Finding

REFUSAL_KINDS = ("runtime_error", "compile_error")
DEVICE_FAULTS = (
    "illegal memory access",
    "device-side assert",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
    "cuda error",
    "acceleratorerror",
)
MAX_LISTED = 8  # refusals kept in the finding's evidence and named in the failure


def refused(failure: Failure) -> bool:
    """Whether a candidate's failure at a derived shape is a plain error it raised there, not a fault."""
    text = f"{failure.exception} {failure.summary}".lower()
    return failure.kind in REFUSAL_KINDS and not any(f in text for f in DEVICE_FAULTS) and not out_of_memory(text)


def refusal_finding(refusals: list[dict[str, str]]) -> Finding:
    """KJ-C003 for the derived shapes the candidate refused, each {"shape", "phase", "error"}: the evidence of
    the `shape_refused` failure (an error: the candidate fails)."""
    first = refusals[0]
    summary = (
        f"the candidate refused {len(refusals)} shape(s) derived from the task's size globals, where the "
        f"reference built and ran, first at {first['shape']}: {first['error'][:200]}"
    )
    return finding("KJ-C003", "error", summary, {"refusals": refusals[:MAX_LISTED], "count": len(refusals)})


def refusal_failure(refusals: list[dict[str, str]]) -> Failure:
    """The failure of a candidate that refused derived shapes: kind `shape_refused`, the shapes named."""
    shapes = "; ".join(r["shape"] for r in refusals[:MAX_LISTED])
    more = f" and {len(refusals) - MAX_LISTED} more" if len(refusals) > MAX_LISTED else ""
    first = refusals[0]
    return Failure(
        kind="shape_refused",
        phase="correctness (shape trials)",
        summary=(
            f"refused {len(refusals)} shape(s) the task's reference handles ({shapes}{more}); first, at "
            f"{first['phase']}: {first['error'][:300]}"
        ),
    )
