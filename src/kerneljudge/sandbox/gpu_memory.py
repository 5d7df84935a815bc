"""A per-worker GPU memory cap: the parent watches NVML's per-process memory and kills a worker over it.
Without a cap the watch still keeps the most the worker held (`peak_bytes`): what a batch's memory
reservation (kerneljudge/judgment/gate.py) is checked against, in its stage log.

Rlimits do not see device memory, and one worker filling the GPU would starve the other worker of the
pair (an out-of-memory error read as the reference's or the next candidate's fault). NVML lists every
process holding a CUDA context with its used memory; the watcher sums it over the worker's process tree
(host pids: the parent, in the host's PID namespace, sees those NVML reports), asking of each process NVML
lists whether it descends from the worker (`ending.Lineage`). The check is a poll,
so a fast allocation can overshoot the cap for up to one interval before the kill.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kerneljudge.sandbox.confine import Layer


def open_nvml() -> tuple[Any, list[Any], str | None]:
    """pynvml and every device handle, or the reason NVML cannot be read here."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())], None
    except Exception as exc:  # no NVML library or no driver: the cap cannot be watched
        return None, [], f"NVML unavailable: {type(exc).__name__}: {exc}"


def used_bytes(nvml: Any, handles: list[Any], owns: Callable[[int], bool]) -> int:
    """GPU memory that the processes `owns` accepts hold on all devices (a process NVML cannot size counts 0).
    Only the processes NVML lists are asked about, a handful, not every process of the host."""
    total = 0
    for handle in handles:
        for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if isinstance(process.usedGpuMemory, int) and owns(process.pid):
                total += process.usedGpuMemory
    return total


class GpuMemoryWatch(threading.Thread):
    """Polls the worker tree's GPU memory and keeps the most it saw; over the cap (if any), records the
    reading and calls `kill`."""

    def __init__(
        self,
        nvml: Any,
        handles: list[Any],
        owns: Callable[[int], bool],
        kill: Callable[[], object],
        cap_bytes: int | None,
        interval_s: float = 0.2,
    ) -> None:
        super().__init__(daemon=True)
        self.nvml, self.handles, self.owns, self.kill = nvml, handles, owns, kill
        self.cap_bytes = cap_bytes
        self.interval_s = interval_s
        self.exceeded_bytes: int | None = None
        self.peak_bytes = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            try:
                used = used_bytes(self.nvml, self.handles, self.owns)
            except Exception:  # a transient NVML error: read again next time
                continue
            self.peak_bytes = max(self.peak_bytes, used)
            if self.cap_bytes is not None and used > self.cap_bytes:
                self.exceeded_bytes = used
                self.kill()
                return

    def stop(self) -> None:
        self._halt.set()

    def reason(self) -> str | None:
        if self.exceeded_bytes is None or self.cap_bytes is None:
            return None
        held, cap = self.exceeded_bytes / 2**30, self.cap_bytes / 2**30
        return f"held {held:.2f} GiB of GPU memory, over its cap of {cap:.2f} GiB"


def start_watch(
    device: str, cap_bytes: int | None, owns: Callable[[int], bool], kill: Callable[[], object]
) -> tuple[GpuMemoryWatch | None, Layer]:
    """Start the watcher where it means something (`owns`: whether a process is of the worker's tree); always say
    why not where it does not."""
    if device == "cpu":
        return None, Layer("not_applicable", "the worker runs on the CPU")
    nvml, handles, error = open_nvml()
    watch = None
    if error is None and handles:  # with no cap, only the peak is kept
        watch = GpuMemoryWatch(nvml, handles, owns, kill, cap_bytes)
        watch.start()
    if cap_bytes is None:
        return watch, Layer("not_applicable", "no GPU memory cap set by the policy")
    if watch is None:
        return None, Layer("missing", error) if error is not None else Layer("not_applicable", "NVML sees no GPU")
    return watch, Layer("in_force", f"NVML per-process memory polled every {watch.interval_s} s; cap {cap_bytes} bytes")
