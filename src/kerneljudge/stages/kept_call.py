"""Which timed call's output is checked (H03: honest only while checked), drawn by the parent after the calls.

A measured `time` request asks the worker to say when each sample is over (`ask_keep`); the parent answers
each `sampled` with a `keep`. The sample whose call is kept is drawn before the request and never sent; the
call is drawn when that sample's `sampled` arrives, after every call of it has run. Before 0.3.7 both were
sent in the request, and a candidate could read them from its worker's frames while its calls ran and work
in the kept call only (the red team's `checked_position_reader`: 1.42x against an honest 0.87x on the CPU).
The worker copies the named output before the candidate's next call (worker/timer.py), so a candidate that
learns the position afterwards cannot mend it either (`kept_output_survivor`). Both sides are asked alike,
the reference always to keep nothing, so that the two workers' samples differ in the model only.
"""

from __future__ import annotations

import random
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.verdict import Failure, Finding
from kerneljudge.worker.wire import timed_set

# What differed between the outputs of one timed sample's calls (worker/timed_outputs.unlike), as a failure's kind.
DIFFER_KINDS = {"dtype": "dtype_mismatch", "shape": "shape_mismatch", "device": "device_mismatch"}
MENDED = (
    "the copy of a timed call's output changed between its copy and its check (mended by the candidate's code in "
    "between, H03): its timed calls cannot be checked"
)
SEALED = "code of the candidate's was left to run between a timed sample and the copy of its checked output"
OVERWRITTEN = (
    "a timed call's output lay where a later call of its sample wrote its own (outputs in one storage), which no "
    "checked call's did: its timed calls cannot be checked one by one"
)


class KeptCall:
    """The parent's half of one `time` request with `ask_keep`: `answer` is the request's interim answerer
    (sandbox/talk.py), `checked_set` the input set of the call it kept, once the request is over."""

    def __init__(
        self, source: random.Random, samples: int, calls: int, sets: int, keeps: bool, call: int | None = None
    ) -> None:
        """`keeps`: whether this side keeps an output at all (the candidate's); `call` fixes the kept call
        (the last-call recheck), where it is otherwise drawn when the sample is over."""
        self.source, self.samples, self.calls, self.sets = source, samples, calls, sets
        self.sample = source.randrange(samples) if keeps else -1
        self.fixed = call
        self.call: int | None = None
        self.seen = 0  # the samples said to be over so far

    def answer(self, frame: dict[str, Any]) -> protocol.Keep | None:
        """The `keep` for one `sampled`; None where it is out of turn (not the next sample, or one too many)."""
        sample = frame.get("sample")
        if type(sample) is not int or sample != self.seen or self.seen >= self.samples:
            return None
        self.seen += 1
        if sample != self.sample:
            return protocol.Keep(call=-1)
        self.call = self.fixed if self.fixed is not None else self.source.randrange(self.calls)
        return protocol.Keep(call=self.call)

    def missing(self) -> str | None:
        """Why the request's answer came too early: samples the worker never said were over."""
        if self.seen == self.samples:
            return None
        return f"said {self.seen} of {self.samples} samples were over before answering"

    def checked_set(self) -> int | None:
        """The input set of the kept call (wire.timed_set), or None where this side kept none."""
        return None if self.call is None else timed_set(self.sample, self.call, self.sets)


def digests_well_formed(value: Any) -> bool:
    """One kept copy's digests (worker/sample_seal.digests): a list of [bytes, dtype, sum, sum]."""
    return isinstance(value, list) and all(
        isinstance(d, list) and len(d) == 4 and isinstance(d[1], str) and all(type(x) is int for x in d[::2] + d[3:])
        for d in value
    )


def seal_findings(response: dict[str, Any]) -> list[Finding]:
    """KJ-R026 where the candidate's worker found the seal open before the named call's copy (worker/sample_seal.py):
    a hook, a handler, a thread, a mode, a patched namespace or kernel in place as the sample ended."""
    doors = response.get("sealed_open")
    if not doors:
        return []
    named = [str(d)[:120] for d in (doors if isinstance(doors, list) else [doors])][:20]
    return [finding("KJ-R026", "error", f"a timed sample: {', '.join(named[:6])}", {"doors": named})]


def kept_problem(response: dict[str, Any]) -> Failure | None:
    """The candidate's failure where its worker found, before copying the named output, that an output of that
    sample was no plain tensor, that the sample's outputs were made unlike each other, that the named one lay
    where a later call wrote (worker/timed_outputs.py) or that its seal was open (worker/sample_seal.py), or where
    its answer lacks the kept copy's digests; else None."""
    if response.get("sealed_open") != []:
        return Failure(kind="integrity_violation", phase="timing", summary=SEALED)
    if response.get("not_plain") is not None:
        summary = f"a timed call's output is a {str(response.get('not_plain'))[:200]}, not a plain torch.Tensor"
        return Failure(kind="output_type", phase="timing", summary=summary)
    differ = response.get("outputs_differ")
    if differ is not None:
        what, detail = (list(differ) + ["", ""])[:2] if isinstance(differ, list) else ("", str(differ))
        summary = f"the calls of a timed sample answered unlike each other: {str(detail)[:300]}"
        return Failure(kind=DIFFER_KINDS.get(str(what), "output_type"), phase="timing", summary=summary)  # type: ignore[arg-type]
    if response.get("kept_overwritten") is True:
        return Failure(kind="integrity_violation", phase="timing", summary=OVERWRITTEN)
    digests = response.get("kept_digests")
    if not (isinstance(digests, list) and len(digests) <= 1 and all(digests_well_formed(d) for d in digests)):
        summary = "the worker's answer lacks its kept copy's digests"
        return Failure(kind="integrity_violation", phase="timing", summary=summary)
    return None
