"""The judge's bytecode cache: used only where the installed torch carries no bytecode, filled by a trusted
interpreter, handed to confined workers, which read it and cannot write it (sandbox/bytecode.py)."""

import importlib.util
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from kerneljudge import protocol
from kerneljudge.sandbox import bytecode
from kerneljudge.sandbox.confine import DEFAULT_POLICY, SandboxPolicy
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels

PACKAGE_ROOT = Path(bytecode.__file__).resolve().parents[2]

# A task whose import tries to write into the cache it was handed, and says what happened.
WRITER = """import os, torch
try:
    with open(os.path.join(os.environ["PYTHONPYCACHEPREFIX"], "planted.pyc"), "wb") as f:
        f.write(b"x")
    print("WROTE")
except OSError as exc:
    print("REFUSED", exc.strerror)
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return [torch.ones(2)]
def get_init_inputs():
    return []
"""


@pytest.fixture
def no_installed_bytecode(monkeypatch):
    """This machine's torch as if it carried no bytecode, with a cache of the test's own where workers of
    other users can reach it (pytest's own temporary folders are its user's alone)."""
    monkeypatch.setattr(bytecode, "torch_bytecode_installed", lambda: False)
    folder = Path(tempfile.mkdtemp(prefix="kj-bytecode-test-"))
    folder.chmod(0o755)
    monkeypatch.setenv(bytecode.CACHE_ENV, str(folder / "bytecode"))
    bytecode.prepared.cache_clear()
    yield folder / "bytecode"
    bytecode.prepared.cache_clear()
    shutil.rmtree(folder, ignore_errors=True)


def test_where_torch_carries_its_bytecode_workers_read_that_and_no_cache_is_made(tmp_path, monkeypatch):
    monkeypatch.setenv(bytecode.CACHE_ENV, str(tmp_path / "bytecode"))
    bytecode.prepared.cache_clear()
    if not bytecode.torch_bytecode_installed():
        pytest.skip("this machine's torch carries no bytecode")
    assert bytecode.prepared(PACKAGE_ROOT) is None
    assert not (tmp_path / "bytecode").exists()
    bytecode.prepared.cache_clear()


def test_the_cache_is_filled_once_with_what_workers_import_readable_by_all_writable_by_the_judge(
    no_installed_bytecode,
):
    root = bytecode.prepared(PACKAGE_ROOT)
    assert root == str(no_installed_bytecode)
    torch_init = importlib.util.find_spec("torch").origin
    cached = Path(root + os.path.dirname(torch_init), os.path.basename(importlib.util.cache_from_source(torch_init)))
    assert cached.is_file(), sorted(os.listdir(root))
    mode = cached.stat().st_mode
    assert mode & stat.S_IROTH and not mode & (stat.S_IWGRP | stat.S_IWOTH)
    markers = [p for p in os.listdir(root) if p.startswith("ready-")]
    assert len(markers) == 1
    before = cached.stat().st_mtime_ns
    bytecode.prepared.cache_clear()
    assert bytecode.prepared(PACKAGE_ROOT) == root and cached.stat().st_mtime_ns == before  # not filled again


def load(worker):
    response, _ = worker.request(protocol.Load(seed=0), timeout_s=120)
    return response


def test_a_confined_worker_reads_the_cache_and_cannot_write_into_it(no_installed_bytecode):
    worker = WorkerProcess("reference", "cpu", WRITER, WorkerLimits(), DEFAULT_POLICY, peer=WorkerChannels("c", 2**20))
    try:
        assert worker.receive(timeout_s=120)["type"] == "hello"
        assert load(worker).kind == "loaded"
        layers = worker.sandbox_layers
    finally:
        worker.close()
    said = worker.stdout.text()
    if layers["read_only_root"]["status"] != "in_force" and layers["unprivileged_user"]["status"] != "in_force":
        pytest.skip("no read-only root and no user of its own here")
    assert "REFUSED" in said and "WROTE" not in said, said
    assert not (no_installed_bytecode / "planted.pyc").exists()
    if os.geteuid() == 0:  # the cache did not cost the worker its user of its own
        assert layers["unprivileged_user"]["status"] == "in_force", layers["unprivileged_user"]


def test_a_cache_others_could_write_or_workers_could_not_reach_is_not_used(no_installed_bytecode, tmp_path):
    hidden = tmp_path / "private"  # under pytest's folder, which only its user may enter
    hidden.mkdir()
    assert not bytecode.usable(hidden)
    open_to_all = no_installed_bytecode.parent / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    assert not bytecode.usable(open_to_all)
    reachable = no_installed_bytecode.parent / "fine"
    reachable.mkdir(mode=0o755)
    reachable.chmod(0o755)
    assert bytecode.usable(reachable) == all(os.stat(p).st_mode & stat.S_IXOTH for p in reachable.parents)


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux's")
def test_a_worker_that_is_not_confined_gets_no_cache(no_installed_bytecode):
    worker = WorkerProcess(
        "reference", "cpu", WRITER, WorkerLimits(), SandboxPolicy(enabled=False), peer=WorkerChannels("c", 2**20)
    )
    try:
        assert worker.bytecode is None
        assert worker.receive(timeout_s=120)["type"] == "hello"
    finally:
        worker.close()
    assert not no_installed_bytecode.exists()
