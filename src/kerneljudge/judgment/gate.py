"""The lane gate: what a judgment waits for while other judgments share its machine.

A judgment on its own waits for nothing (`OPEN_GATE`). A batch's lanes share one `LaneGate`, which keeps
two rules:

- **Measurement apart from work.** While a lane measures, no other lane works (loads, compiles, checks), nor
  measures on the same GPU: CPU load moves a timer's figures (an 18% shift of a speedup under a concurrent
  build was seen on an H200 on 2026-11-30, judge 0.1.0). A lane that asks to measure waits for the others'
  current steps: a working lane lets it go first between two correctness trials (`let_measure`).
- **Workers starting are stopped, not waited for.** A worker's start (a sandboxed interpreter importing torch,
  creating its CUDA context: 3.5-5 s of an H100 under eight lanes, 2026-12-07, judge 0.3.19) runs no GPU
  kernel and no code of a task's or a candidate's, but loads the CPU. A lane that only waits for its workers to
  start (`starting`), or pauses with a pair still starting (`let_measure(starting=...)`), does not keep another
  from measuring: the measurement stops those processes (SIGSTOP, each seen stopped in /proc before it begins)
  and continues them when no lane measures any more. Waited for, the starts held each measurement back by
  seconds while every other lane idled: 60% of a training step's judgment time on that H100.
- **Device memory by reservation.** Before its first trial a judgment reserves the device memory it is
  likely to need (`memory_need`, from the reference worker's meta-device description of the task,
  worker/footprint.py) and waits until it fits beside the other lanes' reservations on its GPU. KernelBench's
  level 1 has problems whose inputs alone take 6 to 16 GiB; side by side, a handful of them ran an H200 out
  of memory (docs/conformance.md). A need larger than the GPU waits until nothing else is reserved there,
  then runs alone. Lanes ask in turn, so a large need is not passed over for ever by small ones; a small
  one (up to 1/8 of what is reservable) that fits goes ahead at once. A gate given a deadline (a batch's
  `--stop-after`) lets no judgment in after it: one still waiting then gives up (`PastDeadline`), never
  started, so that a call's last minutes do not go to a judgment the call's time limit would cut short.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

GIB = 2**30
CONTEXT_BYTES = 3 * GIB // 4  # device memory of one worker's CUDA context, cuBLAS and cuDNN workspaces
USABLE = 0.92  # of a GPU's memory, what reservations may take (the allocator's rounding and fragmentation)
MARGIN = 1.1  # on a need worked out from tensor sizes: the allocator's cached blocks, workspaces, float64 im2col
POOL_SETS = 3  # input sets in a timing pool (judgment/stages/correctness.py keeps the last three trials')
MIN_POOL_SETS = 2  # the fewest that still give consecutive timed calls different inputs
OVERHEAD = 3 * GIB  # per judgment, beside its tensors: cuBLAS and cuDNN workspaces, the allocator's rounding


def memory_need(
    footprint: dict[str, Any] | None, timed: bool = False, pool_sets: int = POOL_SETS, beside: bool = False
) -> int:
    """The device bytes a judgment's two workers hold at most, from the task's one-call footprint; `timed`:
    the most of that and of what the fresh pair that times it on `pool_sets` input sets holds (`timing_need`),
    or with `beside` (the timing pair made ready while the checked one works: judgment/stages/timing_ahead.py) their
    sum.

    P, I, O: the parameters, inputs and output; A: the forward's working set (worker/footprint.py), at least
    the output. The reference worker holds the model and its float64 copy (3P), the inputs, the previous
    trial's (the canary's) and their float64 copies (4I), the native output and the candidate's read back to
    compare (2O), and the oracle's forward in float64 (2A, A taken at least as large as the inputs: an op the
    meta device runs as one, such as `smooth_l1_loss`, makes an intermediate the size of its inputs on the
    GPU, and level 1's 96_HuberLoss held 17 GiB more than its 0-byte working set implied). The candidate's
    worker holds its model (P), the trial's inputs and the previous ones kept for the canary (2I), its
    forward (A), and four outputs: the previous one kept, the poisoned memory its output is placed in, the
    evidence's snapshot and the copy it sends. Fitted to NVML's peaks of both workers on an H200 (KernelBench
    level 1, 40 problems of 0.1 to 16 GiB, docs/batch.md#device-memory) once channels freed what they
    carried (protocol/wire.py): MARGIN times that sum plus OVERHEAD is 1.0 to 1.7 times what was held. A
    judgment that runs short anyway is judged again alone (backends.lane.Alone). An output or working set the meta
    device could not size is taken to be as large as the inputs. 0 when nothing is known.
    """
    sizes = footprint_sizes(footprint)
    if sizes is None:
        return 0
    parameters, inputs, outputs, working = sizes
    reference = 3 * parameters + 4 * inputs + 2 * outputs + 2 * max(working, inputs)
    candidate = parameters + 2 * inputs + working + 4 * outputs
    need = int(MARGIN * (reference + candidate)) + OVERHEAD
    if not timed:
        return need
    return need + timing_need(sizes, pool_sets) if beside else max(need, timing_need(sizes, pool_sets))


# The most of a GPU that both pairs of a judgment may need, side by side, for its timing pair to be made ready
# while the checked pair works (judgment/stages/timing_ahead.py); a task that needs more loads its timing pair after.
AHEAD_SHARE = 4


def ahead_fits(footprint: dict[str, Any] | None, total: int, pool_sets: int = POOL_SETS) -> bool:
    """Whether the checked and the timing pair of a task of this footprint fit side by side in an
    `AHEAD_SHARE`-th of a GPU of `total` bytes, as `memory_need` sizes them (False where nothing is known)."""
    need = memory_need(footprint, True, pool_sets, beside=True)
    return bool(need and total) and need <= total // AHEAD_SHARE


def footprint_sizes(footprint: dict[str, Any] | None) -> tuple[int, int, int, int] | None:
    """P, I, O and A of a footprint; an output or working set the meta device could not size as the inputs."""
    if not footprint or footprint.get("input_bytes") is None:
        return None
    inputs = int(footprint["input_bytes"])
    parameters = int(footprint.get("parameter_bytes") or 0)
    outputs = footprint.get("output_bytes")
    outputs = inputs if outputs is None else int(outputs)
    working = footprint.get("activation_bytes")
    return parameters, inputs, outputs, max(outputs, inputs if working is None else int(working))


def timing_need(sizes: tuple[int, int, int, int], pool_sets: int = POOL_SETS) -> int:
    """What the timing pair holds at most (judgment/stages/timing_pair.py), from P, I, O and A. The
    reference's worker keeps a pool of `pool_sets` input sets, each with its output and the oracle's in
    float64 (I + 3O each), and makes the last one beside them (a clone and the float64 copies of the inputs,
    the oracle's forward: 3I + 2A); the candidate's worker keeps its own pool, the CUDA graph's buffers of as
    many sets and one more set for the warm-up, its forward and the graph's kept output with the copy
    checked (A + 2O). Fitted to NVML's peaks of both timing workers on an H200 (KernelBench level 1, eleven
    timed judgments of 0.1 to 4 GiB, docs/batch.md#device-memory): 1.1 to 1.4 times what was held, where the
    checked pair's rule fell short by up to 40%.
    """
    parameters, inputs, outputs, working = sizes
    reference = 3 * parameters + pool_sets * (inputs + 3 * outputs) + 3 * inputs + 2 * working
    candidate = parameters + (2 * pool_sets + 1) * inputs + working + 2 * outputs
    return int(MARGIN * (reference + candidate)) + OVERHEAD


def lint_need(footprint: dict[str, Any] | None) -> int:
    """What `tasks lint`'s one reference worker holds at most (tasks/lint.py), from the task's footprint: the
    model and the oracle's float64 copy (3P), the trial's inputs, the swap trial's other seed's and the
    inputs staged for timing (3I), two kept slots of outputs, the timed call's and a difference in float64
    (4O), and the oracle's forward in float64 (2A, A at least the inputs, as in `memory_need`). On an H200
    (2026-12-02, judge 0.1.0), twelve lints side by side by the earlier rule (four times the inputs) ran two
    6 GiB elementwise problems out of memory at 36.7 and 48.7 GiB; this reserves 62 and 76 GiB for them.
    """
    sizes = footprint_sizes(footprint)
    if sizes is None:
        return 0
    parameters, inputs, outputs, working = sizes
    return int(MARGIN * (3 * parameters + 3 * inputs + 4 * outputs + 2 * max(working, inputs))) + OVERHEAD


def timing_pool_sets(footprint: dict[str, Any] | None, total: int) -> int:
    """How many input sets a timing pool holds: POOL_SETS, or the fewest that still rotate (2) where that
    many would not fit a GPU of `total` bytes (KernelBench's 6 GiB elementwise problems: about 180 GiB)."""
    sizes = footprint_sizes(footprint)
    if sizes is None or not total or timing_need(sizes, POOL_SETS) <= USABLE * total:
        return POOL_SETS
    return MIN_POOL_SETS


@dataclass
class Paused:
    """What a `starting` block was held back by the gate: its workers stopped, its hold waiting to be taken again
    (seconds)."""

    seconds: float = 0.0


class Stoppable(Protocol):
    """A process tree a measurement may stop: a worker still starting, which has run no GPU kernel and no code of a
    task's or a candidate's (sandbox/ending.py)."""

    def stop(self) -> None: ...

    def go(self) -> None: ...


class Gate(Protocol):
    """What a judgment holds while it works (starts, checks), while it measures, and for its device memory."""

    def work(self) -> AbstractContextManager[None]: ...

    def work_beside(self) -> AbstractContextManager[None]: ...

    def measure(self, gpu: str | None = None) -> AbstractContextManager[None]: ...

    def let_measure(self, starting: Sequence[Stoppable] = ()) -> float: ...

    def starting(self, workers: Sequence[Stoppable], holding: bool = True) -> AbstractContextManager[Paused]: ...

    def admit(self, gpu: str | None, need: int, total: int, alone: bool = False) -> AbstractContextManager[None]: ...


class _OpenGate:
    """One judgment on its own: nothing to wait for."""

    def work(self) -> AbstractContextManager[None]:
        return nullcontext()

    def work_beside(self) -> AbstractContextManager[None]:
        return nullcontext()

    def measure(self, gpu: str | None = None) -> AbstractContextManager[None]:
        return nullcontext()

    def let_measure(self, starting: Sequence[Stoppable] = ()) -> float:
        return 0.0

    def starting(self, workers: Sequence[Stoppable], holding: bool = True) -> AbstractContextManager[Paused]:
        return nullcontext(Paused())

    def admit(self, gpu: str | None, need: int, total: int, alone: bool = False) -> AbstractContextManager[None]:
        return nullcontext()


OPEN_GATE = _OpenGate()


class PastDeadline(BaseException):
    """A judgment that was still waiting for device memory when its batch's deadline came: not started, not
    stored, judged by a rerun. A BaseException, so that the pipeline's catch-all does not record it as the
    judge's error."""


class LaneGate:
    """Shared by a batch's lanes (`lanes`: the GPU of each, None for the inherited device): measurement apart
    from work, and device memory by reservation (the module's docstring says why)."""

    def __init__(
        self, lanes: list[str | None] | None = None, deadline: float | None = None, spare_pairs: int = 0
    ) -> None:
        self.deadline = deadline  # a time.monotonic() value: no admission after it (`PastDeadline`)
        self.spare_pairs = spare_pairs  # worker pairs kept started per GPU (judgment/stages/spare_pairs.py)
        self._cond = threading.Condition()
        self._working = 0
        self._measuring: set[str | None] = set()  # the GPUs being measured on (None: the inherited device)
        self._waiting = 0  # lanes waiting to measure: new work waits behind them
        self._lanes = {gpu: (lanes or []).count(gpu) for gpu in set(lanes or [])}
        self._reserved: dict[str | None, int] = {}  # bytes reserved per GPU
        self._asking: dict[str | None, list[int]] = {}  # per GPU, the tickets of lanes waiting for memory, in turn
        self._lone: dict[str | None, list[int]] = {}  # per GPU, the tickets of judgments to run alone, in turn
        self._holding: dict[str | None, int] = {}  # per GPU, the judgments admitted, whatever they reserved
        self._tickets = itertools.count()
        self.waits: list[tuple[str | None, int, float]] = []  # (gpu, need, seconds waited) of each admission
        self._starting: dict[int, tuple[Stoppable, int]] = {}  # workers a measurement may stop, with their askers
        self._stopped: dict[int, Stoppable] = {}  # those stopped, continued when no lane measures
        self.stops = 0  # worker trees stopped for a measurement, in all
        self._measured_s = 0.0  # seconds some lane measured, in all (while `_measuring_since` is None)
        self._measuring_since: float | None = None

    def work(self) -> AbstractContextManager[None]:
        return self._work(wait=True)

    def work_beside(self) -> AbstractContextManager[None]:
        """More work of a lane that holds `work()` now, counted at once, without waiting (its own hold could
        not end while it waited): work that goes on in a thread after the step that began it, such as a
        pair closing while the next starts (judgment/stages/workers.close_beside). Until it ends no lane measures."""
        return self._work(wait=False)

    @contextmanager
    def _work(self, wait: bool) -> Iterator[None]:
        with self._cond:
            if wait:  # behind every lane that measures or waits to
                self._cond.wait_for(lambda: not self._measuring and not self._waiting)
            self._working += 1
        try:
            yield
        finally:
            with self._cond:
                self._working -= 1
                self._cond.notify_all()

    @contextmanager
    def measure(self, gpu: str | None = None) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: gpu not in self._measuring and not self._working)
            self._waiting -= 1
            if not self._measuring:
                self._measuring_since = time.monotonic()
            self._measuring.add(gpu)
            for key, (worker, _) in self._starting.items():
                self._stop(key, worker)
        try:
            yield
        finally:
            with self._cond:
                self._measuring.discard(gpu)
                if not self._measuring and self._measuring_since is not None:
                    self._measured_s += time.monotonic() - self._measuring_since
                    self._measuring_since = None
                    stopped, self._stopped = list(self._stopped.values()), {}
                    for worker in stopped:
                        worker.go()
                self._cond.notify_all()

    def _measured(self) -> float:
        """Seconds some lane has measured so far, in all (under the lock)."""
        now = 0.0 if self._measuring_since is None else time.monotonic() - self._measuring_since
        return self._measured_s + now

    def _stop(self, key: int, worker: Stoppable) -> None:
        """Stop a starting worker for the measurement under way (under the condition's lock), once."""
        if key not in self._stopped:
            worker.stop()
            self._stopped[key] = worker
            self.stops += 1

    def _register(self, workers: Sequence[Stoppable]) -> list[int]:
        """Count `workers` as starting, stoppable by a measurement (under the lock): stopped now where one is on."""
        keys = []
        for worker in workers:
            key = id(worker)
            held = self._starting.get(key)
            self._starting[key] = (worker, 1 if held is None else held[1] + 1)
            keys.append(key)
            if self._measuring:
                self._stop(key, worker)
        return keys

    def _unregister(self, keys: list[int]) -> None:
        """No longer starting for the lane that registered them (one stopped now stays so until no lane measures)."""
        for key in keys:
            worker, count = self._starting[key]
            if count > 1:
                self._starting[key] = (worker, count - 1)
            else:
                del self._starting[key]

    def let_measure(self, starting: Sequence[Stoppable] = ()) -> float:
        """Called inside `work()` between two steps of a judgment (two correctness trials): where a lane waits
        to measure, stop working until no lane measures or waits to, then work again. A lane that asks to
        measure then waits for the others' current steps, not for their whole stages. `starting`: this lane's
        workers still starting (its timing pair), which the measurement stops meanwhile. The seconds paused."""
        with self._cond:
            if not self._waiting:
                return 0.0
            began = time.monotonic()
            self._working -= 1
            keys = self._register(starting)
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._measuring and not self._waiting)
            self._unregister(keys)
            self._working += 1
            return time.monotonic() - began

    @contextmanager
    def starting(self, workers: Sequence[Stoppable], holding: bool = True) -> Iterator[Paused]:
        """The block waits for `workers` to start (for their hello) and does nothing else: a measurement may stop
        them meanwhile (module docstring), and the hold the calling thread has (`holding`: a lane's `work()`, or
        work beside it) keeps no lane from measuring until the block ends. The hold is taken again then, once no
        lane measures, without waiting for lanes that wait to (the lane's own thread may be waiting for this
        one, work beside it): such a lane waits for the next step, as it would have for this one. What it yields
        says, after the block, the seconds the workers were stopped and the hold waited for."""
        paused = Paused()
        with self._cond:
            keys = self._register(workers)
            measured = self._measured()
            if holding:
                self._working -= 1
                self._cond.notify_all()
        try:
            yield paused
        finally:
            with self._cond:
                self._unregister(keys)
                stopped = self._measured() - measured if keys else 0.0  # stopped while any lane measured
                waited = time.monotonic()
                if holding:
                    self._cond.wait_for(lambda: not self._measuring)
                    self._working += 1
                paused.seconds = stopped + time.monotonic() - waited
                self._cond.notify_all()

    def reservable(self, gpu: str | None, total: int) -> int:
        """What the lanes of `gpu` may reserve of its `total` bytes: a share, less every lane's CUDA contexts
        (two workers each) and those of the spare pairs kept started for them, which wait outside any judgment's
        reservation."""
        pairs = max(1, self._lanes.get(gpu, 1)) + self.spare_pairs
        return max(0, int(USABLE * total) - 2 * CONTEXT_BYTES * pairs)

    @contextmanager
    def admit(self, gpu: str | None, need: int, total: int, alone: bool = False) -> Iterator[None]:
        """Hold `need` bytes of `gpu` (of `total`) until the block ends; called inside `work()`, whose hold
        is given up while waiting (a lane that waits for memory must not keep another from measuring).

        `alone`: wait until no other judgment holds `gpu`, whatever it reserved, and let none in beside it
        until the block ends (a judgment run again after it ran short of memory: backends.lane.Alone). Judgments that
        reserve nothing count too: GPU MODE's inputs are made on the device, so the meta device cannot size
        them, and a retry that waited only for reservations ran out of memory again beside eleven of them
        (bioml/trimul on an H200, 2026-12-03)."""
        if total <= 0 and not alone:
            yield
            return
        room = self.reservable(gpu, total)
        with self._cond:
            if self.deadline is not None and time.monotonic() >= self.deadline and (need > 0 or alone):
                raise PastDeadline(f"{need / GIB:.1f} GiB of device memory asked for after the deadline")
            ticket = next(self._tickets)
            turn = self._lone.setdefault(gpu, []) if alone else self._asking.setdefault(gpu, [])
            asks = alone or need > 0  # a judgment that reserves nothing waits only for one that runs alone
            if asks:
                turn.append(ticket)
            began = time.monotonic()

            def fits() -> bool:
                if alone:
                    return turn[0] == ticket and not self._holding.get(gpu)
                if self._lone.get(gpu):
                    return False
                if need <= 0:
                    return True
                used = self._reserved.get(gpu, 0)
                if used + need > room and used > 0:
                    return False
                return turn[0] == ticket or need <= room // 8

            if not fits():
                self._working -= 1
                self._cond.notify_all()
                left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
                admitted = self._cond.wait_for(lambda: fits() and not self._measuring and not self._waiting, left)
                self._working += 1
                if not admitted:
                    if asks:
                        turn.remove(ticket)
                    self._cond.notify_all()
                    raise PastDeadline(f"still waiting for {need / GIB:.1f} GiB of device memory at the deadline")
            if asks and not alone:
                turn.remove(ticket)  # a lone judgment keeps its ticket, which keeps the others out, to the end
            self._holding[gpu] = self._holding.get(gpu, 0) + 1
            self._reserved[gpu] = self._reserved.get(gpu, 0) + max(need, 0)
            if asks:
                self.waits.append((gpu, need, round(time.monotonic() - began, 3)))
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._holding[gpu] -= 1
                self._reserved[gpu] -= max(need, 0)
                if alone:
                    turn.remove(ticket)
                self._cond.notify_all()
