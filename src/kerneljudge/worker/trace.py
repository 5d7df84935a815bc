"""A kernel trace of one candidate call, gathered with torch.profiler (CUPTI) in the worker.

The worker brackets the call with named ranges (the call itself, the wait for
its stream, the judge's own evidence work) and sends the raw events back: which
kernels ran, on which stream, launched by which runtime call, when they started
and ended on the same clock as the ranges. The parent reads them
(kerneljudge.checks.trace); nothing is decided here. A candidate can see that a
profiler is active, so the parent picks the traced calls at random, and checks
every call's output whether it was traced or not.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Event categories of a torch.profiler chrome trace that the parent needs.
KEPT_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation"}
RANGE_PREFIX = "kj::"
MAX_EVENTS = 60000  # a 6-layer LSTM over 512 steps launches about 12,600 kernels and runtime calls in one call
NAME_CAP = 512


def _kept(event: dict[str, Any]) -> dict[str, Any] | None:
    category = event.get("cat")
    if category not in KEPT_CATEGORIES or event.get("ph") != "X":
        return None
    name = str(event.get("name", ""))
    if category == "user_annotation" and not name.startswith(RANGE_PREFIX):
        return None
    if category in ("cuda_runtime", "cuda_driver") and "Launch" not in name and "Graph" not in name:
        return None  # only launches and graph calls matter: they link kernels to the range that made them
    args = event.get("args") or {}
    return {
        "cat": category,
        "name": name[:NAME_CAP],
        "ts": event.get("ts"),
        "dur": event.get("dur"),
        "stream": args.get("stream"),
        "correlation": args.get("correlation"),
    }


class KernelTrace:
    """Profile a block of work; `events` holds the kept events afterwards, `error` why there are none."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.events: list[dict[str, Any]] = []
        self.error: str | None = None
        self.profiler: Any = None

    @contextmanager
    def active(self) -> Iterator[None]:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        try:
            self.profiler = profile(activities=activities)
            self.profiler.__enter__()
        except Exception as exc:  # e.g. a profiler already running in this process
            self.error = f"the profiler did not start: {type(exc).__name__}: {exc}"
            self.profiler = None
        try:
            yield
        finally:
            if self.profiler is not None:
                self._finish()

    def range(self, name: str) -> Any:
        from torch.profiler import record_function

        return record_function(RANGE_PREFIX + name)

    def _finish(self) -> None:
        try:
            self.profiler.__exit__(None, None, None)
            handle, path = tempfile.mkstemp(suffix=".json")
            os.close(handle)
            try:
                self.profiler.export_chrome_trace(path)
                with open(path) as stream:
                    raw = json.load(stream)
            finally:
                os.unlink(path)
            events = raw.get("traceEvents", []) if isinstance(raw, dict) else []
            kept = [k for k in map(_kept, events) if k is not None]
            if len(kept) > MAX_EVENTS:
                self.error = f"the trace holds {len(kept)} events, more than {MAX_EVENTS}"
                return
            self.events = kept
        except Exception as exc:
            self.error = f"the trace could not be read: {type(exc).__name__}: {exc}"

    def report(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error[:2000]}
        return {"events": self.events}
