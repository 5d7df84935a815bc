"""Spare worker pairs, started before the judgment that takes them (for a judgment's latency).

A pair's start, two sandboxed interpreters importing torch and, on a GPU, starting CUDA, is most of a small
judgment's build stage: 3 to 4 s of an 8 s judgment without timing on an H200 (docs/batch.md). A judge that
lives on (a batch's lanes, the reward server, the latency benchmark) may keep spares: `stages.workers.new_pair`
takes one whose kind matches (device, GPU, sandbox policy, limits) and at once starts another for the next
judgment, beside this one's work.

What keeps this inside the trust model (docs/process-model.md):
- a spare is started exactly as `new_pair` starts a pair (`start_pair`), but with no source: it has run no task
  or candidate code. Its sources are written into its workspace when a judgment takes it
  (`WorkerProcess.assign`, which also takes the workspace's manifest again) and imported at its load;
- a spare serves one judgment and ends with it, as any pair does: nothing a candidate did outlives it;
- a spare that died, or waited longer than `max_idle_s`, is closed unused and a fresh pair started instead.
A timed judgment takes two pairs, the checked one at its build and the timing one (judgment/stages/timing_pair.py)
beside it: a judge that times keeps two of a kind (`depth`), so that the second is not one started a moment before.
A spare holds a CUDA context on its GPU while it waits (about half a GiB each on an H200), outside any judgment's
reservation: a batch's gate takes the spares' contexts off what its lanes may reserve (`LaneGate(spare_pairs=)`).
Spares are asked for (`--spare-workers`), not the default, until a device measurement shows them paying at
eight lanes with the gate stopping starts (docs/batch.md).
Given the lanes' gate, a spare's start is one the gate may stop while a lane measures (gate.LaneGate.starting), as
a lane's own pairs are, until both its workers have said hello; a lane that waits for a spare still starting lends
its hold to the measurements meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from kerneljudge.judgment.gate import OPEN_GATE, Gate
from kerneljudge.sandbox.process import WorkerProcess

Pair = dict[str, WorkerProcess]
Kind = tuple[Any, ...]  # (device, gpu, sandbox policy, limits): what a pair's start depends on
HELLO_POLL_S = 0.02  # how often a spare's start looks for both workers' hellos


def pairs_taken(timed: bool) -> int:
    """The worker pairs one judgment takes: the checked pair, and the timing pair where it is timed; the depth a
    judge that keeps spares keeps of a kind."""
    return 2 if timed else 1


class SparePairs:
    """Worker pairs started ahead, by kind; thread-safe (a batch's lanes share one)."""

    def __init__(self, max_idle_s: float = 600.0, depth: int = 1, gate: Gate | None = None) -> None:
        if depth < 1:
            raise ValueError(f"spare pairs are kept one of a kind at least, not {depth}")
        self.max_idle_s = max_idle_s
        self.depth = depth  # spares of a kind kept started: the pairs one judgment takes (2 where it is timed)
        self.taken = 0  # judgments that got a spare
        self.missed = 0  # judgments that found none ready to take (the first of each kind, or one that died)
        self._lock = threading.Lock()
        self._spares: dict[Kind, list[tuple[float, Future[Pair]]]] = {}
        self._starter = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kerneljudge-spare")
        self._closed = False
        self.gate = gate or OPEN_GATE

    def _start(self, start: Callable[[], Pair]) -> Pair:
        """Start a pair, and under the gate (`starting`, no hold of a lane's) wait until both its workers have said
        hello, or died: a measurement may stop them meanwhile."""
        pair = start()
        deadline = time.monotonic() + min(w.limits.start_timeout_s for w in pair.values())
        with self.gate.starting(list(pair.values()), holding=False):
            while not all(w.has_answered() for w in pair.values()) and time.monotonic() < deadline:
                time.sleep(HELLO_POLL_S)
        return pair

    def take(self, kind: Kind, start: Callable[[], Pair]) -> Pair | None:
        """A spare of `kind`, waited for if it is still starting, or None where there is none to take; either
        way others are started with `start` until `depth` of the kind are, for the next takes."""
        with self._lock:
            if self._closed:
                return None
            stale = self._stale()
            queue = self._spares.setdefault(kind, [])
            entry = queue.pop(0) if queue else None
            while len(queue) < self.depth:
                queue.append((time.monotonic(), self._starter.submit(self._start, start)))
        for _, future in stale:
            close_pair(future.result())
        if entry is not None and not entry[1].done():  # still starting: the lane's hold lent to measurements meanwhile
            with self.gate.starting([]):
                wait([entry[1]])
        pair = self._ready(entry)
        with self._lock:
            if pair is None:
                self.missed += 1
            else:
                self.taken += 1
        return pair

    def _stale(self) -> list[tuple[float, Future[Pair]]]:
        """Started spares of any kind that waited longer than `max_idle_s`, taken out (under the lock): a
        server whose requests change kinds (another timeout) does not keep every kind's spares alive."""
        now, stale = time.monotonic(), []
        for queue in self._spares.values():
            old = [e for e in queue if now - e[0] > self.max_idle_s and e[1].done() and e[1].exception() is None]
            stale += old
            queue[:] = [e for e in queue if e not in old]
        return stale

    def _ready(self, entry: tuple[float, Future[Pair]] | None) -> Pair | None:
        if entry is None:
            return None
        born, future = entry
        try:
            pair = future.result()
        except Exception:  # the judgment starts its own pair, and meets the same error there, as its own
            return None
        if time.monotonic() - born > self.max_idle_s or any(w.proc.poll() is not None for w in pair.values()):
            close_pair(pair)
            return None
        return pair

    def starting(self) -> bool:
        """Whether a spare is still starting (its interpreters importing torch, loading the CPU): an idle judge's
        spares are ready once none is (benchmarks/judgment_latency.py)."""
        with self._lock:
            futures = [future for queue in self._spares.values() for _, future in queue]
        for future in futures:
            if not future.done():
                return True
            if future.exception() is None and not all(w.has_answered() for w in future.result().values()):
                return True
        return False

    def waiting(self, timeout_s: float | None = None) -> list[Pair]:
        """The spares not yet taken, once each has started (a benchmark's idle judge, a test)."""
        with self._lock:
            futures = [future for queue in self._spares.values() for _, future in queue]
        return [future.result(timeout=timeout_s) for future in futures]

    def close(self) -> None:
        """Close every spare not taken (their workers never loaded anything)."""
        with self._lock:
            self._closed = True
            entries = [entry for queue in self._spares.values() for entry in queue]
            self._spares = {}
        for _, future in entries:
            try:
                close_pair(future.result())
            except Exception:
                pass
        self._starter.shutdown(wait=True)

    def __enter__(self) -> SparePairs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_pair(pair: Pair) -> None:
    for worker in pair.values():
        worker.ask_exit()
    for worker in pair.values():
        worker.close()
