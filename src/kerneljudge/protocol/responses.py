"""What a worker may answer to each request: the response types of each operation, and the fields of an
error, checked as the parent reads the response (sandbox/talk.py). A worker runs candidate code, which can
write its own frames into the response pipe; an answer of a type its request cannot have (a `loaded` for a
call, a `compared` from the candidate's worker) is a broken protocol, and the worker is stopped for it. The
fields of each answer are read, and checked, where they are used (checks/outputs.py, checks/runtime.py).
"""

from __future__ import annotations

from typing import Any

from kerneljudge.protocol.requests import ProtocolError, Request

# Besides "error" (any request may fail): the answers each operation has.
ANSWERS: dict[str, frozenset[str]] = {
    "load": frozenset({"loaded"}),
    "derive": frozenset({"derived"}),
    "trial": frozenset({"trial"}),
    "rerun": frozenset({"reran"}),
    "compare": frozenset({"compared"}),
    "stage": frozenset({"staged", "inputs_differ"}),  # the candidate's worker could not make a set again
    "compile": frozenset({"compiled"}),
    "time": frozenset({"timed", "graph_unsupported"}),
    "captured": frozenset({"captured"}),
    "recheck": frozenset({"rechecked"}),
    "call": frozenset({"output", "inputs_differ"}),
}
# Frames a worker sends within a request, each answered by the parent before the request's answer comes:
# after each sample of a `time` request with `ask_keep`, `sampled` (its sample's number), answered by `keep`, or by
# `commit` for the sample whose call is checked, whose `committed` (the digests of its outputs) a `keep` answers.
INTERIM: dict[str, frozenset[str]] = {"time": frozenset({"sampled", "committed"})}
ERROR_FIELDS = ("phase", "exc_type", "message")  # strings in every error (worker/base.describe_exception)


def check_response(request: Request, response: Any) -> None:
    """ProtocolError where `response` cannot answer `request`."""
    if not isinstance(response, dict):
        raise ProtocolError(f"an answer is an object, not {type(response).__name__}")
    kind = response.get("type")
    allowed = ANSWERS.get(request.op, frozenset())
    if kind != "error" and kind not in allowed:
        raise ProtocolError(f"{kind!r} is no answer to {request.op!r}")
    if kind in ("error", "graph_unsupported"):
        wrong = [name for name in ERROR_FIELDS if not isinstance(response.get(name), str)]
        if wrong:
            raise ProtocolError(f"an error without {', '.join(wrong)}")
