"""benchmarks/gpu_busy.py: the GPU's busy share from NVML's utilization readings, and no figure without NVML."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gpu_busy import BusySampler  # noqa: E402


def fake_nvml(readings: list[int]) -> types.ModuleType:
    """A pynvml whose one GPU answers `readings` in turn, then the last one."""
    module = types.ModuleType("pynvml")
    left = list(readings)
    module.shut = False

    def utilization(handle):
        value = left.pop(0) if len(left) > 1 else left[0]
        return types.SimpleNamespace(gpu=value, memory=0)

    module.nvmlInit = lambda: None
    module.nvmlShutdown = lambda: setattr(module, "shut", True)
    module.nvmlDeviceGetCount = lambda: 1
    module.nvmlDeviceGetHandleByIndex = lambda index: object()
    module.nvmlDeviceGetUtilizationRates = utilization
    return module


def test_the_busy_share_is_the_mean_of_the_readings(monkeypatch):
    nvml = fake_nvml([100, 0, 50, 50])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with BusySampler(interval_s=0.01) as busy:
        deadline = time.monotonic() + 5
        while len(busy.readings) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    first = busy.readings[:4]
    assert first == [100.0, 0.0, 50.0, 50.0] and busy.error is None
    assert 0 < busy.percent() <= 100 and nvml.shut


def test_without_nvml_there_is_no_figure_and_the_reason_is_kept(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with BusySampler(interval_s=0.01) as busy:
        time.sleep(0.05)
    assert busy.percent() is None and "pynvml" in busy.error
