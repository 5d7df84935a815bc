"""Logging for `kerneljudge serve`: the package's loggers (one per module, `logging.getLogger(__name__)`)
write to stderr only where a command asks for it (docs/serve.md, "Logging").

The library configures nothing: `kerneljudge.serve` gives the `kerneljudge` logger a `NullHandler`, so a
program that embeds it (a trainer with `LocalJudge`) decides where its records go, and the other commands
print nothing through logging. `kerneljudge serve` calls `configure`: INFO by default, in text or as one
JSON object a line for a log collector.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TextIO

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    """A record as one JSON object: time, level, logger, message, and the traceback where there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record comes, as `logging.lastResort` does (a test's capture
    of stderr ends; the handler goes on)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr


def configure(level: str = "info", style: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """Send the `kerneljudge` loggers' records at `level` and above to `stream` (default: stderr), in `style`;
    calling it again replaces the handler it added before. Returns the handler."""
    if level not in LEVELS or style not in FORMATS:
        raise ValueError(f"log level {level!r} or format {style!r} not one of {LEVELS} and {FORMATS}")
    handler = logging.StreamHandler(stream) if stream is not None else Stderr()
    handler.setFormatter(JsonLines() if style == "json" else logging.Formatter(TEXT_FORMAT))
    handler.set_name("kerneljudge.logs")
    package = logging.getLogger("kerneljudge")
    for old in [h for h in package.handlers if h.get_name() == "kerneljudge.logs"]:
        package.removeHandler(old)
    package.addHandler(handler)
    package.setLevel(level.upper())
    return handler
