"""A lane's step: one judgment on one lane, as `batch` and every backend take it (docs/batch.md, docs/serve.md).

- `judge_on_lane`: the judgment, with the batch's cached baselines when asked for; one that ran short of
  memory beside other lanes (`short_of_memory`) is judged again at once, alone on its GPU (`Alone`);
- `judge_group_on_lane`: a group's judgments on one lane (judgment/group.py), each record handed on as it is made;
  one that ran short of memory is judged again alone once the group's reference worker has ended.
- `BaselineCache`: each task's reference timed once per device, in an A/A judgment, shared by its
  candidates (`--cached-baselines`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import LaneGate, Paused, Stoppable
from kerneljudge.judgment.stages.device_memory import DOES_NOT_FIT, ran_short
from kerneljudge.results.verdict import Record
from kerneljudge.timing.sides import CachedSide

if TYPE_CHECKING:
    from kerneljudge.judgment.stages.spare_pairs import SparePairs
    from kerneljudge.runs.backends import GroupJob, Job, Stage
    from kerneljudge.sources.task import Task

A_A_CANDIDATE = "\n\nclass ModelNew(Model):\n    pass\n"  # the task's own model, as a candidate


class BaselineCache:
    """Cached baselines: each task's reference timed once per device, shared by the task's candidates.

    The reference is timed in an A/A judgment (the task's own model as the candidate: trusted code on both
    sides, in audit mode under the practical policy, with the batch's timing settings), never taken from a
    candidate's judgment: a candidate that slowed the reference down in its own paired timing would
    otherwise slow it for every candidate after it. A task whose A/A judgment is not timed keeps paired
    timing. Lanes on one device share an entry; a per-task lock keeps two lanes from timing it twice.
    """

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config.with_(mode="audit", policy="practical", timing_baseline="paired")
        self.entries: dict[tuple[str, str | None], dict[str, CachedSide]] = {}
        self.lock = threading.Lock()
        self.task_locks: dict[tuple[str, str | None], threading.Lock] = {}
        self.measured: list[Record] = []  # the A/A judgments, in the order they ran

    def for_task(
        self, task: Task, gpu: str | None, gate: Any = None, progress: Callable[[str], None] | None = None
    ) -> dict[str, CachedSide]:
        key = (task.sha256, gpu)
        with self.lock:
            task_lock = self.task_locks.setdefault(key, threading.Lock())
        with task_lock:
            if key not in self.entries:
                self.entries[key] = self._measure(task, gpu, gate, progress)
            return self.entries[key]

    def _measure(
        self, task: Task, gpu: str | None, gate: Any, progress: Callable[[str], None] | None
    ) -> dict[str, CachedSide]:
        from kerneljudge.judgment.pipeline import judge
        from kerneljudge.sources.candidate import parse_candidate

        candidate = parse_candidate(task.text + A_A_CANDIDATE, f"{task.name}_reference_baseline")
        record = judge(task, candidate, self.config, progress=progress, gpu=gpu, gate=gate)
        with self.lock:
            self.measured.append(record)
        if not (record.correctness and record.correctness.passed):
            return {}
        source = f"cached: the reference timed once on this device, in an A/A judgment at {record.created_at}"
        sides = {
            name: CachedSide.from_timing(record.timing, name, self.config.timing_samples, source)
            for name in ("reference", "compiled")
        }
        return {name: side for name, side in sides.items() if side is not None}


class Alone:
    """A lane gate for a judgment run again alone: it waits until no other judgment holds its GPU, whatever
    they reserved, and none starts beside it (gate.LaneGate.admit)."""

    def __init__(self, gate: LaneGate) -> None:
        self.gate = gate

    def work(self) -> AbstractContextManager[None]:
        return self.gate.work()

    def work_beside(self) -> AbstractContextManager[None]:
        return self.gate.work_beside()

    def measure(self, gpu: str | None = None) -> AbstractContextManager[None]:
        return self.gate.measure(gpu)

    def let_measure(self, starting: Sequence[Stoppable] = ()) -> float:
        return self.gate.let_measure(starting)

    def starting(self, workers: Sequence[Stoppable], holding: bool = True) -> AbstractContextManager[Paused]:
        return self.gate.starting(workers, holding)

    def admit(self, gpu: str | None, need: int, total: int, alone: bool = False) -> AbstractContextManager[None]:
        return self.gate.admit(gpu, need, total, alone=True)  # through this gate, every admission is alone


def short_of_memory(record: Record) -> bool:
    """The judgment ran out of device or host memory (the reference did not fit, or the candidate failed
    allocating): with other lanes holding memory that says nothing about the task or the candidate."""
    runs_here = record.capabilities.get("task_runs_here")
    if runs_here is not None and "free memory" in runs_here.detail:
        return True
    if record.failure is not None and record.failure.summary.startswith(DOES_NOT_FIT):
        return False  # its need is larger than the GPU: it ran alone already (judgment/stages/device_memory.py)
    return ran_short(record.failure)


def judge_on_lane(
    job: Job,
    gpu: str | None,
    gate: Any = None,
    baselines: Callable[[Task, str | None, Any, Stage], dict[str, CachedSide]] | None = None,
    progress: Stage | None = None,
    spares: SparePairs | None = None,
) -> Record:
    """One lane's judgment of `job` on `gpu` (its workers' CUDA_VISIBLE_DEVICES; None: inherited or CPU).

    `gate`: the lane gate shared with the other lanes (None: alone). `baselines`: the batch's cached-baseline
    lookup (`BaselineCache.for_task`). `spares`: worker pairs started ahead (judgment/stages/spare_pairs.py). A
    judgment that ran short of device or host memory while other lanes shared the gate (`short_of_memory`)
    says nothing about the candidate, so it is judged again at once, alone on its GPU. `gate.PastDeadline`
    passes through: the job was never started.
    """
    from kerneljudge.judgment.pipeline import judge

    stage = progress or (lambda text: None)
    cached = baselines(job.task, gpu, gate, stage) if baselines is not None else None
    record = judge(
        job.task, job.candidate, job.config, progress=stage, gpu=gpu, gate=gate, baselines=cached, spares=spares
    )
    if gate is not None and short_of_memory(record):
        why = record.failure.summary[:300] if record.failure is not None else "it does not fit now"
        stage(f"short of memory ({why}); judged again, alone on its GPU")
        record = judge(job.task, job.candidate, job.config, progress=stage, gpu=gpu, gate=Alone(gate), spares=spares)
    return record


def judge_group_on_lane(
    group: GroupJob,
    gpu: str | None,
    gate: Any = None,
    baselines: Callable[[Task, str | None, Any, Stage], dict[str, CachedSide]] | None = None,
    progress: Stage | None = None,
    spares: SparePairs | None = None,
    on_record: Callable[[int, Record], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[Record]:
    """A group's judgments on one lane (`judge_on_lane`'s, for `judgment.group.judge_group`): its records in the
    group's order, each also handed to `on_record(index, record)` as it is final. A judgment that ran short of
    memory beside other lanes is judged again alone on its GPU, as a single judgment, once the group's reference
    worker has ended (it holds device memory while it waits); `stop()` ends the group before its next candidate."""
    from kerneljudge.judgment.group import judge_group
    from kerneljudge.judgment.pipeline import judge

    stage = progress or (lambda text: None)
    cached = baselines(group.task, gpu, gate, stage) if baselines is not None else None
    again: list[int] = []

    def filed(index: int, record: Record) -> None:
        if gate is not None and short_of_memory(record):
            again.append(index)
        elif on_record is not None:
            on_record(index, record)

    records = judge_group(
        group.task,
        list(group.candidates),
        group.config,
        progress=stage,
        gpu=gpu,
        gate=gate,
        baselines=cached,
        spares=spares,
        on_record=filed,
        stop=stop,
    )
    for index in again:
        if stop is not None and stop():
            break
        stage(f"candidate {index + 1}: short of memory beside other lanes; judged again, alone on its GPU")
        records[index] = judge(
            group.task, group.candidates[index], group.config, progress=stage, gpu=gpu, gate=Alone(gate), spares=spares
        )
        if on_record is not None:
            on_record(index, records[index])
    return records
