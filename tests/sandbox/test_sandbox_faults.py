"""Attacks on the machine from inside a worker: each is refused by a sandbox layer or ended by a limit, the verdict
is typed, and the judge carries on. A test is skipped where a layer it relies on is not in force here (`kerneljudge
env` lists them). The probes print "PROBE ..." lines to the candidate's stdout; two are also run unconfined, to show
they would have seen what the sandbox hides.
"""

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from helpers import CANDIDATES, answered, probes, run_judge
from kerneljudge.sandbox import confine, probe


@pytest.fixture(scope="module")
def layers():
    return probe.probe_layers()


def need(layers, *names):
    missing = [f"{n} ({layers[n].detail})" for n in names if layers[n].status != "in_force"]
    if missing:
        pytest.skip("sandbox layers not in force here: " + "; ".join(missing))


def test_fork_bomb_is_capped_killed_and_the_judge_carries_on(tiny_task, layers):
    need(layers, "pid_namespace", "unprivileged_user", "resource_limits")
    started = time.monotonic()
    record = run_judge(tiny_task, CANDIDATES / "fork_bomb.py", timeout_s=5.0)
    assert record.status == "FAIL" and record.failure.kind == "timeout", record.failure
    assert time.monotonic() - started < 60
    # The bomb shared the process cap of the worker uid: had a process survived, the next workers could not start.
    assert run_judge(tiny_task, CANDIDATES / "honest_torch.py").status == "PASS"


def test_thousands_of_threads_are_refused(tiny_task, layers):
    need(layers, "unprivileged_user", "resource_limits")
    record = run_judge(tiny_task, CANDIDATES / "thread_storm.py")
    assert record.status == "FAIL" and record.failure.kind == "runtime_error", record.failure
    assert "PROBE threads: denied after" in record.failure.summary


def test_host_memory_runs_into_the_address_space_cap(tiny_task, layers, monkeypatch):
    # 64 GiB (the default, which CUDA needs) is more than CI machines have; a small cap shows the mechanism.
    need(layers, "resource_limits")
    monkeypatch.setattr(confine, "DEFAULT_POLICY", confine.SandboxPolicy(address_space_bytes=2 * 1024**3))
    record = run_judge(tiny_task, CANDIDATES / "host_memory_hog.py")
    assert record.status == "FAIL" and record.failure.kind == "runtime_error", record.failure
    assert "PROBE memory: denied after" in record.failure.summary


def test_sleeping_forever_is_killed_at_the_time_limit(tiny_task):
    started = time.monotonic()
    record = run_judge(tiny_task, CANDIDATES / "sleep_forever.py", timeout_s=3.0)
    assert record.status == "FAIL" and record.failure.kind == "timeout", record.failure
    assert time.monotonic() - started < 60


def test_deleting_its_workspace_harms_nobody_else(tiny_task, layers):
    need(layers, "private_tmp")
    record = run_judge(tiny_task, CANDIDATES / "delete_workspace.py")
    assert answered(record), (record.status, record.failure)
    assert probes(record, "own workspace: 0 entries left") and probes(record, "other workspaces seen: 0")
    assert not probes(record, "DELETED")


@pytest.fixture
def listener():
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_network_is_unreachable(tiny_task, layers, listener):
    need(layers, "network_namespace")
    record = run_judge(tiny_task, CANDIDATES / "network_connect.py")
    assert answered(record), (record.status, record.failure)
    assert probes(record, "denied") and not probes(record, "CONNECTED")


def test_unconfined_the_network_probe_reaches_the_judge_host(tiny_task, listener):
    record = run_judge(tiny_task, CANDIDATES / "network_connect.py", sandbox="off")
    assert probes(record, f"('127.0.0.1', {listener}): CONNECTED")


@pytest.fixture
def secrets():
    """A world-readable file in the judge's temp folder and one in its home, as state a worker must not see."""
    token = uuid.uuid4().hex
    paths = [Path("/tmp") / f"kerneljudge-test-secret-{token}", Path.home() / f"kerneljudge-test-secret-{token}"]
    for path in paths:
        path.write_text(token)
        path.chmod(0o644)
    yield paths
    for path in paths:
        path.unlink(missing_ok=True)


