"""The task's reference in a sandboxed reference worker, as `kerneljudge tasks lint` runs it (tasks/lint.py):
the seeds it is built and run at, its trials and its device time.
"""

from __future__ import annotations

from typing import Any

from kerneljudge import protocol
from kerneljudge.errors import TaskError
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.sources.task import Task

LOAD_SEED, OTHER_LOAD_SEED, SEEDS, RNG_SEEDS = 42, 43, (1, 2), (7, 8)


class LintReference:
    """The task's reference in a sandboxed worker: load it, run trials, time it."""

    def __init__(self, task: Task, device: str, timeout_s: float) -> None:
        limits = WorkerLimits(step_timeout_s=timeout_s)
        self.worker = WorkerProcess("reference", device, task.text, limits, policy=confine.policy_for("auto"))
        hello = self.worker.receive(timeout_s=limits.start_timeout_s)
        if hello.get("type") != "hello":
            raise WorkerFailure("the reference worker did not start")
        self.hello = hello

    def ask(self, request: protocol.Request, values: Any = None, expect: str = "") -> tuple[dict[str, Any], Any]:
        response, out = self.worker.request(request, values)
        if expect and response.get("type") != expect:
            what = response.get("phase") or request.op
            raise TaskError(f"the reference failed to {what}: {response.get('exc_type')}: {response.get('message')}")
        return response, out

    def load(self, seed: int, shape: dict[str, Any] | None = None, footprint: bool = False) -> dict[str, Any]:
        """Build the model; with `footprint`, what one call holds is told too (worker/footprint.py)."""
        return self.ask(protocol.Load(seed=seed, shape=shape, footprint=footprint), expect="loaded")[0]

    def trial(
        self,
        seed: int,
        train: bool = False,
        rng_seed: int | None = None,
        swap: dict[str, int] | None = None,
        slot: str = "lint",
        diff_slot: str | None = None,
    ) -> dict[str, Any]:
        """One run, its outputs kept in `slot`; the worker's response: "screen" per output, "input_kinds",
        "swapped", "signature", and with `diff_slot` "differences" from that slot's outputs."""
        trial = protocol.Trial(
            seed=seed, oracle=False, train=train, rng_seed=rng_seed, slot=slot, stats=True, swap=swap, on_device=True,
            diff_slot=diff_slot,
        )  # fmt: skip
        return self.ask(trial, expect="trial")[0]

    def derive(self, proposals: dict[str, Any] | None) -> dict[str, Any]:
        """The family derived from the task's size globals at `proposals` (protocol.Derive), and why each
        integer it could not vary was not ("fixed")."""
        return self.ask(protocol.Derive(proposals=proposals), expect="derived")[0]

    def stage(self) -> dict[str, Any]:
        """The first seed's inputs made and kept in the worker for timing (no candidate's inbox to fill)."""
        return self.ask(protocol.Stage(sets=[{"seed": SEEDS[0]}], on_device=True, inputs_to="here"), expect="staged")[0]

    def device_ms(self) -> float:
        """Median device time of one call, behind a GPU-busy precursor (launch latency hidden)."""
        self.stage()
        timing = protocol.Time(calls=1, samples=20, warmup=3, precursor_ms=0.5, staged=True)
        response, _ = self.ask(timing, expect="timed")
        times = sorted(float(t) for t in response["times_ms"])
        return times[len(times) // 2]

    def close(self) -> None:
        self.worker.close()
