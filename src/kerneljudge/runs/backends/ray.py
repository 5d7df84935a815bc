"""The Ray backend: every GPU of a Ray cluster judges, through an actor per GPU (docs/ray.md).

Each actor (`GpuJudge`) reserves one GPU (`num_gpus=1`: Ray sets its CUDA_VISIBLE_DEVICES) and holds a
`LocalBackend` of `jobs_per_gpu` lanes; its lanes' workers inherit that view (lane None), with the local
judge's sandbox, workspaces and lane gate. A cluster whose GPUs are only declared (`ray start --num-gpus N`
on a CPU machine, a test cluster) runs the same actors, judging with device cpu.

Trust model. Driver and actors are trusted judge code; the candidate runs only in the sandboxed workers an
actor's lanes start. What crosses between driver and actor is plain data of the judge's own making: a job
goes out as one JSON text (task and candidate texts, names and paths; the configuration's dict), and a
record comes back as `record.model_dump_json()` inside a JSON envelope, which the driver parses with
`Record.model_validate_json` (schema-checked). No Record, Task or exception object is unpickled from
another process; Ray's own transport moves only these strings, each capped in length (ray_actor.py): a job
or an envelope over its cap fails that job alone with `RemoteJudgeError`, read by its length first.

Groups. A group (`submit_group`) goes to one actor as one job and is judged on one of its lanes as a group
(judgment/group.py: one hidden plan, one reference worker for its checked pairs); its records come back together,
as a list of envelopes, once the group is judged. An actor that dies with a group in flight sends the whole group
to another actor, once, as it does a job.

Exactly once. The driver owns the store (`batch.run_batch`), so a record is stored and counted once,
when its future resolves. Ray's retries are off (`max_restarts=0`, `max_task_retries=0`): a candidate
that crashes its worker is an ordinary FAIL record from the actor, never a retry. Only an actor's own
death (`RayActorError`: the actor process killed, its node lost) sends its jobs in flight to another
actor, once each; a job whose second actor dies too fails with `LaneLost`, which the batch counts as an
error, does not store, and a rerun judges. Dead actors are not replaced: the backend goes on with the
lanes left.
"""

from __future__ import annotations

import collections
import json
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kerneljudge.errors import KernelJudgeError, UsageError
from kerneljudge.results.verdict import Record
from kerneljudge.runs.backends import Backend, GroupJob, Job, Stage
from kerneljudge.runs.backends.ray_actor import (
    Envelope,
    GpuJudge,
    RemoteJudgeError,
    group_to_json,
    job_to_json,
    one_line,
    read_envelope,
    read_envelopes,
)

RAY_MISSING = "the Ray backend needs Ray, which is not installed: pip install 'kerneljudge[ray]'"
MAX_ATTEMPTS = 2  # the first actor, then once elsewhere when that actor died
WAIT_S = 0.2  # the dispatcher's longest wait before it looks at newly submitted jobs


class LaneLost(KernelJudgeError):
    """A job was not judged: the actors it was sent to died (twice), or no lane of the cluster was left."""


