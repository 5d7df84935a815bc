"""The GPU's busy share over a stretch of wall time, as NVML reports it: a thread reads each visible GPU's
utilization (the share of the last sampling period in which at least one kernel ran, NVML's
`nvmlDeviceGetUtilizationRates().gpu`) every `interval_s`, and the mean of the readings is the busy share.
Used by batch_throughput.py for lane scaling (docs/batch.md): lanes pay off while the GPU has idle time
left to fill.

    with BusySampler() as busy:
        ...  # the work
    busy.percent()  # None where NVML is not there (a machine without a GPU, pynvml not installed)
"""

from __future__ import annotations

import statistics
import threading
from typing import Any


class BusySampler:
    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.readings: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handles: list[Any] = []

    def __enter__(self) -> BusySampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # no NVML here: the share is not measured, and the answer says why
            self.error = f"{type(exc).__name__}: {exc}"[:200]
            return self
        self._thread = threading.Thread(target=self._sample, name="gpu-busy", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                for handle in self._handles:  # the mean over the GPUs of each reading
                    self.readings.append(float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"[:200]
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._nvml is not None:
            self._nvml.nvmlShutdown()

    def percent(self) -> float | None:
        """The mean utilization read, in percent; None where nothing was read."""
        return round(statistics.fmean(self.readings), 1) if self.readings else None