def test_files_outside_the_workspace_are_out_of_reach(tiny_task, layers, secrets):
    need(layers, "mount_namespace", "hidden_state", "private_tmp", "pid_namespace", "unprivileged_user")
    record = run_judge(tiny_task, CANDIDATES / "read_outside.py")
    assert answered(record), (record.status, record.failure)
    # Above the worker there is only the launcher, whose command line (the mount plan) anyone may read.
    seen = [line for line in probes(record, "READ") if "kerneljudge.sandbox.enter" not in line]
    assert probes(record, "denied") and not seen, seen


def test_unconfined_the_read_probe_finds_the_judges_files(tiny_task, secrets):
    record = run_judge(tiny_task, CANDIDATES / "read_outside.py", sandbox="off")
    assert probes(record, "pyproject.toml: READ") and probes(record, f"{secrets[0]}: READ")


def test_the_judge_cannot_be_signalled(tiny_task, layers):
    need(layers, "pid_namespace", "unprivileged_user")
    record = run_judge(tiny_task, CANDIDATES / "signal_judge.py")
    assert answered(record), (record.status, record.failure)
    assert probes(record, "(parent): denied") and not probes(record, "SENT")
    assert os.getpid() not in [int(line.split()[2]) for line in probes(record, "kill")]


def test_installed_packages_are_read_only(tiny_task, layers):
    need(layers, "read_only_root")
    record = run_judge(tiny_task, CANDIDATES / "write_site_packages.py")
    assert answered(record), (record.status, record.failure)
    assert probes(record, "torch/_planted") and probes(record, "kerneljudge/_planted")
    assert not probes(record, "WROTE")


def test_kernel_calls_a_worker_has_no_use_for_are_refused(tiny_task, layers):
    need(layers, "seccomp")
    record = run_judge(tiny_task, CANDIDATES / "escape_syscalls.py")
    assert answered(record), (record.status, record.failure)
    assert probes(record, "ptrace: denied") and probes(record, "unshare_user: denied"), record.logs["candidate"]
    assert not probes(record, "ALLOWED")


def test_unconfined_the_kernel_lets_the_worker_trace_itself(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "escape_syscalls.py", sandbox="off")
    assert probes(record, "ptrace: ALLOWED") and answered(record), (record.status, record.failure)


def test_the_record_lists_the_layers_around_every_worker(tiny_task, layers):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", timing=True, timing_blocks=2, timing_samples=5)
    assert record.status == "PASS", record.failure
    for name in ("candidate", "reference", "candidate_timing", "reference_timing"):
        recorded = record.logs[name].sandbox_layers
        assert list(recorded) == list(confine.LAYERS)
        assert {n: v["status"] for n, v in recorded.items()} == {n: v.status for n, v in layers.items()}
    capability = record.capabilities["os_sandbox"]
    counted = [n for n in confine.LAYERS if n not in confine.DEFAULT_POLICY.optional_layers]
    expected = "available" if all(layers[n].status != "missing" for n in counted) else "unavailable"
    assert capability.status == expected and not capability.required, capability
    off = run_judge(tiny_task, CANDIDATES / "honest_torch.py", sandbox="off")
    assert off.capabilities["os_sandbox"].status == "unavailable"
    applied = {n for n, v in off.logs["candidate"].sandbox_layers.items() if v["status"] != "missing"}
    assert applied <= {"gpu_memory_cap"}  # the parent's watcher: not applicable on the CPU


def test_a_mixed_batch_of_honest_and_fault_candidates_gets_every_honest_verdict_right(tiny_task):
    batch = [
        ("honest_torch.py", "PASS"),
        ("segfault.py", "crash"),
        ("fork_bomb.py", "timeout"),
        ("honest_torch.py", "PASS"),
        ("thread_storm.py", "runtime_error"),
        ("abort.py", "crash"),
        ("sleep_forever.py", "timeout"),
        ("honest_torch.py", "PASS"),
    ]
    outcomes = []
    for fixture, expected in batch:
        record = run_judge(tiny_task, CANDIDATES / fixture, timeout_s=5.0)
        outcomes.append((fixture, record.status if expected == "PASS" else record.failure and record.failure.kind))
    assert outcomes == batch
