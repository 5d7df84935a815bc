"""Many candidates, one after another, into a results store; a rerun resumes (docs/batch.md).

A manifest is JSONL: one `{"task": PATH, "candidate": PATH}` per line, paths
relative to the manifest's folder. Every item's store key is known before it is
judged (content hashes, configuration digest, this machine's environment
digest), so items already in the store are skipped and a killed batch loses at
most the judgment in flight.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.judgment.gate import LaneGate, PastDeadline
from kerneljudge.judgment.stages.spare_pairs import SparePairs, pairs_taken
from kerneljudge.results.store import Store, StoreKey, config_digest, environment_digest
from kerneljudge.results.verdict import Record
from kerneljudge.runs.backends.lane import BaselineCache
from kerneljudge.runs.backends.machine import machine_environment
from kerneljudge.runs.progress import BatchProgress
from kerneljudge.sources.task import read_source

if TYPE_CHECKING:
    from kerneljudge.runs.backends import Backend
    from kerneljudge.sources.candidate import Candidate
    from kerneljudge.sources.task import Task

MANIFEST_KEYS = ("task", "candidate")
# A line holds two paths (PATH_MAX is 4 KiB each); 64 MiB is a million such items at 64 bytes.
MAX_MANIFEST_LINE_CHARS = 16 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
COUNTED = {"PASS": "passed", "FAIL": "failed", "SUSPICIOUS": "suspicious", "UNSUPPORTED": "unsupported"}


class ManifestError(UsageError):
    """A manifest line is not a usable item; the message names the line."""


@dataclass(frozen=True)
class BatchItem:
    task: Path
    candidate: Path
    where: str = ""  # "manifest.jsonl line 3", for error messages


@dataclass
class BatchCounts:
    judged: int = 0
    skipped: int = 0
    passed: int = 0
    failed: int = 0
    suspicious: int = 0
    unsupported: int = 0
    errors: int = 0

    def add(self, record: Record) -> None:
        self.judged += 1
        name = COUNTED.get(record.status, "errors")
        setattr(self, name, getattr(self, name) + 1)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"judged {self.judged}, skipped {self.skipped} (already stored): {self.passed} passed, "
            f"{self.failed} failed, {self.suspicious} suspicious, {self.unsupported} unsupported, {self.errors} errors"
        )


@dataclass(frozen=True)
class Prepared:
    item: BatchItem
    task: Task
    candidate: Candidate


def read_manifest(path: str | Path) -> list[BatchItem]:
    """Every item of a JSONL manifest; the first bad line raises ManifestError naming it."""
    path = Path(path)
    lines = read_source(path, "the manifest", ManifestError, MAX_MANIFEST_BYTES).splitlines()
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        if len(line) > MAX_MANIFEST_LINE_CHARS:
            raise ManifestError(f"{where}: longer than {MAX_MANIFEST_LINE_CHARS} characters, not an item")
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:  # thousands of nested brackets: json's decoder recurses once per level
            raise ManifestError(f"{where}: not an item (JSON nested too deeply)") from None
        if not isinstance(entry, dict):
            raise ManifestError(f'{where}: expected an object {{"task": PATH, "candidate": PATH}}')
        unknown = sorted(set(entry) - set(MANIFEST_KEYS))
        if unknown:
            raise ManifestError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; only task and candidate")
        for key in MANIFEST_KEYS:
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ManifestError(f"{where}: {key!r} must be a path (a non-empty string)")
        task = Path(entry["task"]) if entry["task"].startswith("builtin:") else path.parent / entry["task"]
        items.append(BatchItem(task, path.parent / entry["candidate"], where))
    return items


def prepare(items: Sequence[BatchItem]) -> list[Prepared]:
    """Load every task and candidate up front, so a bad item stops the batch before anything is judged."""
    from kerneljudge.sources.candidate import load_candidate
    from kerneljudge.tasks import gpumode
    from kerneljudge.tasks.load import load_task

    tasks: dict[Path, Task] = {}
    prepared = []
    for index, item in enumerate(items, start=1):
        where = item.where or f"item {index}"
        try:
            resolved = item.task.resolve()
            if resolved not in tasks:
                tasks[resolved] = load_task(item.task)
            candidate = gpumode.adapt_candidate(tasks[resolved], load_candidate(item.candidate))
            prepared.append(Prepared(item, tasks[resolved], candidate))
        except UsageError as exc:
            raise ManifestError(f"{where}: {exc}") from None
    return prepared


def run_batch(
    items: Sequence[BatchItem],
    config: JudgeConfig,
    store_path: str | Path,
    progress: bool | None = None,
    on_record: Callable[[BatchItem, Record], None] | None = None,
    lanes: Sequence[str | None] = (None,),
    deadline: float | None = None,
    log: TextIO | None = None,
    backend: Backend | None = None,
    spare_workers: bool = False,
) -> BatchCounts:
    """Judge every item not already in the store, storing each record as it completes.

    `deadline` (a time.monotonic() value): no judgment starts after it, nor goes on past waiting for device
    memory (`PastDeadline`); a rerun resumes the rest.
    `lanes`: one judgment at a time per lane, side by side (`lanes_for`); more than one lane share a
    `LaneGate`, so no lane measures while another works. Each lane judges as every backend does
    (`backends.judge_on_lane`): a judgment that ran short of memory while other lanes were at work is judged
    again at once, alone on its GPU.
    `progress`: live counts and an ETA (rich) on
    stdout; None shows them when stdout is a terminal. `log`: every judgment's stages, a line each with the
    time, written there as they start (a GPU run's record of where the time went). `on_record` is called
    after each judged item's record is stored.
    `backend`: judge on it instead of on `lanes` (`judge_on_backend`; e.g. `backends.ray.RayBackend`); the
    records still come back to this process's store. `spare_workers`: each lane's next judgment takes a
    worker pair started while the one before was judged (judgment/stages/spare_pairs.py).
    """
    from kerneljudge.runs.backends import Job, judge_on_lane

    if not lanes:
        raise UsageError("a batch needs at least one lane")
    if backend is not None and list(lanes) != [None]:
        raise UsageError("a batch runs on lanes of this machine or on a backend, not both")
    prepared = prepare(items)
    counts = BatchCounts()
    with Store(store_path) as store:
        gpu = next((lane for lane in lanes if lane is not None), None)
        environments = backend.machine_environments(config) if backend else [machine_environment(config, gpu)]
        env_digests = list(dict.fromkeys(environment_digest(environment) for environment in environments))
        digest = config_digest(config.to_dict())
        todo: queue.SimpleQueue[tuple[Prepared, StoreKey]] = queue.SimpleQueue()
        for entry in prepared:
            keys = [StoreKey(entry.task.sha256, entry.candidate.sha256, digest, env) for env in env_digests]
            if any(store.has(key) for key in keys):
                counts.skipped += 1
            else:
                todo.put((entry, keys[0]))
    show = sys.stdout.isatty() if progress is None else progress
    if backend is not None:
        with BatchProgress(show, todo.qsize(), counts, log) as bar:
            judge_on_backend(backend, todo, config, store_path, counts, bar, on_record, deadline)
        return counts
    gate = LaneGate(list(lanes), deadline) if len(lanes) > 1 else None
    cache = BaselineCache(config) if config.timing and config.timing_baseline == "cached" else None
    lock = threading.Lock()
    failures: list[BaseException] = []
    spares = SparePairs(depth=pairs_taken(config.timing)) if spare_workers else None

    def lane(index: int, gpu: str | None, bar: BatchProgress) -> None:
        with Store(store_path) as own:  # a connection per thread; WAL lets the lanes write side by side
            while not failures and (deadline is None or time.monotonic() < deadline):
                try:
                    entry, key = todo.get_nowait()
                except queue.Empty:
                    return
                if own.has(key):  # a duplicate manifest line, or another writer, stored it meanwhile
                    with lock:
                        counts.skipped += 1
                        bar.advance()
                    continue
                with lock:
                    bar.start(entry)
                if len(lanes) == 1:
                    stage = bar.stage
                else:
                    name = f"lane {gpu if gpu is not None else index}: {entry.task.name}/{entry.candidate.name}"
                    stage = lambda text, name=name: bar.note(f"{name}: {text}")  # noqa: E731
                try:
                    job = Job(entry.task, entry.candidate, config)
                    record = judge_on_lane(job, gpu, gate, cache.for_task if cache is not None else None, stage, spares)
                except PastDeadline as exc:  # never started: a rerun judges it
                    stage(f"not judged: {exc}")
                    return
                # The record's own key is what is stored; it differs from `key` only when the
                # judgment saw another environment (its reference worker failed before saying hello).
                own.put(record)
                with lock:
                    counts.add(record)
                    bar.advance()
                    if on_record is not None:
                        on_record(entry.item, record)

    def guarded(index: int, gpu: str | None, bar: BatchProgress) -> None:
        try:
            lane(index, gpu, bar)
        except BaseException as exc:  # stop the other lanes at their next item, and re-raise below
            failures.append(exc)

    with BatchProgress(show, todo.qsize(), counts, log) as bar, spares or contextlib.nullcontext():
        if len(lanes) == 1:
            lane(0, lanes[0], bar)
        else:
            threads = [
                threading.Thread(target=guarded, args=(index, gpu, bar), daemon=True) for index, gpu in enumerate(lanes)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    if failures:
        raise failures[0]
    return counts


def judge_on_backend(
    backend: Backend,
    todo: queue.SimpleQueue[tuple[Prepared, StoreKey]],
    config: JudgeConfig,
    store_path: str | Path,
    counts: BatchCounts,
    bar: BatchProgress,
    on_record: Callable[[BatchItem, Record], None] | None,
    deadline: float | None,
) -> None:
    """`run_batch`'s loop over a backend's futures: up to two jobs a lane queued ahead, none submitted after
    `deadline`. This process alone stores and counts, once per item, as each future resolves (a key already
    stored is a no-op put). A job whose lanes were lost (`backends.ray.LaneLost`) counts as an error and is
    not stored, so a rerun judges it; any other fault of the judge stops submitting and is raised once the
    jobs in flight are stored."""
    from concurrent.futures import FIRST_COMPLETED, Future, wait

    from kerneljudge.runs.backends import Job
    from kerneljudge.runs.backends.ray import LaneLost

    running: dict[Future[Record], Prepared] = {}
    queued: set[StoreKey] = set()
    failure: BaseException | None = None
    with Store(store_path) as store:
        while True:
            while failure is None and len(running) < 2 * max(backend.lanes, 1):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                try:
                    entry, key = todo.get_nowait()
                except queue.Empty:
                    break
                if key in queued:  # a duplicate manifest line: judged once
                    counts.skipped += 1
                    bar.advance()
                    continue
                queued.add(key)
                name = f"{entry.task.name}/{entry.candidate.name}"
                job = Job(entry.task, entry.candidate, config)
                running[backend.submit(job, lambda text, name=name: bar.note(f"{name}: {text}"))] = entry
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                entry = running.pop(future)
                try:
                    record = future.result()
                except LaneLost as exc:
                    bar.note(f"{entry.task.name}/{entry.candidate.name}: {exc}; a rerun judges it")
                    counts.errors += 1
                    bar.advance()
                    continue
                except BaseException as exc:  # the judge's own fault: stop submitting, raise below
                    failure = failure or exc
                    continue
                store.put(record)
                counts.add(record)
                bar.advance()
                if on_record is not None:
                    on_record(entry.item, record)
    if failure is not None:
        raise failure
