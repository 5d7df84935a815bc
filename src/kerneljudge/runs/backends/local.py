"""The local backend: lanes as threads of this process, sharing one lane gate (docs/serve.md)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import LaneGate
from kerneljudge.judgment.stages.spare_pairs import SparePairs, pairs_taken
from kerneljudge.runs.backends import Backend, GroupJob, Job, Stage, judge_group_on_lane, judge_on_lane

if TYPE_CHECKING:
    from kerneljudge.results.verdict import Record

_STOP = None


class LocalBackend(Backend):
    """A thread per lane (`machine.lanes_for`: a GPU's CUDA_VISIBLE_DEVICES entry, or None for the CPU or the
    inherited device). Lanes take jobs in the order submitted; more than one lane share a `LaneGate`, so no
    lane measures while another works and device memory is reserved before a judgment's first trial."""

    def __init__(
        self,
        lanes: Sequence[str | None] = (None,),
        cached_baselines: bool = False,
        spare_workers: bool = False,
        timed: bool = False,
    ) -> None:
        if not lanes:
            raise ValueError("a backend needs at least one lane")
        # Worker pairs started ahead of each lane's next judgment (judgment/stages/spare_pairs.py), where asked for;
        # two of a kind where the judgments are `timed` by default (each takes a checked pair and a timing pair).
        self._lanes = list(lanes)
        depth = pairs_taken(timed)
        self.gate = LaneGate(self._lanes, spare_pairs=depth if spare_workers else 0) if len(self._lanes) > 1 else None
        self.spares = SparePairs(depth=depth, gate=self.gate) if spare_workers else None
        self.cached_baselines = cached_baselines
        self._caches: dict[str, object] = {}  # a BaselineCache per configuration digest
        self._queue: queue.SimpleQueue[tuple[Any, Stage | None, Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = 0
        self._closed = False
        self._threads = [
            threading.Thread(target=self._lane, args=(gpu,), name=f"kerneljudge-lane-{index}", daemon=True)
            for index, gpu in enumerate(self._lanes)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def machine_environments(self, config: JudgeConfig) -> list[dict[str, Any]]:
        """This machine's fingerprint as its first GPU lane's workers see it (the inherited view without one)."""
        from kerneljudge.runs.backends.machine import machine_environment

        return [machine_environment(config, next((gpu for gpu in self._lanes if gpu is not None), None))]

    def submit(self, job: Job, progress: Stage | None = None) -> Future[Record]:
        future: Future[Record] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the backend is closed")
            self._queue.put((job, progress, future))
        return future

    def submit_group(self, group: GroupJob, progress: Stage | None = None) -> list[Future[Record]]:
        """The group judged on one lane (`judge_group_on_lane`); each future resolves as its record is made."""
        futures: list[Future[Record]] = [Future() for _ in group.candidates]
        with self._lock:
            if self._closed:
                raise RuntimeError("the backend is closed")
            self._queue.put((group, progress, futures))
        return futures

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._threads:
                self._queue.put(_STOP)
        for thread in self._threads:
            thread.join()
        if self.spares is not None:
            self.spares.close()

    def _baselines(self, job: Job):  # noqa: ANN202 - BaselineCache.for_task, or None
        from kerneljudge.results.store import config_digest
        from kerneljudge.runs.backends.lane import BaselineCache

        if not (self.cached_baselines and job.config.timing and job.config.timing_baseline == "cached"):
            return None
        digest = config_digest(job.config.to_dict())
        with self._lock:
            cache = self._caches.setdefault(digest, BaselineCache(job.config))
        return cache.for_task  # type: ignore[attr-defined]

    def _lane(self, gpu: str | None) -> None:
        while True:
            entry = self._queue.get()
            if entry is _STOP:
                return
            job, progress, future = entry
            if isinstance(job, GroupJob):
                self._group(job, progress, future, gpu)
                continue
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._busy += 1
            try:
                future.set_result(judge_on_lane(job, gpu, self.gate, self._baselines(job), progress, self.spares))
            except BaseException as exc:  # the judge's own fault: the caller decides what it means
                future.set_exception(exc)
            finally:
                with self._lock:
                    self._busy -= 1

    def _group(self, group: GroupJob, progress: Stage | None, futures: list[Future[Record]], gpu: str | None) -> None:
        running = [future.set_running_or_notify_cancel() for future in futures]
        if not any(running):
            return
        with self._lock:
            self._busy += 1
        baselines = self._baselines(group.jobs()[0])

        def filed(index: int, record: Record) -> None:
            if running[index]:
                futures[index].set_result(record)

        try:
            judge_group_on_lane(group, gpu, self.gate, baselines, progress, self.spares, on_record=filed)
        except BaseException as exc:  # the judge's own fault, for every candidate it left without a record
            for index, future in enumerate(futures):
                if running[index] and not future.done():
                    future.set_exception(exc)
        finally:
            with self._lock:
                self._busy -= 1
