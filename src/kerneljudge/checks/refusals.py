"""A candidate's error at a derived hidden shape: whether it is a refusal, and the finding that records one.

A derived shape family (kerneljudge/worker/derived.py) is the judge's reading of what a task's size globals
allow, not the task's word. A candidate written for the public size that says so, by raising at another size
(a ValueError, an assert, a `view` that does not fit, a block that must be a power of two), is
shape-specialised, and the record shows it (KJ-C003): information under the practical policy, a warning that
withholds verification under strict. A wrong answer at such a shape is a failure as anywhere else, and so is a
crash, a timeout, memory running short, or an error the device keeps (an illegal memory access leaves the CUDA
context unusable: a fault, not a refusal). docs/tasks.md#derived-shape-families.
"""

from __future__ import annotations

from kerneljudge.checks.catalog import finding
from kerneljudge.checks.support import out_of_memory
from kerneljudge.verdict import Failure, Finding

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
MAX_LISTED = 8  # refusals kept in the finding's evidence


def refused(failure: Failure) -> bool:
    """Whether a candidate's failure at a derived shape is a plain error it raised there, not a fault."""
    text = f"{failure.exception} {failure.summary}".lower()
    return failure.kind in REFUSAL_KINDS and not any(f in text for f in DEVICE_FAULTS) and not out_of_memory(text)


def refusal_finding(refusals: list[dict[str, str]], policy: str) -> Finding:
    """KJ-C003 for the derived shapes the candidate refused, each {"shape", "phase", "error"}."""
    first = refusals[0]
    summary = (
        f"the candidate refused {len(refusals)} shape(s) derived from the task's size globals, first at "
        f"{first['shape']}: {first['error'][:200]}"
    )
    return finding(
        "KJ-C003",
        "warning" if policy == "strict" else "info",
        summary,
        {"refusals": refusals[:MAX_LISTED], "count": len(refusals)},
    )
