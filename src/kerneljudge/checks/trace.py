"""Kernel traces of candidate calls, read in the parent. Pure: events in, a summary and findings out.

A traced call arrives as the profiler events the worker kept (kerneljudge.worker.trace):
named host ranges (`kj::marker`, `kj::call`, `kj::sync`, `kj::evidence`), the
runtime/driver launches, and the device activities (kernels, copies, memsets),
linked by correlation id. A device activity is the candidate's when it was
launched between the start of the call and the end of the wait for its stream;
the marker kernel names the stream the call ran on; the judge's own evidence
work comes after. From that:

- escape (KJ-R024): a candidate kernel on another stream still running when a
  marker the worker put on the call's stream after the call returned (`kj::tail`)
  ran: the call's stream never waited for it, however short it was; or any
  candidate kernel still running after the call returned and its stream was
  synchronised;
- a moved stream (KJ-R028): the worker queues its tail marker on the stream the
  call was made on; a tail that ran on another stream than the marker before the
  call says the call's stream was not the worker's when it returned. The escape
  check above is made against the tail wherever it ran, never skipped;
- work attribution by origin (checks/kernel_names.py): device time of the
  declared kernels (the candidate's own Triton or CUDA kernels, never one in
  torch's namespaces), of data movement (memcpy and memset activities, and
  torch's own copy and fill kernels, which no declared name and no source that
  defines names in torch's namespaces can claim) and of every other kernel
  (torch and library compute). Under the strict policy a declared kernel must
  run (KJ-R040) and other compute is a violation (KJ-R041); under the practical
  policy both are recorded as info;
- CUDA graph replays (KJ-R025, info: replays are checked like every call);
- after timing, the timed calls against the traced ones: a timed call that took a small fraction
  of the device time the traced calls' kernels took did not do that work while timed (an output
  cache, a skip once timing starts: KJ-R051).

The events come from the candidate's process. A missing or malformed trace is
never read as clean: the caller marks the profiler_trace capability unavailable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kerneljudge.checks.catalog import finding, severity
from kerneljudge.checks.kernel_names import TORCH_MOVEMENT, identifiers, in_torch, kernel_base, qualified_name
from kerneljudge.results.verdict import Finding

# Host and device timestamps come from one profiler clock; this much misalignment is tolerated (µs).
CLOCK_SLACK_US = 50.0
# Two device activities' timestamps come from the GPU's own clock: only its rounding is tolerated (µs).
DEVICE_SLACK_US = 1.0
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
TOP_KERNELS = 40
# A timed call under a quarter of the traced calls' device time, by more than 2 us, is flagged. An honest
# call may be faster when timed (a warm L2 within a sample: 8.5 against 11.95 us for a 16 MiB op on an
# H200, docs/gpu-machine.md), not four times faster.
TIMED_FRACTION_FLOOR = 0.25
TIMED_GAP_FLOOR_US = 2.0


class MalformedTrace(ValueError):
    """The trace cannot be read: missing ranges, wrong types."""


__all__ = ["MalformedTrace", "analyse", "kernel_base", "read_call", "timed_versus_traced", "unjoined_capture"]


def is_declared(name: str, declared: set[str]) -> bool:
    """A kernel of the candidate's own: its bare name is declared and its function is not in torch's namespaces."""
    components = qualified_name(name)
    return bool(components) and components[-1] in declared and not in_torch(components)


@dataclass
class Activity:
    category: str
    name: str
    start: float
    end: float
    stream: Any
    correlation: Any


@dataclass
class CallTrace:
    """One traced call, attributed."""

    position: str
    candidate: list[Activity] = field(default_factory=list)
    current_stream: Any = None
    tail_start: float | None = None  # when the marker the worker put on the call's stream after it returned ran
    tail_stream: Any = None  # the stream that marker ran on: the marker's before the call, unless the stream moved
    return_us: float = 0.0
    graph_launches: int = 0


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedTrace(f"{what} is not a number")
    return float(value)


def read_call(report: Any, position: str) -> CallTrace:
    """Attribute one call's events; raises MalformedTrace when the report is missing or inconsistent."""
    if not isinstance(report, dict):
        raise MalformedTrace("no trace was sent")
    if "error" in report:
        raise MalformedTrace(str(report["error"])[:500])
    events = report.get("events")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise MalformedTrace("the events are not a list of objects")
    ranges: dict[str, tuple[float, float]] = {}
    launches: dict[Any, tuple[str, float]] = {}
    activities: list[Activity] = []
    for event in events:
        category, name = event.get("cat"), str(event.get("name", ""))
        start = _number(event.get("ts"), f"the start of {name!r}")
        duration = _number(event.get("dur"), f"the duration of {name!r}")
        if duration < 0:
            raise MalformedTrace(f"{name!r} has a negative duration")
        if category == "user_annotation":
            ranges[name.removeprefix("kj::")] = (start, start + duration)
        elif category in LAUNCH_CATEGORIES:
            if event.get("correlation") is not None:
                launches[event["correlation"]] = (name, start)
        elif category in DEVICE_CATEGORIES:
            activities.append(
                Activity(category, name, start, start + duration, event.get("stream"), event.get("correlation"))
            )
    if "call" not in ranges or "sync" not in ranges:
        raise MalformedTrace("the call's ranges are missing from the trace")
    window = (ranges["call"][0], ranges["sync"][1])
    traced = CallTrace(position=position, return_us=ranges["sync"][1])

    def launched_in(span: tuple[float, float], activity: Activity) -> bool:
        launch = launches.get(activity.correlation)
        moment = launch[1] if launch is not None else activity.start
        return span[0] <= moment <= span[1]

    if "marker" in ranges:
        marker = next((a for a in activities if a.category == "kernel" and launched_in(ranges["marker"], a)), None)
        traced.current_stream = marker.stream if marker is not None else None
    tail = None
    if "tail" in ranges:
        tail = next((a for a in activities if a.category == "kernel" and launched_in(ranges["tail"], a)), None)
        if tail is not None:
            # Queued on the stream the call was made on; judged wherever it ran (a call that moves the current
            # stream must not be able to move the tail out of the check).
            traced.tail_start, traced.tail_stream = tail.start, tail.stream
    traced.candidate = [a for a in activities if launched_in(window, a) and a is not tail]
    traced.graph_launches = sum(
        1 for name, moment in launches.values() if "GraphLaunch" in name and window[0] <= moment <= window[1]
    )
    return traced


