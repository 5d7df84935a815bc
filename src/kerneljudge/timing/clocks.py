"""The GPU's clocks around timing blocks, read in the parent through NVML (pynvml).

A block timed while the clocks were held down (power cap, thermal slowdown, power brake) is not a
measurement of the kernels: it is flagged and left out of the estimate. NVML is read in the parent,
which the candidate cannot touch; where it is missing (no driver, a CPU machine) the record says the
clocks were not monitored. What the record keeps of the readings (`timing.clocks`) is `clock_summary`.
"""

from __future__ import annotations

from typing import Any, Protocol

# nvmlClocksEventReasons bits that mean the clocks were slowed for reasons other than idleness or settings.
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake",
}


class ClockMonitor(Protocol):
    """Reads the device's clock state; `throttled` names what slowed the clocks between two readings."""

    name: str

    def snapshot(self) -> dict[str, Any]: ...

    def throttled(self, before: dict[str, Any], after: dict[str, Any]) -> list[str]: ...


class NvmlClockMonitor:
    """Clock state of one GPU: the current slowdown reasons, the SM clock and NVML's violation counters."""

    name = "nvml"

    def __init__(self, pynvml: Any, handle: Any) -> None:
        self.nvml = pynvml
        self.handle = handle

    @classmethod
    def open(cls, uuid: str | None) -> tuple[NvmlClockMonitor | None, str | None]:
        """The monitor of the GPU with this UUID (the only GPU when no UUID is known), or why there is none."""
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # no NVML library or driver: timing goes on unmonitored
            return None, f"NVML unavailable: {type(exc).__name__}: {exc}"
        want = _bare_uuid(uuid)
        for handle in handles:
            if want and _bare_uuid(pynvml.nvmlDeviceGetUUID(handle)) == want:
                return cls(pynvml, handle), None
        if not want and len(handles) == 1:
            return cls(pynvml, handles[0]), None
        return None, f"no NVML device matches the worker's GPU ({uuid or 'UUID unknown'}, {len(handles)} devices)"

    def snapshot(self) -> dict[str, Any]:
        nvml, h = self.nvml, self.handle

        def violation(policy: int) -> int:
            return nvml.nvmlDeviceGetViolationStatus(h, policy).violationTime

        reading: dict[str, Any] = {}
        for key, read in (
            ("reasons", lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h)),
            ("sm_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
            ("power_violation_ns", lambda: violation(nvml.NVML_PERF_POLICY_POWER)),
            ("thermal_violation_ns", lambda: violation(nvml.NVML_PERF_POLICY_THERMAL)),
        ):
            try:
                reading[key] = int(read())
            except Exception:  # a query this GPU does not support stays absent
                pass
        return reading

    def throttled(self, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
        return throttle_reasons(before, after)


def throttle_reasons(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What held the clocks down between two snapshots: reason bits seen at either end, counters that grew."""
    bits = int(before.get("reasons", 0)) | int(after.get("reasons", 0))
    found = [name for bit, name in THROTTLE_BITS.items() if bits & bit]
    for counter in ("power_violation_ns", "thermal_violation_ns"):
        if counter in before and counter in after and after[counter] > before[counter]:
            found.append(counter.removesuffix("_ns"))
    return found


def _bare_uuid(uuid: Any) -> str:
    text = str(uuid or "").strip().lower()
    return text.removeprefix("gpu-")


def clock_summary(
    monitor: ClockMonitor | None,
    snapshots: list[dict[str, Any]],
    throttled: list[int],
    reasons: set[str],
    dropped: bool,
) -> dict[str, Any]:
    if monitor is None:
        return {"monitor": None}
    sm = [s["sm_mhz"] for s in snapshots if isinstance(s.get("sm_mhz"), (int, float))]
    return {
        "monitor": monitor.name,
        "sm_mhz_min": min(sm, default=None),
        "sm_mhz_max": max(sm, default=None),
        "throttled_blocks": throttled,
        "reasons": sorted(reasons),
        # Throttled blocks are left out of the estimate, unless every block was throttled.
        "throttled_dropped": dropped,
    }
