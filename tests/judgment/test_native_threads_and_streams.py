"""Native threads (KJ-R012) and the current stream around every call (KJ-R028): the worker's observations on the
CPU, the parent's reading of them, and judgments of candidates that start native threads (audit mode: enforce's
preflight refuses ctypes and _thread before they run)."""

import ctypes
import threading
import time

import pytest
from test_runtime_evidence import CLEAN, codes

from helpers import run_judge
from kerneljudge.checks.runtime import busy_after_return, call_findings, stream_left, timed_findings
from kerneljudge.worker import evidence

LIBC = ctypes.CDLL(None, use_errno=True)


def pthread_create(start) -> int:
    """A native thread begun by libc: no Python thread state, nothing in threading.enumerate()."""
    handle = ctypes.c_ulong()
    assert LIBC.pthread_create(ctypes.byref(handle), None, start, None) == 0
    return handle.value


def test_the_per_thread_cpu_clock_reads_this_process_threads():
    me = threading.get_native_id()
    assert me in evidence.native_thread_ids()
    first = evidence.thread_cpu_s(me)
    sum(range(200_000))
    assert first is not None and evidence.thread_cpu_s(me) > first
    assert evidence.thread_cpu_s(2**22 + 12345) is None  # no such thread


def test_a_thread_native_code_started_is_counted_and_a_python_one_is_left_to_kj_r010():
    before = evidence.native_thread_ids()
    pthread_create(ctypes.cast(LIBC.pause, ctypes.c_void_p))  # sleeps forever in libc: burns nothing
    python = threading.Thread(target=time.sleep, args=(0.5,), daemon=True)
    python.start()
    time.sleep(0.05)
    added = evidence.native_threads_added(before)
    assert len(added) == 1 and added[0]  # the libc thread, by its name; the Python thread is not among them


def test_a_thread_that_spins_after_the_call_returned_is_measured_and_the_caller_is_not():
    stop = threading.Event()
    go = threading.Event()

    def spin():
        go.wait()
        while not stop.is_set():
            sum(range(1000))

    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    clocks = evidence.ThreadClocks()  # the call returned: from here on
    go.set()
    sum(range(300_000))  # the caller's own work is never counted
    time.sleep(0.05)
    busy = clocks.busy()
    stop.set()
    worker.join()
    assert busy["window_ms"] >= 50 and busy["threads"], busy
    assert busy["threads"][0]["cpu_ms"] >= 10
    assert [f.code for f in busy_after_return(busy, "trial 1")] == ["KJ-R012"]
    quiet = evidence.ThreadClocks()
    time.sleep(0.02)
    assert busy_after_return(quiet.busy(), "trial 1") == []


def test_cpu_after_return_is_judged_against_a_floor_and_a_share_of_the_window():
    spin = {"name": "python", "cpu_ms": 18.0, "new": True}
    [found] = busy_after_return({"window_ms": 24.0, "threads": [spin]}, "hidden 3")
    assert (found.code, found.severity) == ("KJ-R012", "error") and found.evidence["threads"][0]["cpu_ms"] == 18.0
    spin_down = {"name": "pt_main_thread", "cpu_ms": 0.8, "new": False}  # an OpenMP thread's spin after a region
    assert busy_after_return({"window_ms": 24.0, "threads": [spin_down]}, "hidden 3") == []
    long_window = {"window_ms": 400.0, "threads": [{"name": "x", "cpu_ms": 60.0}]}  # under a quarter of 400 ms
    assert busy_after_return(long_window, "hidden 3") == []
    assert busy_after_return(None, "hidden 3") == [] and busy_after_return({"threads": "x"}, "hidden 3") == []