def import_ray() -> Any:
    """The `ray` module, or a one-line UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(RAY_MISSING) from None
    return ray


@dataclass
class _Pending:
    payload: str  # the job, as job_to_json wrote it, or a group as group_to_json did
    progress: Stage
    futures: list[Future[Record]]  # one for a job; a group's, in its order
    group: bool = False
    attempts: int = 0
    lanes_lost: list[str] = field(default_factory=list)

    def start(self) -> bool:
        """The futures set running at the first dispatch; False where the caller cancelled them all."""
        if self.attempts:
            return True
        return any([future.set_running_or_notify_cancel() for future in self.futures])

    def fail(self, exc: BaseException) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(exc)


class RayBackend(Backend):
    """An actor per GPU of a Ray cluster (`num_gpus` of them; default every GPU the cluster has), each with
    `jobs_per_gpu` lanes. Connects with `ray.init(address)` unless this process is connected already, and
    disconnects on `close` only what it connected. A dispatcher thread sends each job to the actor with the
    most free lanes and resolves its future from the actor's envelope."""

    def __init__(
        self,
        address: str | None = None,
        jobs_per_gpu: int = 1,
        num_gpus: int | None = None,
        cached_baselines: bool = False,
        start_timeout_s: float = 300.0,
    ) -> None:
        if jobs_per_gpu < 1:
            raise UsageError(f"jobs per GPU must be at least 1, got {jobs_per_gpu}")
        if num_gpus is not None and num_gpus < 1:
            raise UsageError(f"the Ray backend needs at least one GPU, got num_gpus={num_gpus}")
        ray = self._ray = import_ray()
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"at {address}" if address else "on this machine"
                raise UsageError(
                    f"cannot start or reach a Ray cluster {where}: {str(exc).splitlines()[0]} (is the head up? "
                    "a cluster with token authentication needs RAY_AUTH_MODE=token here too: docs/ray.md)"
                ) from None
        self.jobs_per_gpu = jobs_per_gpu
        self._actors: dict[str, Any] = {}
        self._where: dict[str, str] = {}
        try:
            self._start_actors(num_gpus, cached_baselines, start_timeout_s)
        except BaseException:
            self._release()
            raise
        self._free = {name: jobs_per_gpu for name in self._actors}
        self._queue: collections.deque[_Pending] = collections.deque()
        self._inflight: dict[Any, tuple[_Pending, str]] = {}  # ObjectRef -> (job, actor name)
        self._cond = threading.Condition()
        self._closed = False
        self._stopped = False  # set by an exception leaving the `with` block: lost jobs are not judged again
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="kerneljudge-ray-dispatch", daemon=True)
        self._dispatcher.start()

    def _start_actors(self, num_gpus: int | None, cached_baselines: bool, timeout_s: float) -> None:
        ray = self._ray
        total = int(ray.cluster_resources().get("GPU", 0))
        count = total if num_gpus is None else num_gpus
        if total == 0:
            raise UsageError(
                "the Ray cluster has no GPUs; on a machine without any, declare them for CPU judgments: "
                "ray start --head --num-gpus N"
            )
        if count > total:
            raise UsageError(f"asked for {count} GPUs of the Ray cluster; it has {total}")
        remote = ray.remote(GpuJudge)
        prefix = f"kerneljudge-{uuid.uuid4().hex[:8]}"
        for index in range(count):
            name = f"{prefix}-lane{index}"
            # Ray's own restarts and retries off: the dispatcher retries a lost job once, elsewhere (_lost).
            options = dict(num_gpus=1, max_restarts=0, max_task_retries=0, max_concurrency=self.jobs_per_gpu + 1)
            self._actors[name] = remote.options(name=name, **options).remote(self.jobs_per_gpu, cached_baselines)
        names = list(self._actors)
        try:
            places = ray.get([self._actors[name].where.remote() for name in names], timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise UsageError(
                f"{count} lane actors did not start within {timeout_s:.0f} s: are {count} GPUs of the cluster free?"
            ) from None
        except ray.exceptions.RayError as exc:
            first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            raise RemoteJudgeError(
                f"a lane actor failed to start ({first.strip()}): is this kerneljudge installed on every node?"
            ) from None
        self._where = dict(zip(names, places, strict=True))

    @property
    def lanes(self) -> int:
        with self._cond:
            return len(self._actors) * self.jobs_per_gpu

    @property
    def busy(self) -> int:
        with self._cond:
            return len(self._inflight)

    @property
    def actors(self) -> dict[str, str]:
        """The lane actors alive, by their Ray name: where each runs (node and GPU)."""
        with self._cond:
            return {name: self._where[name] for name in self._actors}

    def machine_environments(self, config: Any) -> list[dict[str, Any]]:
        """The distinct fingerprints of the nodes the actors run on, as a judgment under `config` records them:
        the batch's store keys are known before judging, whichever actor judges."""
        with self._cond:
            actors = list(self._actors.values())
        texts = self._ray.get([actor.environment.remote(json.dumps(config.to_dict())) for actor in actors])
        return [json.loads(text) for text in dict.fromkeys(texts)]

    def submit(self, job: Job, progress: Stage | None = None) -> Future[Record]:
        future: Future[Record] = Future()
        try:
            payload = job_to_json(job)
        except RemoteJudgeError as exc:  # too long to send: this job's error, not the backend's
            future.set_exception(RemoteJudgeError(f"not sent to a lane: {exc}"))
            return future
        self._queued(_Pending(payload, progress or (lambda text: None), [future]))
        return future

    def submit_group(self, group: GroupJob, progress: Stage | None = None) -> list[Future[Record]]:
        """The group judged on one lane of one actor (its `LocalBackend.submit_group`: one hidden plan, one reference
        worker for its checked pairs); its records come back together, once the group is judged."""
        futures: list[Future[Record]] = [Future() for _ in group.candidates]
        try:
            payload = group_to_json(group)
        except RemoteJudgeError as exc:
            for future in futures:
                future.set_exception(RemoteJudgeError(f"not sent to a lane: {exc}"))
            return futures
        self._queued(_Pending(payload, progress or (lambda text: None), futures, group=True))
        return futures

    def _queued(self, pending: _Pending) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the backend is closed")
            self._queue.append(pending)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._dispatcher.join()
        self._release()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        """On an exception (Ctrl-C included) stop at once: queued jobs are cancelled and the actors killed, so
        their jobs in flight fail with `LaneLost` instead of being waited for; then `close`."""
        if exc_type is not None:
            with self._cond:
                self._stopped = True
                queued = list(self._queue)
                self._queue.clear()
                actors = list(self._actors.values())
            for pending in queued:
                for future in pending.futures:
                    if not future.cancel():  # already running: a job sent again after its actor died
                        future.set_exception(LaneLost("not judged: the batch was stopped"))
            for actor in actors:
                self._ray.kill(actor, no_restart=True)
        self.close()

    def _release(self) -> None:
        for actor in self._actors.values():
            self._ray.kill(actor, no_restart=True)
        self._actors.clear()
        if self._owns_connection:
            self._ray.shutdown()

    def _dispatch_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    self._dispatch()
                    if not self._inflight:
                        if self._closed and not self._queue:
                            return
                        self._cond.wait(WAIT_S)
                        continue
                    refs = list(self._inflight)
                ready, _ = self._ray.wait(refs, num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    self._finish(ref)
        except BaseException as exc:  # the dispatcher itself broke: no future may wait forever
            with self._cond:
                left = [pending for pending, _ in self._inflight.values()] + list(self._queue)
                self._inflight.clear()
                self._queue.clear()
            for pending in left:
                pending.fail(exc)

    def _dispatch(self) -> None:
        """Send queued jobs to the actors with free lanes (called holding the lock)."""
        while self._queue:
            pending = self._queue[0]
            if not self._actors:
                self._queue.popleft()
                if not pending.start():
                    continue  # cancelled by its caller
                lost = f" (lost: {', '.join(pending.lanes_lost)})" if pending.lanes_lost else ""
                pending.fail(LaneLost(f"no lane of the Ray cluster is left{lost}"))
                continue
            name = max(self._free, key=self._free.__getitem__)
            if self._free[name] == 0:
                return
            self._queue.popleft()
            if not pending.start():
                continue
            pending.attempts += 1
            self._free[name] -= 1
            actor = self._actors[name]
            method = actor.judge_group if pending.group else actor.judge
            self._inflight[method.remote(pending.payload)] = (pending, name)
            pending.progress(f"judging on {name} ({self._where[name]})")

    def _finish(self, ref: Any) -> None:
        ray = self._ray
        with self._cond:
            pending, name = self._inflight.pop(ref)
            if name in self._free:
                self._free[name] += 1
        try:
            answer = ray.get(ref)
            envelopes = read_envelopes(answer, len(pending.futures)) if pending.group else [read_envelope(answer)]
        except RemoteJudgeError as exc:
            pending.fail(RemoteJudgeError(f"{name} {exc}"))
            return
        except ray.exceptions.RayActorError as exc:
            self._lost(pending, name, exc)
            return
        except ray.exceptions.RayError as exc:
            pending.fail(RemoteJudgeError(f"{name}: {one_line(str(exc))}"))
            return
        for future, envelope in zip(pending.futures, envelopes, strict=True):
            self._resolve(pending, name, future, envelope)

    @staticmethod
    def _resolve(pending: _Pending, name: str, future: Future[Record], envelope: Envelope) -> None:
        for line in envelope.stages:
            pending.progress(f"{name}: {line}")
        if future.done():  # cancelled by its caller before the group was sent
            return
        if envelope.record is None:
            future.set_exception(RemoteJudgeError(f"the judge failed on {name}: {envelope.error}"))
        else:
            future.set_result(envelope.record)

    def _lost(self, pending: _Pending, name: str, exc: Exception) -> None:
        """`name`'s actor died with `pending` in flight: forget the actor; judge the job elsewhere, once."""
        why = str(exc).splitlines()[-1] if str(exc) else type(exc).__name__
        with self._cond:
            self._actors.pop(name, None)
            self._free.pop(name, None)
            pending.lanes_lost.append(name)
            if self._stopped:
                pending.fail(LaneLost("not judged: the batch was stopped"))
                return
            if pending.attempts < MAX_ATTEMPTS:
                pending.progress(f"{name} was lost ({why}); judged again on another lane")
                self._queue.appendleft(pending)
                return
        lanes = " and ".join(pending.lanes_lost)
        pending.fail(LaneLost(f"not judged: the lanes {lanes} died while judging it ({why})"))
