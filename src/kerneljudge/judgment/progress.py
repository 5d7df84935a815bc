"""Progress as a judgment shows it: the spinner that names each stage on stderr (the CLI's, and
`judge(..., progress=True)`'s), and what an API call's `progress` argument means."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import IO

Progress = Callable[[str], None]


@contextmanager
def spinner(description: str, file: IO[str] | None = None) -> Iterator[Progress]:
    """Draw a spinner with `description` on stderr (or `file`) while the block runs; yield the callback that
    replaces its text with the stage that starts."""
    from rich.console import Console

    with Console(stderr=file is None, file=file).status(description) as status:
        yield status.update


def progress_of(progress: Progress | bool | None, description: str) -> AbstractContextManager[Progress | None]:
    """What an API call's `progress` argument means: True, the spinner; a callable, itself; None or False,
    nothing."""
    if progress is True:
        return spinner(description)
    return nullcontext(progress or None)
