"""Which timed call's output is checked (H03: honest only while checked), drawn by the parent after the calls.

A measured `time` request asks the worker to say when each sample is over (`ask_keep`); the parent answers
each `sampled` with a `keep`. The sample whose call is kept is drawn before the request and never sent; its
`sampled` is answered with a `commit`, and the call is drawn once the digests of every call's output of that
sample are with the parent (since 0.3.9: worker/seal/commit.py), after every call of it has run. Before 0.3.7
both were sent in the request, and a candidate could read them from its worker's frames while its calls ran and work
in the kept call only (the red team's `checked_position_reader`: 1.42x against an honest 0.87x on the CPU).
The worker copies the named output before the candidate's next call (worker/timing/timer.py), so a candidate that
learns the position afterwards cannot mend it either (`kept_output_survivor`), and the copy the reference's
worker is sent must have the committed digests, whatever ran in the candidate's process in between
(`seal_state_forger`). Both sides are asked alike, the reference always to keep nothing, so that the two
workers' samples differ in the model only; the time each side took to commit is set against the other's
(judgment/stages/untimed_work.py).
"""

from __future__ import annotations

import random
import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.protocol.wire import timed_set
from kerneljudge.results.verdict import Failure, Finding

# What differed between the outputs of one timed sample's calls (worker/timed_outputs.unlike), as a failure's kind.
DIFFER_KINDS = {"dtype": "dtype_mismatch", "shape": "shape_mismatch", "device": "device_mismatch"}
MENDED = (
    "a timed call's output was not the one its worker committed to before the call was named (mended by the "
    "candidate's code in between, H03): its timed calls cannot be checked"
)
SEALED = "code of the candidate's was left to run between a timed sample and the copy of its checked output"
OVERWRITTEN = (
    "a timed call's output lay where a later call of its sample wrote its own (outputs in one storage), which no "
    "checked call's did: its timed calls cannot be checked one by one"
)


class KeptCall:
    """The parent's half of one `time` request with `ask_keep`: `answer` is the request's interim answerer
    (sandbox/talk.py), `checked_set` the input set of the call it kept, once the request is over.

    One sample of each request, drawn before it and never sent, is committed: its `sampled` is answered with a
    `commit`, and the call is named only once the digests of every call's output of that sample are here
    (worker/seal/commit.py). Both sides commit alike, as many outputs as the candidate's sample holds; only the
    candidate's side keeps the named output."""

    def __init__(
        self,
        source: random.Random,
        samples: int,
        calls: int,
        sets: int,
        keeps: bool,
        call: int | None = None,
        commits: int = 0,
    ) -> None:
        """`keeps`: whether this side keeps an output at all (the candidate's); `call` fixes the kept call
        (the last-call recheck), where it is otherwise drawn when the sample's digests are committed; `commits`: the
        outputs the commit digests (0: every call's, as the candidate's side asks; the reference's side asks for the
        candidate's calls, its own outputs taken in turn)."""
        self.source, self.samples, self.calls, self.sets, self.keeps = source, samples, calls, sets, keeps
        self.commits = calls if keeps or not commits else commits  # a keeping side's commit is of every call
        self.sample = source.randrange(samples)
        self.fixed = call
        self.call: int | None = None
        self.seen = 0  # the samples said to be over so far
        self.committed: list[Any] | None = None  # each call's output's digests, as the worker committed them
        self.window_ms: float | None = None  # the parent's clock from its `commit` to the `committed` answer
        self.asked: float | None = None  # when the `commit` was answered

    def answer(self, frame: protocol.Interim) -> protocol.Request | None:
        """The `keep` (or `commit`) for one `sampled`, the `keep` for the `committed`; None where a frame is out
        of turn (not the next sample, one too many, or a commit not asked for)."""
        if isinstance(frame, protocol.Committed):
            return self.after_commit(frame)
        if not isinstance(frame, protocol.Sampled):
            return None
        sample = frame.sample
        if sample != self.seen or self.seen >= self.samples or self.pending():
            return None
        self.seen += 1
        if sample != self.sample:
            return protocol.Keep(call=-1)
        self.asked = time.perf_counter()
        return protocol.Commit(calls=self.commits)

    def pending(self) -> bool:
        """Whether a `commit` was sent and its `committed` has not come."""
        return self.asked is not None and self.committed is None

    def after_commit(self, frame: protocol.Committed) -> protocol.Keep | None:
        if not self.pending() or frame.sample != self.sample:
            return None
        self.window_ms = (time.perf_counter() - float(self.asked or 0.0)) * 1e3
        digests = frame.digests
        self.committed = digests if commit_well_formed(digests, self.commits) else []
        if not self.keeps:
            return protocol.Keep(call=-1)
        self.call = self.fixed if self.fixed is not None else self.source.randrange(self.calls)
        return protocol.Keep(call=self.call)

    def missing(self) -> str | None:
        """Why the request's answer came too early: samples the worker never said were over, or a commit it never
        answered."""
        if self.seen == self.samples and not self.pending():
            return None
        if self.pending():
            return "never answered the parent's commit"
        return f"said {self.seen} of {self.samples} samples were over before answering"

    def checked_set(self) -> int | None:
        """The input set of the kept call (wire.timed_set), or None where this side kept none."""
        return None if self.call is None else timed_set(self.sample, self.call, self.sets)

    def checked_digests(self) -> list[Any] | None:
        """The digests committed for the kept call's output, or None where none were (a worker that found its
        outputs no plain tensors made alike commits none, and says why in its answer)."""
        if self.call is None or not self.committed:
            return None
        return self.committed[self.call]


