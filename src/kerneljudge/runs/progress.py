"""A batch's progress as it is shown: live counts with an ETA, and its stage log (`BatchProgress`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from kerneljudge.runs.batch import BatchCounts, Prepared


class BatchProgress:
    """Live counts and an ETA through rich.progress, or nothing."""

    def __init__(self, show: bool, total: int, counts: BatchCounts, log: TextIO | None = None) -> None:
        self.counts = counts
        self.log = log
        self.label = ""
        self.bar: Any = None
        if show:
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
            )
            self.task_id = self.bar.add_task(self._counts(), total=total, stage="")

    def _counts(self) -> str:
        c = self.counts
        parts = [f"{c.passed} pass", f"{c.failed} fail", f"{c.suspicious} susp", f"{c.errors} err"]
        parts += [f"{n} {name}" for n, name in ((c.unsupported, "unsup"), (c.skipped, "skip")) if n]
        return " ".join(parts)

    def start(self, entry: Prepared) -> None:
        self.label = f"{entry.task.name}/{entry.candidate.name}"
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

    def advance(self) -> None:
        if self.log is not None:
            self.log.write(f"{time.strftime('%H:%M:%S')} done: {self._counts()}\n")
            self.log.flush()
        if self.bar is not None:
            self.bar.update(self.task_id, advance=1, description=self._counts(), stage="")

    def __enter__(self) -> BatchProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
