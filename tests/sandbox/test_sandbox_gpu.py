"""The sandbox on a CUDA machine: CUDA works inside every layer, and the GPU memory cap kills a worker over it."""

import pytest

from helpers import CANDIDATES, answered, probes, run_judge
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess

pytestmark = pytest.mark.gpu


def test_cuda_works_inside_every_layer():
    worker = WorkerProcess("reference", "cuda", "", WorkerLimits(step_timeout_s=300))
    try:
        hello = worker.receive()
    finally:
        worker.close()
    assert hello["cuda_available"], hello
    missing = {n: layer for n, layer in worker.sandbox_layers.items() if layer["status"] == "missing"}
    assert set(missing) <= {"seccomp"}, missing


def test_an_honest_candidate_is_timed_inside_the_sandbox(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", device="cuda", timing=True)
    assert record.status == "PASS", record.failure
    assert record.timing.measured and record.timing.launch_regime == "cuda_graph", record.timing
    assert record.capabilities["os_sandbox"].status == "available", record.capabilities["os_sandbox"]
    for name in ("candidate", "reference", "candidate_timing", "reference_timing"):
        missing = [n for n, v in record.logs[name].sandbox_layers.items() if v["status"] == "missing"]
        assert set(missing) <= confine.DEFAULT_POLICY.optional_layers, (name, missing)


@pytest.mark.parametrize(
    ("fixture", "denied", "escaped"),
    [
        ("read_outside.py", "denied", "pyproject.toml: READ"),
        ("write_site_packages.py", "torch/_planted", "WROTE"),
        ("network_connect.py", "denied", "CONNECTED"),
        ("escape_syscalls.py", "ptrace: denied", "ALLOWED"),
    ],
)
def test_a_cuda_worker_is_held_by_the_same_layers(tiny_task, fixture, denied, escaped):
    record = run_judge(tiny_task, CANDIDATES / fixture, device="cuda")
    assert record.device == "cuda" and answered(record), (record.status, record.failure)
    assert probes(record, denied) and not probes(record, escaped), record.logs["candidate"].stdout_tail


def test_the_gpu_memory_cap_kills_a_worker_over_it(tiny_task, monkeypatch):
    monkeypatch.setattr(confine, "DEFAULT_POLICY", confine.SandboxPolicy(gpu_memory_bytes=2 * 1024**3))
    record = run_judge(tiny_task, CANDIDATES / "gpu_memory_hog.py", device="cuda")
    assert record.status == "FAIL" and record.failure.kind == "crash", record.failure
    assert "GPU memory" in record.failure.summary
    again = run_judge(tiny_task, CANDIDATES / "honest_torch.py", device="cuda")
    assert again.status == "PASS", again.failure