def test_native_threads_are_a_warning_and_named_service_threads_are_recorded():
    [found] = call_findings({**CLEAN, "native_threads": ["python3"]}, {}, "trial 0")
    assert (found.code, found.severity) == ("KJ-R012", "warning")
    [service] = call_findings({**CLEAN, "native_threads": ["llvm-worker-0", "cuda-EvtHandlr"]}, {}, "trial 0")
    assert (service.code, service.severity) == ("KJ-R012", "info")
    missing = {k: v for k, v in CLEAN.items() if k != "busy_after_return"}
    assert [f.code for f in call_findings(missing, {}, "trial 0")] == ["KJ-R030"]


def test_a_call_that_leaves_another_stream_current_is_an_error_in_calls_and_timed_requests():
    left = {"before": {"id": 0, "device": "cuda:0"}, "after": {"id": 35, "device": "cuda:0"}}
    [found] = call_findings({**CLEAN, "streams": left}, {}, "hidden 2")
    assert (found.code, found.severity) == ("KJ-R028", "error") and found.evidence["after"]["id"] == 35
    other_device = {"before": {"id": 0, "device": "cuda:0"}, "after": {"id": 0, "device": "cuda:1"}}
    assert [f.code for f in stream_left(other_device, "t")] == ["KJ-R028"]
    assert stream_left({"before": None, "after": None}, "t") == []  # the CPU has no streams
    clean = {k: CLEAN[k] for k in ("threads_started", "native_threads", "children", "flags_changed", "hooks")}
    timed = {**clean, "apis_replaced": [], "streams": left}
    assert [f.code for f in timed_findings(timed)] == ["KJ-R028"]


def test_the_stream_watch_restores_the_stream_the_call_was_made_on(monkeypatch):
    """On CUDA the worker reads the current stream before and after the call and makes the first current again;
    here the CUDA calls are stood in for."""

    class Stream:
        def __init__(self, stream_id):
            self.stream_id, self.device = stream_id, "cuda:0"

    current = [Stream(0)]
    monkeypatch.setattr(evidence, "stream_now", lambda device: current[0])
    monkeypatch.setattr(evidence, "_set_stream", lambda s: current.__setitem__(0, s))
    watch = evidence.StreamWatch("cuda")
    current[0] = Stream(35)  # the call: torch.cuda.set_stream(side), left set
    watch.returned()
    assert watch.record() == {"before": {"id": 0, "device": "cuda:0"}, "after": {"id": 35, "device": "cuda:0"}}
    assert current[0].stream_id == 0
    honest = evidence.StreamWatch("cuda")
    honest.returned()
    assert honest.record()["before"] == honest.record()["after"]


IMPORT_THREAD = """
import ctypes
import torch

_libc = ctypes.CDLL(None)
_handle = ctypes.c_ulong()
_libc.pthread_create(ctypes.byref(_handle), None, ctypes.cast(_libc.pause, ctypes.c_void_p), None)


class ModelNew(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.relu(x + self.bias)
"""

SPIN_AFTER_RETURN = """
import ctypes
import time
import torch

_SPIN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_state = {"started": False, "returned_at": 0.0}


def _spin(_):
    while True:  # idle while a call runs; busy for a while once it has returned
        if time.monotonic() - _state["returned_at"] < 0.2:
            sum(range(2000))
        else:
            time.sleep(0.001)


_callback = _SPIN(_spin)


class ModelNew(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x):
        if not _state["started"]:
            _state["started"] = True
            handle = ctypes.c_ulong()
            ctypes.CDLL(None).pthread_create(ctypes.byref(handle), None, _callback, None)
        out = torch.relu(x + self.bias)
        _state["returned_at"] = time.monotonic()
        return out
"""


@pytest.mark.parametrize(
    ("source", "code", "severity"),
    [(IMPORT_THREAD, "KJ-R012", "warning"), (SPIN_AFTER_RETURN, "KJ-R012", "error")],
    ids=["native_thread_at_import", "native_thread_spins_after_return"],
)
def test_a_candidate_that_starts_a_native_thread_is_not_verified(tiny_task, tmp_path, source, code, severity):
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source)
    record = run_judge(tiny_task, candidate, mode="audit")
    assert codes(record).get(code) == severity and not record.verified, (record.failure, codes(record))
