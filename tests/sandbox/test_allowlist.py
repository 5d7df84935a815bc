"""The allow-listed root (sandbox/allowlist.py): a candidate sees only what a worker needs of the host.

Sentinel files lie in the judge's working directory, beside the store, beside the task, in $HOME and in a
sibling folder of the project; a candidate judged in audit mode lists every top-level folder, walks what it
can see and tries to read each sentinel. None may be readable, everything it sees must lie on the way to an
allowed path, and its own workspace and /tmp must still work.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

import kerneljudge
from helpers import ROOT, TASKS
from kerneljudge import judge
from kerneljudge.sandbox.allowlist import PRIVATE_TMP, SYSTEM_PATHS, plan_allowlist

EXPLORER = """
import json, os
import torch
import torch.nn as nn

SENTINELS = {sentinels!r}
found = {{"read": {{}}, "seen": [], "top": sorted(os.listdir("/"))}}
for path in SENTINELS:
    try:
        found["read"][path] = open(path).read()
    except OSError as exc:
        found["read"][path] = None
for top in found["top"]:
    if top in ("proc", "sys", "dev", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        continue  # the system's and the kernel's, allowed whole
    for folder, dirs, files in os.walk("/" + top):  # three levels deep: the way to each allowed path
        found["seen"] += [os.path.join(folder, n) for n in dirs + files]
        if folder.count("/") >= 2:
            dirs[:] = []
with open("mine.txt", "w") as handle:
    handle.write("workspace")
with open("/tmp/mine.txt", "w") as handle:
    handle.write("tmp")
found["workspace"] = open("mine.txt").read() + open("/tmp/mine.txt").read()
print("PROBE " + json.dumps(found))


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.relu(x + self.bias)
"""


PACKAGED = ("redteam/tasks/bias_relu.py", "redteam/fixtures/honest_triton.py", "suite/ops/softmax.py")


def test_the_plan_binds_only_what_a_worker_needs_and_keeps_symlinks(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (etc / "shadow").write_text("secret\n")
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/UTC")
    package = tmp_path / "package"
    (package / "tasks").mkdir(parents=True)
    entries = plan_allowlist(
        "/tmp/kj-ws",
        ["/usr/lib/python3", "/opt/venv", "/tmp/kj-cache", str(package)],
        etc=str(etc),
        masked=[str(package / "tasks"), "/elsewhere/tasks"],  # one inside a bound folder, one not bound at all
    )
    paths = [e["path"] for e in entries]
    assert [e["path"] for e in entries if e["kind"] == "mask"] == [str(package / "tasks")]
    assert paths.index(str(package / "tasks")) > paths.index(str(package))  # covered after the bind
    assert str(etc / "passwd") in paths and str(etc / "shadow") not in paths
    assert next(e for e in entries if e["path"] == str(etc / "localtime"))["kind"] == "link"
    assert "/usr/lib/python3" not in paths  # inside /usr, bound already
    assert [e["path"] for e in entries if e["kind"] == "tmpfs"] == list(PRIVATE_TMP)
    assert paths[-1] == "/tmp/kj-ws" and entries[-1]["writable"]
    assert all(not e["writable"] for e in entries if e["path"] in SYSTEM_PATHS)
    if os.path.isdir("/opt/venv"):
        assert "/opt/venv" in paths


def _allowed(entries: list[dict]) -> list[str]:
    return [e["path"] for e in entries]


def _on_the_way(path: str, allowed: list[str]) -> bool:
    """A path the worker may see: an allowed one, inside one, or a folder on the way to one."""
    return any(
        path == a or path.startswith(a.rstrip("/") + "/") or a.startswith(path.rstrip("/") + "/") for a in allowed
    )


def test_a_candidate_reads_no_sentinel_and_sees_only_the_way_to_allowed_paths(tmp_path, monkeypatch):
    layer = judge_the_explorer(tmp_path, monkeypatch, "cpu")
    if layer is None:
        pytest.skip("no allow-listed root on this machine")


def test_cuda_workers_get_the_root_unless_kj_allowlist_cuda_is_0(monkeypatch):
    from kerneljudge.sandbox.confine import SandboxPolicy

    monkeypatch.delenv("KJ_ALLOWLIST_CUDA", raising=False)
    assert SandboxPolicy().allowlist_cuda
    assert "allowlist_root" not in SandboxPolicy().optional_layers  # counted, and required by `require`
    monkeypatch.setenv("KJ_ALLOWLIST_CUDA", "0")
    assert not SandboxPolicy().allowlist_cuda
    assert "allowlist_root" in SandboxPolicy().optional_layers
    monkeypatch.setenv("KJ_ALLOWLIST_CUDA", "1")
    assert SandboxPolicy().allowlist_cuda


def judge_the_explorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str) -> dict | None:
    """Judge the explorer among fresh sentinels on `device` and check what it saw; the candidate's
    allow-listed root layer as the record has it, or None where the layer is not in force."""
    tag = uuid.uuid4().hex[:8]
    sibling = ROOT.parent / f".kj-sentinel-{tag}"  # a sibling folder of the project, outside /tmp where it can be
    try:
        sibling.mkdir()
    except OSError:
        sibling = tmp_path / "sibling"
        sibling.mkdir()
    work, store_dir, task_dir, home = (tmp_path / n for n in ("work", "store", "task", "home"))
    for folder in (work, store_dir, task_dir, home):
        folder.mkdir()
    sentinels = []
    for folder in (work, store_dir, task_dir, home, sibling, ROOT):
        path = folder / f"sentinel-{tag}.txt"
        path.write_text(f"secret {tag}")
        sentinels.append(str(path))
    task = task_dir / "task.py"
    task.write_text((TASKS / "tiny_bias_relu.py").read_text())
    candidate = tmp_path / "explorer.py"
    # The package's tasks and solutions lie inside a folder the worker needs (the judge's package): emptied.
    package = Path(kerneljudge.__file__).parent
    packaged = [str(package / rel) for rel in PACKAGED if (package / rel).is_file()]
    assert packaged
    candidate.write_text(EXPLORER.format(sentinels=sentinels + packaged))
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    try:
        record = judge(task, candidate, device=device, mode="audit", timing=False, policy="practical")
    finally:
        for path in sentinels:
            Path(path).unlink(missing_ok=True)
        if sibling.parent == ROOT.parent:
            sibling.rmdir()
    layer = record.logs["candidate"].sandbox_layers.get("allowlist_root", {})
    if layer.get("status") != "in_force":
        return None
    probe = next(line for line in record.logs["candidate"].stdout_tail.splitlines() if line.startswith("PROBE "))
    found = json.loads(probe.removeprefix("PROBE "))
    assert not {p: c for p, c in found["read"].items() if c is not None}
    assert found["workspace"] == "workspacetmp"  # its own workspace and a private /tmp still work
    detail = layer["detail"].removeprefix("a fresh root with only: ")
    allowed = [item.rsplit(" (", 1)[0] for item in detail.split(", ")]
    assert set(found["top"]) <= {p.split("/")[1] for p in allowed}, found["top"]
    strays = [p for p in found["seen"] if not _on_the_way(p, allowed)]
    assert not strays, strays[:10]
    assert record.status in ("PASS", "SUSPICIOUS") and record.correctness.passed
    return layer
