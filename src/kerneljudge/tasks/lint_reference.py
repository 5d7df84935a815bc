"""The task's reference in a sandboxed reference worker, as `kerneljudge tasks lint` runs it (tasks/lint.py):
the seeds it is built and run at, its trials and its device time.
"""

from __future__ import annotations

from typing import Any, TypeVar

from kerneljudge import protocol
from kerneljudge.errors import TaskError
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.sources.task import Task

LOAD_SEED, OTHER_LOAD_SEED, SEEDS, RNG_SEEDS = 42, 43, (1, 2), (7, 8)
A = TypeVar("A", bound=protocol.Answer)


class LintReference:
    """The task's reference in a sandboxed worker: load it, run trials, time it."""

    def __init__(self, task: Task, device: str, timeout_s: float) -> None:
        limits = WorkerLimits(step_timeout_s=timeout_s)
        self.worker = WorkerProcess("reference", device, task.text, limits, policy=confine.policy_for("auto"))
        try:
            hello = protocol.decode_greeting(self.worker.receive(timeout_s=limits.start_timeout_s))
        except protocol.ProtocolError as exc:
            raise WorkerFailure(f"the reference worker's hello breaks the protocol: {exc}") from None
        if not isinstance(hello, protocol.Hello):
            raise WorkerFailure(f"the reference worker did not start: {hello.exc_type}: {hello.message}")
        self.hello = hello

    def ask(self, request: protocol.Request, expect: type[A], values: Any = None) -> tuple[A, Any]:
        """The worker's answer to `request`, of the kind `expect`, and the values it names; anything else it
        answers is the task's failure (TaskError)."""
        answer, out = self.worker.request(request, values)
        if not isinstance(answer, expect):
            if isinstance(answer, protocol.Failed):
                raise TaskError(
                    f"the reference failed to {answer.phase or request.op}: {answer.exc_type}: {answer.message}"
                )
            raise TaskError(f"the reference failed to {request.op}: its worker answered {answer.kind!r}")
        return answer, out

    def load(self, seed: int, shape: dict[str, Any] | None = None, footprint: bool = False) -> protocol.Loaded:
        """Build the model; with `footprint`, what one call holds is told too (worker/footprint.py)."""
        return self.ask(protocol.Load(seed=seed, shape=shape, footprint=footprint), protocol.Loaded)[0]

    def trial(
        self,
        seed: int,
        train: bool = False,
        rng_seed: int | None = None,
        swap: dict[str, int] | None = None,
        slot: str = "lint",
        diff_slot: str | None = None,
    ) -> protocol.TrialRun:
        """One run, its outputs kept in `slot`; the worker's answer: `screen` per output, `input_kinds`,
        `swapped`, `signature`, and with `diff_slot` `differences` from that slot's outputs."""
        trial = protocol.Trial(
            seed=seed, oracle=False, train=train, rng_seed=rng_seed, slot=slot, stats=True, swap=swap, on_device=True,
            diff_slot=diff_slot,
        )  # fmt: skip
        return self.ask(trial, protocol.TrialRun)[0]

    def derive(self, proposals: dict[str, Any] | None) -> protocol.Derived:
        """The family derived from the task's size globals at `proposals` (protocol.Derive), and why each
        integer it could not vary was not (`fixed`)."""
        return self.ask(protocol.Derive(proposals=proposals), protocol.Derived)[0]

    def stage(self) -> protocol.Staged:
        """The first seed's inputs made and kept in the worker for timing (no candidate's inbox to fill)."""
        stage = protocol.Stage(sets=[{"seed": SEEDS[0]}], on_device=True, inputs_to="here")
        return self.ask(stage, protocol.Staged)[0]

    def device_ms(self) -> float:
        """Median device time of one call, behind a GPU-busy precursor (launch latency hidden)."""
        self.stage()
        timing = protocol.Time(calls=1, samples=20, warmup=3, precursor_ms=0.5, staged=True)
        timed, _ = self.ask(timing, protocol.Timed)
        times = sorted(float(t) for t in timed.times_ms)
        return times[len(times) // 2]

    def close(self) -> None:
        self.worker.close()