# CUDA's cudaErrorStreamCaptureUnjoined, as a failed capture of the candidate's calls reports it.
UNJOINED_CAPTURE = re.compile(r"unjoined", re.IGNORECASE)


def unjoined_capture(message: str) -> Finding | None:
    """KJ-R024 from a CUDA graph capture of the candidate's calls that failed because the capturing stream had
    unjoined work: the call forked work onto another stream and returned without making its own stream wait
    for it. The capture sees the missing join itself, however short the work, where the trace and the
    re-read see only work that happens to outlive the call (an H200, judge 0.1.0: a 70 us Triton softmax on a
    side stream passed both, then read as 0.3 us when timed without graphs)."""
    if not UNJOINED_CAPTURE.search(message):
        return None
    return finding(
        "KJ-R024",
        "error",
        "the call left work on another stream that its own stream never waited for (the CUDA graph capture of "
        "its calls failed: capturing stream has unjoined work)",
        {"source": "graph_capture", "message": message[:500]},
    )


def kind_of(activity: Activity, declared: set[str], movement_by_name: bool = True) -> str:
    """ "declared" (the candidate's own kernel), "movement" (a memcpy or memset activity, or torch's own copy or fill
    kernel) or "other". `movement_by_name` False (the source defines names in torch's namespaces): no kernel is
    movement, whatever its name."""
    if activity.category != "kernel":
        return "movement"
    components = qualified_name(activity.name)
    torch_own = in_torch(components)
    if components and components[-1] in declared and not torch_own:
        return "declared"
    if (
        movement_by_name
        and torch_own
        and TORCH_MOVEMENT.search(activity.name)
        and not identifiers(activity.name) & declared
    ):
        return "movement"
    return "other"


