"""The plan the trusted launcher (sandbox/enter.py) is handed for one worker, made in the parent: which of the
judge's folders to cover and which to bind back, the resource limits, the allow-listed root, the uid to
drop to; and the argv that wraps the worker in the launcher.
"""

from __future__ import annotations

import json
import os
import random
import site
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from kerneljudge.sandbox.allowlist import plan_allowlist
from kerneljudge.sandbox.confine import SandboxPolicy

# A judge running as root drops each worker to a uid of its own, drawn from this range (far above system,
# login and the usual subordinate ranges) and not reused while its worker lives. RLIMIT_NPROC counts every
# process and thread of a uid on the machine: with one uid for all, the 16 to 32 workers of eight lanes on
# two H200s together ran out of threads (libgomp and cudaGetDeviceCount failed in 8 of 40 judgments, issue
# 8), and a fork bomb in one worker could keep the others from starting.
WORKER_UIDS = range(1_800_000_000, 1_801_000_000)
_uids_in_use: set[int] = set()
_uids_lock = threading.Lock()
_uid_rng = random.SystemRandom()  # unpredictable, so that two judges on one machine rarely meet


def take_worker_uid(policy: SandboxPolicy) -> int:
    """The uid a worker runs as when the judge is root: the policy's, or a fresh one from WORKER_UIDS."""
    if policy.uid is not None:
        return policy.uid
    with _uids_lock:
        while (uid := _uid_rng.choice(WORKER_UIDS)) in _uids_in_use:
            pass
        _uids_in_use.add(uid)
        return uid


def release_worker_uid(uid: int) -> None:
    """After the worker and all its processes are gone."""
    with _uids_lock:
        _uids_in_use.discard(uid)


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _pth_folders() -> list[str]:
    """Folders that .pth files in site-packages add to a fresh interpreter's path (editable installs)."""
    found = []
    for folder in site.getsitepackages():
        for pth in Path(folder).glob("*.pth"):
            try:
                lines = pth.read_text().splitlines()
            except OSError:
                continue
            found += [line.strip() for line in lines if line.strip() and not line.startswith(("#", "import"))]
    return found


def needed_paths(package_root: Path) -> list[str]:
    """Folders a worker reads: the judge package, the interpreter and what a fresh interpreter imports from.

    The parent's own sys.path is not used: it holds the parent's cwd under `python -m` and pytest.
    """
    candidates = [package_root, sys.prefix, sys.base_prefix, sys.exec_prefix, Path(_real(sys.executable)).parent]
    candidates += _pth_folders()
    candidates += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    candidates += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if v in os.environ]
    candidates += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if "TRITON_PTXAS_PATH" in os.environ:
        candidates.append(Path(os.environ["TRITON_PTXAS_PATH"]).parent)
    found = [_real(p) for p in candidates if os.path.isdir(p)]
    return sorted(p for p in dict.fromkeys(found) if p != "/")  # "/" would keep every state dir in view


# Folders of the judge's package that hold tasks and solutions (the red team's tasks and fixtures, the built-in
# suite's references and Triton candidates): a worker imports nothing from them, and a candidate that read them
# would hold a task's reference, or a correct kernel, from inside its sandbox. Emptied in every worker's view.
PACKAGE_MASKED = ("redteam", "suite")


def masked_paths(package_root: Path) -> list[str]:
    """The package's folders of tasks and solutions, emptied in a worker's view (PACKAGE_MASKED); `package_root`
    is the folder that holds the `kerneljudge` package (as for needed_paths)."""
    package = Path(package_root) / "kerneljudge"
    return [_real(package / name) for name in PACKAGE_MASKED if (package / name).is_dir()]


def state_dirs(policy: SandboxPolicy) -> tuple[list[str], list[str]]:
    """The judge's folders to cover: (temporary folders made private and writable, others emptied)."""
    temporary = [tempfile.gettempdir(), "/tmp", "/var/tmp"]
    private = [os.path.expanduser("~"), "/root", "/home", os.getcwd(), *policy.hide_paths]
    return [_real(p) for p in temporary if os.path.isdir(p)], [_real(p) for p in private if os.path.isdir(p)]


