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
from kerneljudge.worker.wire import timed_set


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