def analyse(
    calls: list[CallTrace], declared: set[str], policy: str, movement_by_name: bool = True
) -> tuple[dict[str, Any], list[Finding]]:
    """Summarise traced calls and judge them; `declared` holds the kernel names the source defines;
    `movement_by_name` False where the source defines names in torch's namespaces (kernel_names.py)."""
    per_kernel: dict[tuple[str, str], dict[str, Any]] = {}
    device_us = {"declared": 0.0, "movement": 0.0, "other": 0.0}
    escaped: list[dict[str, Any]] = []
    side_streams: set[str] = set()
    moved: list[dict[str, Any]] = []
    for call in calls:
        if call.tail_start is not None and call.current_stream is not None and call.tail_stream != call.current_stream:
            moved.append({"call": call.position, "before": str(call.current_stream), "tail": str(call.tail_stream)})
        for activity in call.candidate:
            kind = kind_of(activity, declared, movement_by_name)
            duration = activity.end - activity.start
            device_us[kind] += duration
            entry = per_kernel.setdefault(
                (activity.name, kind), {"name": activity.name, "kind": kind, "launches": 0, "device_us": 0.0}
            )
            entry["launches"] += 1
            entry["device_us"] += duration
            side = call.current_stream is not None and activity.stream != call.current_stream
            if side:
                side_streams.add(str(activity.stream))
            late = activity.end - call.return_us
            if late > CLOCK_SLACK_US:
                escaped.append({"call": call.position, "name": activity.name, "ended_after_return_us": round(late, 1)})
            elif side and call.tail_start is not None and activity.end - call.tail_start > DEVICE_SLACK_US:
                # The call's stream ran past its end while this work still ran: it never waited for it.
                unjoined = round(activity.end - call.tail_start, 1)
                escaped.append({"call": call.position, "name": activity.name, "ended_after_tail_us": unjoined})
    compute = device_us["declared"] + device_us["other"]
    kernels = sorted(per_kernel.values(), key=lambda k: -k["device_us"])
    summary: dict[str, Any] = {
        "calls_traced": [c.position for c in calls],
        "declared_kernels": sorted(declared),
        "device_us": {k: round(v, 3) for k, v in device_us.items()},
        "declared_share": round(device_us["declared"] / compute, 4) if compute > 0 else None,
        "kernels": [{**k, "device_us": round(k["device_us"], 3)} for k in kernels[:TOP_KERNELS]],
        "kernel_names_total": len(kernels),
        "side_streams": sorted(side_streams),
        "graph_launches": sum(c.graph_launches for c in calls),
        "escaped": escaped[:50],
        "streams_moved": moved[:20],
        "movement_by_name": movement_by_name,
    }
    found: list[Finding] = []
    if moved:
        found.append(
            finding(
                "KJ-R028",
                "error",
                f"{len(moved)} traced call(s) left another stream current than the one they were called on (the "
                "worker's marker after the call ran on another stream than its marker before)",
                {"source": "kernel_trace", "calls": moved[:20]},
            )
        )
    if escaped:
        found.append(
            finding(
                "KJ-R024",
                "error",
                f"{len(escaped)} kernel(s) the call launched were never waited for by its stream: still running "
                "after the call's stream had run past its end, or after the call returned and its stream was "
                "synchronised",
                {"source": "kernel_trace", "escaped": escaped[:20]},
            )
        )
    ran = {k["name"] for k in kernels if k["kind"] == "declared"}
    if declared and not ran:
        found.append(
            finding(
                "KJ-R040",
                severity("KJ-R040", policy),
                f"none of the declared kernels ({', '.join(sorted(declared)[:8])}) ran in the traced calls",
                {"declared": sorted(declared), "kernels_seen": [k["name"] for k in kernels[:10]]},
            )
        )
    if device_us["other"] > 0:
        bulk = device_us["other"] >= device_us["declared"]
        found.append(
            finding(
                "KJ-R041",
                severity("KJ-R041", policy, case="bulk" if bulk else "share"),
                f"kernels other than the declared ones did {device_us['other'] / compute:.0%} of the compute time"
                + (" (the bulk of the work)" if bulk else ""),
                {
                    "other_kernels": [k["name"] for k in kernels if k["kind"] == "other"][:10],
                    "device_us": summary["device_us"],
                },
            )
        )
    if summary["graph_launches"]:
        found.append(
            finding(
                "KJ-R025",
                "info",
                f"{summary['graph_launches']} CUDA graph launch(es) in the traced calls",
                {"graph_launches": summary["graph_launches"]},
            )
        )
    return summary, found


def timed_versus_traced(
    summary: dict[str, Any] | None, timed_ms_per_call: float | None
) -> tuple[dict[str, Any] | None, list[Finding]]:
    """Set the timed calls' device time per call against the traced calls' kernels (same shapes, same device)."""
    calls = len((summary or {}).get("calls_traced") or [])
    if summary is None or not calls or timed_ms_per_call is None:
        return None, []
    traced_us = sum(summary.get("device_us", {}).values()) / calls
    timed_us = timed_ms_per_call * 1e3
    evidence = {
        "traced_device_us_per_call": round(traced_us, 3),
        "timed_us_per_call": round(timed_us, 3),
        "timed_fraction": round(timed_us / traced_us, 4) if traced_us > 0 else None,
    }
    if timed_us < TIMED_FRACTION_FLOOR * traced_us and traced_us - timed_us > TIMED_GAP_FLOOR_US:
        summary_text = (
            f"a timed call took {timed_us:.3g} us of device time where the traced calls' kernels took "
            f"{traced_us:.3g} us: the timed calls did not do the traced work"
        )
        return evidence, [finding("KJ-R051", "warning", summary_text, evidence)]
    return evidence, []
