"""Where judgments run: a backend's lanes each judge one candidate at a time (docs/serve.md, docs/batch.md).

A `Job` is one judgment asked for (task, candidate, configuration); `Backend.submit` answers it with a
future of its verdict `Record`. Every backend judges through `judge_on_lane`, the one lane step `batch`
also takes: cached baselines when asked for, and a judgment that ran short of memory beside other lanes
judged again alone on its GPU.

- `LocalBackend` (kerneljudge.backends.local): lanes as threads of this process (`lanes_for`), sharing one
  `LaneGate`; the default, with nothing to install.
- `RayBackend` (kerneljudge.backends.ray): a Ray actor per GPU of a cluster, each a `LocalBackend` over its
  GPU; only that module imports Ray.

A backend is trusted judge code: it runs `kerneljudge.pipeline.judge`, which keeps the candidate in its
sandboxed workers. Records cross process boundaries as JSON, never pickled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kerneljudge.config import JudgeConfig

if TYPE_CHECKING:
    from kerneljudge.candidate import Candidate
    from kerneljudge.tasks.source import Task
    from kerneljudge.timing.basic import CachedSide
    from kerneljudge.verdict import Record

Stage = Callable[[str], None]


@dataclass(frozen=True)
class Job:
    """One judgment to run: the task and candidate as loaded (content-hashed), under `config`."""

    task: Task
    candidate: Candidate
    config: JudgeConfig


class Backend(ABC):
    """Lanes that judge jobs, one at a time each; `submit` never blocks on judging."""

    @abstractmethod
    def submit(self, job: Job, progress: Stage | None = None) -> Future[Record]:
        """Queue `job`; the future holds its record, or the judge's own fault as an exception."""

    @property
    @abstractmethod
    def lanes(self) -> int:
        """How many judgments run side by side."""

    @property
    @abstractmethod
    def busy(self) -> int:
        """How many lanes are judging now."""

    @abstractmethod
    def close(self) -> None:
        """Stop taking jobs, let those in flight finish, and release the lanes."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def judge_on_lane(
    job: Job,
    gpu: str | None,
    gate: Any = None,
    baselines: Callable[[Task, str | None, Any, Stage], dict[str, CachedSide]] | None = None,
    progress: Stage | None = None,
) -> Record:
    """One lane's judgment of `job` on `gpu` (its workers' CUDA_VISIBLE_DEVICES; None: inherited or CPU).

    `gate`: the lane gate shared with the other lanes (None: alone). `baselines`: the batch's cached-baseline
    lookup (`BaselineCache.for_task`). A judgment that ran short of device or host memory while other lanes
    shared the gate (`batch.short_of_memory`) says nothing about the candidate, so it is judged again at once,
    alone on its GPU. `gate.PastDeadline` passes through: the job was never started.
    """
    from kerneljudge.batch import Alone, short_of_memory
    from kerneljudge.pipeline import judge

    stage = progress or (lambda text: None)
    cached = baselines(job.task, gpu, gate, stage) if baselines is not None else None
    record = judge(job.task, job.candidate, job.config, progress=stage, gpu=gpu, gate=gate, baselines=cached)
    if gate is not None and short_of_memory(record):
        why = record.failure.summary[:300] if record.failure is not None else "it does not fit now"
        stage(f"short of memory ({why}); judged again, alone on its GPU")
        record = judge(job.task, job.candidate, job.config, progress=stage, gpu=gpu, gate=Alone(gate), baselines=None)
    return record
