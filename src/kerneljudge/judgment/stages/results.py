"""What the stages of a judgment return: one typed result per stage, kept by judgment/pipeline.py and composed
into the record by judgment/stages/record.py.

A stage that can end in the candidate's failure part-way (the correctness trials, the timing stage) fills a result it
is given, so that what it found before the failure still reaches the record; a stage that runs to its end returns a
frozen one. The findings a stage returns are also gathered in the judgment's one list (`JudgmentState.add_findings`,
one per code), where the stages that add them from two threads meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.results.verdict import Capability, Failure, Finding, Timing, WorkerLog


@dataclass(frozen=True)
class SanitizerRun:
    """compute-sanitizer's part of a judgment (judgment/stages/sanitizer.py): its capability, where the tools ran the
    record's `correctness.sanitizer`, their findings, the failure they make (`race`, `memory_error`) and the logs of
    the workers they ran in."""

    capability: Capability
    record: dict[str, Any] | None = None
    findings: tuple[Finding, ...] = ()
    failure: Failure | None = None
    logs: dict[str, WorkerLog] = field(default_factory=dict)


@dataclass
class Replays:
    """The replays of the trials (judgment/stages/replays.py), filled as they run: the record's
    `correctness.replay`. `perturbations` is drawn once per judgment; `skipped` and `perturbed_s` are set where the
    budget ended the perturbed replays; `bitwise_identical` is set with each replay, over all of them."""

    trials: list[dict[str, Any]] = field(default_factory=list)
    bitwise_identical: bool | None = None
    perturbations: list[dict[str, Any]] | None = None
    skipped: list[str] | None = None
    perturbed_s: float | None = None

    def as_record(self) -> dict[str, Any] | None:
        """The record's `correctness.replay`: None where nothing was replayed or drawn."""
        replay: dict[str, Any] = {}
        if self.trials:
            replay.update(trials=list(self.trials), bitwise_identical=self.bitwise_identical)
        if self.perturbations is not None:
            replay["perturbations"] = list(self.perturbations)
        if self.skipped is not None:
            replay.update(perturbations_skipped=list(self.skipped), perturbed_s=self.perturbed_s)
        return replay or None


@dataclass
class CorrectnessRun:
    """The correctness stage's result (judgment/stages/correctness.py, native.py), filled as it runs: whether every
    trial passed, the replays, compute-sanitizer's run where it was reached, and the last trials of the task's own
    distribution (seed and distribution), whose sets the timing pool may make again (timing.pool_sets)."""

    passed: bool = False
    replays: Replays = field(default_factory=Replays)
    sanitizer: SanitizerRun | None = None
    timing_sets: list[dict[str, Any]] = field(default_factory=list)


def voiding_codes(findings: list[Finding], config: JudgeConfig) -> list[str]:
    """In enforce mode, the codes of the error findings that already make the verdict FAIL (none otherwise)."""
    if not config.enforcing:
        return []
    return sorted({f.code for f in findings if f.severity == "error"})


@dataclass
class TimingRun:
    """The timing stage's result (judgment/stages/timing.py, device_memory.py), filled as it runs: the record's
    `timing` as the stage left it (not reached, disabled, not timed and why, one measurement or the timing shapes'
    geometric mean). A failure part-way leaves what it was set to then (a kept output that failed its check: not
    measured). What the rest of the judgment knows of the timing (the caches carried to its pair, the pair made ready
    ahead, the share of the stage the device was busy) is added as the record is assembled (judgment/stages/record.py),
    into a copy."""

    timing: Timing = field(default_factory=lambda: Timing(measured=False, reason="not reached"))

    def fails_closed(self, findings: list[Finding], config: JudgeConfig) -> bool:
        """In enforce mode, whether an error finding already makes the verdict FAIL, so that nothing more is
        timed (the record's timing says why, set here): no figure could stand, and timing would only spend device
        time, which work hidden from the timed stream (H20) can make minutes. Before timing, and at a failed CUDA
        graph capture that shows unjoined work (judgment/stages/timing.py)."""
        voiding = voiding_codes(findings, config)
        if not voiding:
            return False
        self.timing = Timing(measured=False, reason=f"not timed: enforce fails the candidate on {', '.join(voiding)}")
        return True


@dataclass(frozen=True)
class TraceReading:
    """The kernel traces read at the end of a judgment (judgment/stages/integrity.py): the record's `kernel_trace`,
    the findings read from them and the `profiler_trace` capability."""

    summary: dict[str, Any] | None
    findings: tuple[Finding, ...]
    capability: Capability


@dataclass
class StageResults:
    """What judgment/pipeline.py keeps of its stages for the record: one slot per stage that returns a result."""

    correctness: CorrectnessRun = field(default_factory=CorrectnessRun)
    timing: TimingRun = field(default_factory=TimingRun)
    traces: TraceReading | None = None