def plan_mounts(workspace: str, needed: list[str], temporary: list[str], private: list[str]) -> dict[str, Any]:
    """Which folders to cover with tmpfs and which to bind back (pure: paths in, mount plan out).

    A folder that is, or lies inside, a needed one is not covered (the worker must reach it); one inside
    another covered folder is covered by it already. Needed folders under a covered one are bound back
    read-only, the workspace read-write, outermost first so that inner binds land on outer ones.
    """
    keep = [workspace, *needed]
    hide: list[dict[str, Any]] = []
    for path, writable in [(p, True) for p in temporary] + [(p, False) for p in private]:
        if path == "/" or any(_inside(path, k) for k in keep) or any(_inside(path, h["path"]) for h in hide):
            continue
        hide = [h for h in hide if not _inside(h["path"], path)] + [{"path": path, "writable": writable}]
    under_hidden = [p for p in needed if any(_inside(p, h["path"]) for h in hide)]
    outermost = [p for p in under_hidden if not any(p != q and _inside(p, q) for q in under_hidden)]
    expose = [{"path": p, "writable": False} for p in outermost if not _inside(workspace, p)]
    expose.append({"path": workspace, "writable": True})
    expose.sort(key=lambda e: e["path"].count("/"))
    return {"hide": hide, "expose": expose, "needed": [workspace, *needed]}


# A CUDA worker's address space also maps the device memory it allocates: KernelBench's 16 GiB pooling
# input and its float64 copy for the oracle take 48 GiB of it in the reference worker alone.
CUDA_ADDRESS_SPACE_FACTOR = 4


def rlimits(policy: SandboxPolicy, lifetime_s: float, cuda: bool = False) -> dict[str, int]:
    cpu = policy.cpu_time_s if policy.cpu_time_s is not None else int(lifetime_s * (os.cpu_count() or 1)) + 60
    space = policy.address_space_bytes
    space = space * CUDA_ADDRESS_SPACE_FACTOR if space is not None and cuda else space
    limits = {
        "RLIMIT_CORE": 0,
        "RLIMIT_CPU": cpu,
        "RLIMIT_NPROC": policy.max_processes,
        "RLIMIT_NOFILE": policy.max_open_files,
        "RLIMIT_FSIZE": policy.max_file_bytes,
        "RLIMIT_AS": space,
    }
    return {name: value for name, value in limits.items() if value is not None}


def cuda_possible() -> bool:
    """Whether this machine has an NVIDIA device node: without one no worker can start CUDA, whatever it asks."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


def launcher_spec(
    workspace: Path,
    policy: SandboxPolicy,
    package_root: Path,
    lifetime_s: float,
    uid: int,
    cuda: bool = False,
    readable: list[str] | None = None,
) -> dict[str, Any]:
    """Everything the launcher needs, as JSON-ready data; `uid` is the one to drop to when root; `readable`
    are further folders the worker reads (the judge's bytecode cache), bound back read-only where hidden."""
    ws = _real(workspace)
    needed = sorted(dict.fromkeys([*needed_paths(package_root), *(_real(p) for p in readable or [])]))
    masked = masked_paths(package_root)
    allow, why = None, "CUDA workers keep the hide-list here (KJ_ALLOWLIST_CUDA=0)"
    if not (cuda and cuda_possible()) or policy.allowlist_cuda:
        allow, why = plan_allowlist(ws, needed, masked=masked), None
    return {
        "workspace": ws,
        **plan_mounts(ws, needed, *state_dirs(policy)),
        "mask": masked,
        "allow": allow,
        "allow_why": why,
        "tmpfs_bytes": policy.tmpfs_bytes,
        "uid": uid,
        "gid": policy.gid,
        "rlimits": rlimits(policy, lifetime_s, cuda),
        "oom_score_adj": 1000,
        "required": [name for name in policy.required_layers() if name != "gpu_memory_cap"],
        "skip": sorted(policy.skip_layers),
    }


def wrap_argv(argv: list[str], spec: dict[str, Any], report_fd: int) -> list[str]:
    return [sys.executable, "-m", "kerneljudge.sandbox.enter", json.dumps(spec), str(report_fd), "--", *argv]
