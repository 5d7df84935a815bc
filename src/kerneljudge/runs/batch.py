"""Many candidates, one after another, into a results store; a rerun resumes (docs/batch.md).

A manifest is JSONL: one `{"task": PATH, "candidate": PATH}` per line, paths
relative to the manifest's folder. Every item's store key is known before it is
judged (content hashes, configuration digest, this machine's environment
digest), so items already in the store are skipped and a killed batch loses at
most the judgment in flight. A batch asked to stop (`Interrupt`: SIGINT or
SIGTERM, through `stop_on_signals`) starts nothing more, stops the judgments in
flight by killing their workers (each judgment then closes them and removes
their workspaces, as it always does) and stores none of those.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

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
GROUP_KEYS = ("task", "candidates")  # a group: one task, many candidates (judgment/group.py)
MAX_GROUP_CANDIDATES = 1024
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
    group: str | None = None  # the manifest line of a group's candidates: judged together (judgment/group.py)


@dataclass
class BatchCounts:
    judged: int = 0
    skipped: int = 0
    passed: int = 0
    failed: int = 0
    suspicious: int = 0
    unsupported: int = 0
    errors: int = 0
    interrupted: int = 0  # judgments stopped by an `Interrupt`, not stored
    not_started: int = 0  # items left when the batch stopped (an `Interrupt`, or its deadline)

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
            + self.left()
        )

    def left(self) -> str:
        """What a rerun still has to judge, where the batch stopped before the end ("" where it did not)."""
        if not (self.interrupted or self.not_started):
            return ""
        return (
            f"; not judged: {self.interrupted} stopped in flight, {self.not_started} not started "
            "(the same command again judges them)"
        )


class Interrupt:
    """A batch asked to stop, by a signal (`stop_on_signals`) or by a caller (`ask`): no item starts after it and
    the judgments in flight are stopped (`kill_workers`) and not stored; a rerun judges them."""

    def __init__(self) -> None:
        self.signum: int | None = None
        # Set by the signal handler, in the main thread, which never waits on it (a `Reaper`'s thread does).
        self.asked = threading.Event()

    def ask(self, signum: int = signal.SIGINT) -> None:
        if self.signum is None:
            self.signum = signum
        self.asked.set()

    def __bool__(self) -> bool:
        return self.asked.is_set()

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "a request"

    @property
    def exit_code(self) -> int:
        """The shell's code for a command ended by the signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals(stop: Interrupt, signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[Interrupt]:
    """Within the block, the first SIGINT or SIGTERM asks `stop` (the batch ends cleanly); a second one ends the
    process at once, as the signal does by default (its workers die with it through their lifeline, and their
    workspaces are removed by the next judge's sweep: sandbox/workspace.py). Only the main thread may set
    handlers; elsewhere the block runs without them."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    caught: list[int] = []

    def handler(signum: int, frame: object) -> None:
        caught.append(signum)
        if len(caught) > 1:
            for number in signals:
                signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stop.ask(signum)

    before = {number: signal.signal(number, handler) for number in signals}
    try:
        yield stop
    finally:
        for number, old in before.items():
            signal.signal(number, old)


# A worker's argv names one of these modules (sandbox/process.py, sandbox/plan.wrap_argv): the processes an
# `Interrupt` kills. Any other child of the batch (a Ray cluster, say) is left alone.
WORKER_MODULES = (b"kerneljudge.worker.main", b"kerneljudge.sandbox.enter")


def kill_workers() -> int:
    """Kill every worker this process started that still runs, each with its whole process tree
    (sandbox/ending.kill_tree); how many. Each judgment sees its workers' pipes close, ends at once and closes
    them as it always does, which removes their workspaces."""
    from kerneljudge.sandbox.ending import kill_tree

    me, killed = os.getpid(), 0
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return 0
    for entry in entries:
        try:
            parent = int(Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent != me:
                continue
            argv = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if any(module in argv for module in WORKER_MODULES):
            kill_tree(int(entry), timeout_s=5.0)  # a worker is its own session's leader (start_new_session)
            killed += 1
    return killed


class Reaper:
    """Once `stop` is asked, kill this process's workers (`kill_workers`) every `every_s` until the lanes are
    done: a judgment that starts another pair after the first kill has it killed too."""

    def __init__(self, stop: Interrupt | None, every_s: float = 0.1) -> None:
        self.stop = stop
        self.every_s = every_s
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def _run(self) -> None:
        assert self.stop is not None
        while not self.done.is_set():
            if self.stop.asked.wait(self.every_s * 5):
                break
        while not self.done.is_set():
            kill_workers()
            self.done.wait(self.every_s)

    def __enter__(self) -> Reaper:
        if self.stop is not None:
            self.thread = threading.Thread(target=self._run, name="kerneljudge-stop", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()


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
        grouped = "candidates" in entry
        keys = GROUP_KEYS if grouped else MANIFEST_KEYS
        unknown = sorted(set(entry) - set(keys))
        if unknown:
            raise ManifestError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; only task and candidate, or task and "
                "candidates (a group)"
            )
        if not isinstance(entry.get("task"), str) or not entry["task"]:
            raise ManifestError(f"{where}: 'task' must be a path (a non-empty string)")
        task = Path(entry["task"]) if entry["task"].startswith("builtin:") else path.parent / entry["task"]
        if not grouped:
            if not isinstance(entry.get("candidate"), str) or not entry["candidate"]:
                raise ManifestError(f"{where}: 'candidate' must be a path (a non-empty string)")
            items.append(BatchItem(task, path.parent / entry["candidate"], where))
            continue
        candidates = entry["candidates"]
        if not isinstance(candidates, list) or not candidates or len(candidates) > MAX_GROUP_CANDIDATES:
            raise ManifestError(f"{where}: 'candidates' must be a list of 1 to {MAX_GROUP_CANDIDATES} paths")
        if not all(isinstance(c, str) and c for c in candidates):
            raise ManifestError(f"{where}: 'candidates' must be paths (non-empty strings)")
        items += [
            BatchItem(task, path.parent / c, f"{where} candidate {i + 1}", where) for i, c in enumerate(candidates)
        ]
    return items


def units_of(entries: list[tuple[Prepared, StoreKey]], group_size: int | None) -> list[list[tuple[Prepared, StoreKey]]]:
    """The batch's units of work, in the manifest's order: with `group_size` None, a manifest line's group as one
    unit and every other item alone; with a number, every item with the others of its task (and configuration)
    in groups of at most that many (1: every item alone)."""
    units: list[list[tuple[Prepared, StoreKey]]] = []
    open_units: dict[Any, list[tuple[Prepared, StoreKey]]] = {}
    for entry in entries:
        prepared = entry[0]
        if group_size is None:
            name = prepared.item.group
            if name is None:
                units.append([entry])
                continue
            unit_key: Any = name
        else:
            unit_key = prepared.task.sha256
        unit = open_units.get(unit_key)
        if unit is None or (group_size is not None and len(unit) >= group_size):
            unit = open_units[unit_key] = []
            units.append(unit)
        unit.append(entry)
    return units


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
    stop: Interrupt | None = None,
    heartbeat_s: float | None = None,
    group_size: int | None = None,
) -> BatchCounts:
    """Judge every item not already in the store, storing each record as it completes.

    `deadline` (a time.monotonic() value): no judgment starts after it, nor goes on past waiting for device
    memory (`PastDeadline`); a rerun resumes the rest.
    `stop`: once asked (`stop_on_signals` asks it on SIGINT or SIGTERM), no judgment starts, those in flight
    are stopped (their workers killed: `Reaper`) and not stored, and the counts say how many were stopped
    (`interrupted`) or never started (`not_started`); a rerun judges them.
    `lanes`: one judgment at a time per lane, side by side (`lanes_for`); more than one lane share a
    `LaneGate`, so no lane measures while another works. Each lane judges as every backend does
    (`backends.judge_on_lane`): a judgment that ran short of memory while other lanes were at work is judged
    again at once, alone on its GPU.
    `progress`: live counts and an ETA (rich) on stderr, each item's outcome printed above them; False: nothing;
    None: the live display where stderr is a terminal, else plain lines there (the batch's start, each item's
    start and end, a heartbeat every `heartbeat_s` while judgments run: runs/progress.py). `log`: every
    judgment's stages, a line each with the time, written there as they start (a GPU run's record of where the
    time went). `on_record` is called after each judged item's record is stored.
    `backend`: judge on it instead of on `lanes` (`judge_on_backend`; e.g. `backends.ray.RayBackend`); the
    records still come back to this process's store. `spare_workers`: each lane's next judgment takes a
    worker pair started while the one before was judged (judgment/stages/spare_pairs.py).
    `group_size`: how items are judged together as groups (judgment/group.py: one hidden plan and one reference
    worker per group, each candidate in a fresh worker of its own): None, a manifest line's group as one, every
    other item alone; a number, every item with the others of its task in groups of at most that many (1: none).
    A group's items are judged in turn on one lane, each stored as its record is made.
    """
    from kerneljudge.runs.backends import GroupJob, Job, judge_group_on_lane, judge_on_lane

    if not lanes:
        raise UsageError("a batch needs at least one lane")
    if group_size is not None and group_size < 1:
        raise UsageError(f"a group holds at least one candidate, not {group_size}")
    if backend is not None and list(lanes) != [None]:
        raise UsageError("a batch runs on lanes of this machine or on a backend, not both")
    prepared = prepare(items)
    counts = BatchCounts()
    with Store(store_path) as store:
        gpu = next((lane for lane in lanes if lane is not None), None)
        environments = backend.machine_environments(config) if backend else [machine_environment(config, gpu)]
        env_digests = list(dict.fromkeys(environment_digest(environment) for environment in environments))
        digest = config_digest(config.to_dict())
        todo: queue.SimpleQueue[list[tuple[Prepared, StoreKey]]] = queue.SimpleQueue()
        entries = []
        for entry in prepared:
            keys = [StoreKey(entry.task.sha256, entry.candidate.sha256, digest, env) for env in env_digests]
            if any(store.has(key) for key in keys):
                counts.skipped += 1
            else:
                entries.append((entry, keys[0]))
        for unit in units_of(entries, group_size):
            todo.put(unit)
    total = len(entries)
    live = sys.stderr.isatty() if progress is None else progress
    lines = sys.stderr if progress is None and not live else None
    count = backend.lanes if backend is not None else len(lanes)
    where = f"{count} lane{'' if count == 1 else 's'}" + (" of its backend" if backend is not None else "")
    about = f" ({counts.skipped} already stored, skipped), on {where}, --device {config.device}"
    shown = {"lines": lines, "about": about, **({"heartbeat_s": heartbeat_s} if heartbeat_s is not None else {})}
    if backend is not None:
        with BatchProgress(live, total, counts, log, **shown) as bar:
            judge_on_backend(backend, todo, config, store_path, counts, bar, on_record, deadline, stop)
        counts.not_started = items_left(todo)
        return counts
    depth = pairs_taken(config.timing)
    gate = LaneGate(list(lanes), deadline, spare_pairs=depth if spare_workers else 0) if len(lanes) > 1 else None
    cache = BaselineCache(config) if config.timing and config.timing_baseline == "cached" else None
    lock = threading.Lock()
    failures: list[BaseException] = []
    spares = SparePairs(depth=depth, gate=gate) if spare_workers else None

    def lane(index: int, gpu: str | None, bar: BatchProgress) -> None:
        with Store(store_path) as own:  # a connection per thread; WAL lets the lanes write side by side
            while not failures and not stop and (deadline is None or time.monotonic() < deadline):
                try:
                    unit = todo.get_nowait()
                except queue.Empty:
                    return
                fresh = []
                for entry, key in unit:
                    if own.has(key):  # a duplicate manifest line, or another writer, stored it meanwhile
                        with lock:
                            counts.skipped += 1
                            bar.skip(entry)
                    else:
                        fresh.append((entry, key))
                if not fresh:
                    continue
                if len(lanes) == 1:
                    stage = bar.stage
                else:
                    first = fresh[0][0]
                    name = f"lane {gpu if gpu is not None else index}: {first.task.name}"
                    name += f"/{first.candidate.name}" if len(fresh) == 1 else f" (a group of {len(fresh)})"
                    stage = lambda text, name=name: bar.note(f"{name}: {text}")  # noqa: E731
                grouped = len(fresh) > 1 or fresh[0][0].item.group is not None
                try:
                    if grouped:
                        judged_group(fresh, gpu, own, stage, bar)
                    else:
                        judged_alone(fresh[0][0], gpu, own, stage, bar)
                except PastDeadline as exc:  # never started: a rerun judges it
                    stage(f"not judged: {exc}")
                    todo.put([entry for entry in fresh if not own.has(entry[1])])  # counted as not started
                    return
                if stop:
                    return

    def filed(entry: Prepared, record: Record, own: Store, bar: BatchProgress) -> None:
        """Store a record and count it; one whose workers were killed under it (a stop asked) is neither."""
        if stop:  # its workers were killed under it: whatever it says is not about the candidate
            with lock:
                counts.interrupted += 1
                bar.stop(entry, f"stopped by {stop.name}, not stored; a rerun judges it")
            return
        # The record's own key is what is stored; it differs from the item's only when the
        # judgment saw another environment (its reference worker failed before saying hello).
        own.put(record)
        with lock:
            counts.add(record)
            bar.finish(entry, record)
            if on_record is not None:
                on_record(entry.item, record)

    def judged_alone(entry: Prepared, gpu: str | None, own: Store, stage: Any, bar: BatchProgress) -> None:
        with lock:
            bar.start(entry)
        job = Job(entry.task, entry.candidate, config)
        record = judge_on_lane(job, gpu, gate, cache.for_task if cache is not None else None, stage, spares)
        filed(entry, record, own, bar)

    def judged_group(
        unit: list[tuple[Prepared, StoreKey]], gpu: str | None, own: Store, stage: Any, bar: BatchProgress
    ) -> None:
        group = GroupJob(unit[0][0].task, tuple(entry.candidate for entry, _ in unit), config)
        with lock:
            bar.start(unit[0][0])
        done: set[int] = set()

        def made(index: int, record: Record) -> None:
            done.add(index)
            filed(unit[index][0], record, own, bar)
            following = next((i for i in range(len(unit)) if i not in done), None)
            if following is not None and not stop:
                with lock:
                    bar.start(unit[following][0])

        def stopping() -> bool:
            return bool(stop) or (deadline is not None and time.monotonic() >= deadline)

        baselines = cache.for_task if cache is not None else None
        judge_group_on_lane(group, gpu, gate, baselines, stage, spares, on_record=made, stop=stopping)
        with lock:  # a group ended before its last candidate (asked to stop, or past the deadline): a rerun goes on
            counts.not_started += len(unit) - len(done)

    def guarded(index: int, gpu: str | None, bar: BatchProgress) -> None:
        try:
            lane(index, gpu, bar)
        except BaseException as exc:  # stop the other lanes at their next item, and re-raise below
            failures.append(exc)

    with (
        BatchProgress(live, total, counts, log, **shown) as bar,
        spares or contextlib.nullcontext(),
        Reaper(stop),
    ):
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
    counts.not_started += items_left(todo)
    if failures:
        raise failures[0]
    return counts


def items_left(todo: queue.SimpleQueue[list[tuple[Prepared, StoreKey]]]) -> int:
    """The items of the units no lane took (the queue emptied)."""
    left = 0
    while True:
        try:
            left += len(todo.get_nowait())
        except queue.Empty:
            return left


def judge_on_backend(
    backend: Backend,
    todo: queue.SimpleQueue[list[tuple[Prepared, StoreKey]]],
    config: JudgeConfig,
    store_path: str | Path,
    counts: BatchCounts,
    bar: BatchProgress,
    on_record: Callable[[BatchItem, Record], None] | None,
    deadline: float | None,
    stop: Interrupt | None = None,
) -> None:
    """`run_batch`'s loop over a backend's futures: up to two jobs a lane queued ahead (a group's unit as one
    `GroupJob`, `Backend.submit_group`), none submitted after
    `deadline` or once `stop` is asked. This process alone stores and counts, once per item, as each future
    resolves (a key already stored is a no-op put). A job whose lanes were lost (`backends.ray.LaneLost`) counts
    as an error and is not stored, so a rerun judges it; any other fault of the judge stops submitting and is
    raised once the jobs in flight are stored. Once `stop` is asked the jobs in flight are not waited for: they
    count as `interrupted`, and the backend's exit on an exception stops them (cli/batch.py)."""
    from concurrent.futures import FIRST_COMPLETED, Future, wait

    from kerneljudge.runs.backends import GroupJob, Job
    from kerneljudge.runs.backends.ray import LaneLost

    running: dict[Future[Record], tuple[Prepared, StoreKey]] = {}
    queued: set[StoreKey] = set()
    failure: BaseException | None = None
    with Store(store_path) as store:
        while True:
            while failure is None and not stop and len(running) < 2 * max(backend.lanes, 1):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                try:
                    unit = todo.get_nowait()
                except queue.Empty:
                    break
                fresh = []
                for entry, key in unit:
                    if key in queued:  # a duplicate manifest line: judged once
                        counts.skipped += 1
                        bar.skip(entry)
                    else:
                        queued.add(key)
                        fresh.append((entry, key))
                if not fresh:
                    continue
                first = fresh[0][0]
                name = f"{first.task.name}/{first.candidate.name}"
                for entry, _ in fresh:
                    bar.start(entry)
                if len(fresh) == 1 and first.item.group is None:
                    job = Job(first.task, first.candidate, config)
                    futures = [backend.submit(job, lambda text, name=name: bar.note(f"{name}: {text}"))]
                else:
                    group = GroupJob(first.task, tuple(entry.candidate for entry, _ in fresh), config)
                    name = f"{first.task.name} (a group of {len(fresh)})"
                    futures = backend.submit_group(group, lambda text, name=name: bar.note(f"{name}: {text}"))
                for future, entry_key in zip(futures, fresh, strict=True):
                    running[future] = entry_key
            if not running:
                break
            if stop:
                for entry, _ in running.values():
                    counts.interrupted += 1
                    bar.stop(entry, f"stopped by {stop.name}, not stored; a rerun judges it")
                break
            # A bounded wait, so that a stop asked meanwhile is seen within it.
            done, _ = wait(running, timeout=0.5 if stop is not None else None, return_when=FIRST_COMPLETED)
            for future in done:
                entry, _ = running.pop(future)
                try:
                    record = future.result()
                except LaneLost as exc:
                    counts.errors += 1
                    bar.lost(entry, str(exc))
                    continue
                except BaseException as exc:  # the judge's own fault: stop submitting, raise below
                    failure = failure or exc
                    continue
                store.put(record)
                counts.add(record)
                bar.finish(entry, record)
                if on_record is not None:
                    on_record(entry.item, record)
    if failure is not None:
        raise failure
