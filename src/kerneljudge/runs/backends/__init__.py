"""Where judgments run: a backend's lanes each judge one candidate at a time (docs/serve.md, docs/batch.md).

A `Job` is one judgment asked for (task, candidate, configuration); `Backend.submit` answers it with a
future of its verdict `Record`; a `GroupJob` is several candidates of one task, judged as a group where the
backend can (`Backend.submit_group`: the local backend does, judgment/group.py, and the Ray backend on one of its
actors). Every backend judges through
`judge_on_lane` (or `judge_group_on_lane`), the lane step `batch` also takes: cached baselines when asked for, and
a judgment that ran short of memory beside other lanes judged again alone on its GPU.

- `lane.py`: a lane's step: one judgment on one lane (`judge_on_lane`), or a group's (`judge_group_on_lane`);
- `machine.py`: where lanes are: the GPUs a worker could be given, the lanes on them, the machine's fingerprint;
- `local.py`: `LocalBackend`, lanes as threads of this process (`lanes_for`) sharing one `LaneGate`; the default;
- `ray.py`: `RayBackend`, a Ray actor per GPU of a cluster, each a `LocalBackend` over its GPU (docs/ray.md);
- `ray_actor.py`: the actor's side: a job as plain JSON, the record's envelope, `GpuJudge`. Only these two
  modules import Ray.

A backend is trusted judge code: it runs `kerneljudge.judgment.pipeline.judge`, which keeps the candidate in its
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
    from kerneljudge.results.verdict import Record
    from kerneljudge.sources.candidate import Candidate
    from kerneljudge.sources.task import Task

Stage = Callable[[str], None]


@dataclass(frozen=True)
class Job:
    """One judgment to run: the task and candidate as loaded (content-hashed), under `config`."""

    task: Task
    candidate: Candidate
    config: JudgeConfig


@dataclass(frozen=True)
class GroupJob:
    """Judgments of several candidates of one task, to run as a group (judgment/group.py): one hidden plan, one
    reference worker lent to each candidate's judgment in turn."""

    task: Task
    candidates: tuple[Candidate, ...]
    config: JudgeConfig

    def jobs(self) -> list[Job]:
        return [Job(self.task, candidate, self.config) for candidate in self.candidates]


class Backend(ABC):
    """Lanes that judge jobs, one at a time each; `submit` never blocks on judging."""

    @abstractmethod
    def submit(self, job: Job, progress: Stage | None = None) -> Future[Record]:
        """Queue `job`; the future holds its record, or the judge's own fault as an exception."""

    def submit_group(self, group: GroupJob, progress: Stage | None = None) -> list[Future[Record]]:
        """Queue a group; a future per candidate, in its order. A backend that cannot judge groups judges each
        candidate alone (its record's `workers.group` is then None)."""
        return [self.submit(job, progress) for job in group.jobs()]

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

    def machine_environments(self, config: JudgeConfig) -> list[dict[str, Any]]:
        """The fingerprints of the machines this backend judges on, as a judgment under `config` records them
        (`backends.machine.machine_environment`), so that a record's store key is known before it is judged. This
        machine's, by default; a cluster answers for its nodes."""
        from kerneljudge.runs.backends.machine import machine_environment

        return [machine_environment(config)]

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


from kerneljudge.runs.backends.lane import (  # noqa: E402  (the lane step needs Job and Stage above)
    judge_group_on_lane,
    judge_on_lane,
)

__all__ = ["Backend", "GroupJob", "Job", "Stage", "judge_group_on_lane", "judge_on_lane"]