def digests_well_formed(value: Any) -> bool:
    """One output's digests (worker/seal/commit.py): a list of [bytes, dtype, sum, sum], a digest per tensor."""
    return isinstance(value, list) and all(
        isinstance(d, list) and len(d) == 4 and isinstance(d[1], str) and all(type(x) is int for x in d[::2] + d[3:])
        for d in value
    )


def commit_well_formed(value: Any, calls: int) -> bool:
    """A sample's commit: the digests of each of its `calls` calls' outputs."""
    return isinstance(value, list) and len(value) == calls and all(digests_well_formed(d) for d in value)


def sample_findings(timed: protocol.Timed) -> list[Finding]:
    """What the candidate's worker found in the named sample before the copy, as findings: KJ-R026 where the seal was
    open (worker/seal/sample.py: a hook, a handler, a thread, a mode, a patched namespace or kernel in place as the
    sample ended); KJ-R022, an error whatever the policy, where the named output lay where a later call of its
    sample wrote (an output cache while timed, H01: the red team's `timing_cache`), which its checked calls' outputs
    did not (those that do are timed one call a sample, judgment/stages/timing.shares_outputs)."""
    found = []
    if timed.sealed_open:
        named = [str(d)[:120] for d in timed.sealed_open][:20]
        found.append(finding("KJ-R026", "error", f"a timed sample: {', '.join(named[:6])}", {"doors": named}))
    if timed.kept_overwritten is True:
        summary = (
            "a timed sample: the checked call's output shares storage with a later call's, as no checked call's did"
        )
        found.append(finding("KJ-R022", "error", summary, {"timed": True}))
    return found


def kept_problem(timed: protocol.Timed) -> Failure | None:
    """The candidate's failure where its worker found, before copying the named output, that an output of that
    sample was no plain tensor, that the sample's outputs were made unlike each other, that the named one lay
    where a later call wrote (worker/seal/timed_outputs.py) or that its seal was open (worker/seal/sample.py); else
    None."""
    if timed.sealed_open != []:
        return Failure(kind="integrity_violation", phase="timing", summary=SEALED)
    if timed.not_plain is not None:
        summary = f"a timed call's output is a {timed.not_plain[:200]}, not a plain torch.Tensor"
        return Failure(kind="output_type", phase="timing", summary=summary)
    differ = timed.outputs_differ
    if differ is not None:
        what, detail = (list(differ) + ["", ""])[:2]
        summary = f"the calls of a timed sample answered unlike each other: {str(detail)[:300]}"
        return Failure(kind=DIFFER_KINDS.get(str(what), "output_type"), phase="timing", summary=summary)  # type: ignore[arg-type]
    if timed.kept_overwritten is True:
        return Failure(kind="integrity_violation", phase="timing", summary=OVERWRITTEN)
    return None
