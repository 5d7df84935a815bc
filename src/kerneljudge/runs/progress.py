"""A batch's progress as it is shown (`BatchProgress`): on a terminal, live counts with an ETA and a line above
them for each item that ends; off a terminal (piped, in CI), plain lines: the batch's start, each item's start
and end, and a heartbeat while judgments run, so a log is never silent for minutes; and the stage log (--log).

An item's line says what a user looks for first: its place, its name, its status, the failure's kind and the
speedup where it was timed, marked when it is a CPU timing (docs/batch.md, "Progress").
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from kerneljudge.results.verdict import Record
    from kerneljudge.runs.batch import BatchCounts, Prepared

# Off a terminal, a line at least this often while a judgment runs (one takes minutes on the CPU).
HEARTBEAT_S = 30.0


def item_name(entry: Prepared) -> str:
    return f"{entry.task.name}/{entry.candidate.name}"


def outcome(record: Record) -> str:
    """A record in a few words: its status, its failure's kind, its speedup where it was timed."""
    parts = [record.status]
    kind = record.failure.kind if record.failure is not None else record.failure_kind
    if kind:
        parts.append(kind)
    timing = record.timing
    if timing.measured and timing.speedup is not None:
        cpu = " (a CPU timing, not a GPU speedup)" if record.device == "cpu" else ""
        parts.append(f"speedup {timing.speedup:.3g}x{cpu}")
    return ", ".join([*parts, f"{record.duration_s:.1f} s"])


class BatchProgress:
    """What a batch shows as it goes: live counts and an ETA through rich.progress (`live`), or plain lines
    written to `lines`, or nothing. `about` describes the batch in its first line (its lanes, its device)."""

    def __init__(
        self,
        show: bool,
        total: int,
        counts: BatchCounts,
        log: TextIO | None = None,
        lines: TextIO | None = None,
        about: str = "",
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.counts = counts
        self.log = log
        self.lines = None if show else lines
        self.total = total
        self.about = about
        self.heartbeat_s = heartbeat_s
        self.label = ""
        self.ended = 0  # items ended (judged, skipped as stored meanwhile, or stopped), for "[3/10]"
        self.started = 0
        self.running: dict[int, tuple[str, float]] = {}  # id(entry): (its name, when it started)
        self.lock = threading.RLock()  # the lanes and the heartbeat write side by side
        self.last_line = time.monotonic()
        self.quiet = threading.Event()
        self.beat: threading.Thread | None = None
        self.bar: Any = None
        if show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.table import Column

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=16),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TextColumn(
                    "{task.fields[stage]}",
                    markup=False,
                    table_column=Column(no_wrap=True, overflow="ellipsis", max_width=50),
                ),
                # rich estimates the speed from the last 30 s by default; a judgment takes seconds to minutes
                speed_estimate_period=3600.0,
                console=Console(stderr=True),  # stdout keeps the summary, for whatever reads it
            )
            self.task_id = self.bar.add_task(self._counts(), total=total, stage="")

    def _counts(self) -> str:
        c = self.counts
        parts = [f"{c.passed} pass", f"{c.failed} fail", f"{c.suspicious} susp", f"{c.errors} err"]
        parts += [f"{n} {name}" for n, name in ((c.unsupported, "unsup"), (c.skipped, "skip")) if n]
        return " ".join(parts)

    def _say(self, text: str) -> None:
        """A line above the live display, or a plain line; nothing where neither is shown."""
        with self.lock:
            self.last_line = time.monotonic()
            if self.bar is not None:
                self.bar.console.print(text, markup=False, highlight=False)
            elif self.lines is not None:
                self.lines.write(text + "\n")
                self.lines.flush()

    def start(self, entry: Prepared) -> None:
        self.label = item_name(entry)
        with self.lock:
            self.started += 1
            self.running[id(entry)] = (self.label, time.monotonic())
            if self.bar is None:
                self._say(f"judging {self.label} ({self.started} of {self.total} started)")
        if self.bar is not None:
            self.bar.update(self.task_id, stage=self.label)

    def stage(self, text: str) -> None:
        self.note(f"{self.label}: {text}")

    def note(self, text: str) -> None:
        """The stage column as given (lanes name their own judgment in it), and a line of the log."""
        if self.log is not None:
            self.log.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self.log.flush()
        if self.bar is not None:
            self.bar.update(self.task_id, stage=text)

    def finish(self, entry: Prepared, record: Record) -> None:
        """An item judged and stored: its line, and the counts."""
        self._end(entry, outcome(record))

    def skip(self, entry: Prepared) -> None:
        """An item found stored as its turn came (a repeated manifest line, or another writer's)."""
        self._end(entry, "already stored, skipped")

    def lost(self, entry: Prepared, why: str) -> None:
        """An item counted as an error but not stored (its lane was lost): a rerun judges it."""
        self.note(f"{item_name(entry)}: {why}; a rerun judges it")
        self._end(entry, f"ERROR, not stored: {why}; a rerun judges it")

    def stop(self, entry: Prepared, why: str) -> None:
        """An item whose judgment was stopped: not stored, not counted; a rerun judges it."""
        self._end(entry, f"not judged: {why}", count=False)

    def _end(self, entry: Prepared, what: str, count: bool = True) -> None:
        with self.lock:
            self.running.pop(id(entry), None)
            self.ended += 1
            self._say(f"[{self.ended}/{self.total}] {item_name(entry)}: {what}")
        if not count:
            return
        if self.log is not None:
            self.log.write(f"{time.strftime('%H:%M:%S')} done: {self._counts()}\n")
            self.log.flush()
        if self.bar is not None:
            self.bar.update(self.task_id, advance=1, description=self._counts(), stage="")

    def _heartbeat(self) -> None:
        """Off a terminal: while judgments run, a line whenever none was written for `heartbeat_s`."""
        while not self.quiet.wait(min(1.0, self.heartbeat_s / 4)):
            with self.lock:
                if not self.running or time.monotonic() - self.last_line < self.heartbeat_s:
                    continue
                now = time.monotonic()
                name, began = min(self.running.values(), key=lambda item: item[1])
                count = len(self.running)
                items = "item" if count == 1 else "items"
                self._say(f"still judging {count} {items}, oldest ({name}) for {now - began:.0f} s")

    def __enter__(self) -> BatchProgress:
        if self.bar is not None:
            self.bar.start()
        elif self.lines is not None:
            self._say(f"batch: {self.total} item{'' if self.total == 1 else 's'} to judge{self.about}")
            self.beat = threading.Thread(target=self._heartbeat, name="kerneljudge-heartbeat", daemon=True)
            self.beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.quiet.set()
        if self.beat is not None:
            self.beat.join()
        if self.bar is not None:
            self.bar.stop()
