"""The operating-system layers around a worker: the policy, the plan handed to the launcher, the record.

Every layer is tried for every worker and recorded by name as in force, missing (with the reason) or
not applicable; a missing layer does not stop the worker unless the policy requires the sandbox, and
then the worker never starts and the judge raises `SandboxUnavailable`. The layers are applied by the
trusted launcher `kerneljudge.sandbox.enter`, which the worker's argv is wrapped in; its report comes
back over a pipe the candidate never holds. What each layer protects is in docs/security.md.
"""

from __future__ import annotations

import json
import os
import random
import select
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from kerneljudge.sandbox.allowlist import plan_allowlist

GiB = 1024**3

LAYERS = (
    "network_namespace",
    "mount_namespace",
    "read_only_root",
    "hidden_state",
    "allowlist_root",
    "private_tmp",
    "pid_namespace",
    "unprivileged_user",
    "no_new_privs",
    "resource_limits",
    "seccomp",
    "gpu_memory_cap",
)

LayerStatus = Literal["in_force", "missing", "not_applicable"]


class SandboxUnavailable(Exception):
    """The policy requires a sandbox layer this machine could not set up (a judge failure, not a verdict)."""


@dataclass(frozen=True)
class Layer:
    status: LayerStatus
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class SandboxPolicy:
    """What to confine a worker with. Limits of None are left as inherited.

    The address-space cap must stay large: CUDA reserves tens of GiB of virtual memory at start-up, and
    64 GiB was measured to leave it working on an H200 (docs/gpu-machine.md). RLIMIT_NPROC counts every
    process and thread of the worker's uid on the machine: with `uid` None (the default) a judge running
    as root gives each worker a uid of its own (`take_worker_uid`), so the cap bounds that worker alone.
    """

    enabled: bool = True
    # CUDA workers get the same layers. Off, for a machine whose GPU stack cannot start inside them, their
    # record says each layer is missing and why (docs/security.md).
    confine_cuda: bool = True
    require: bool = False
    # allowlist_root is optional until it is traced on a GPU machine (CUDA workers keep the hide-list).
    optional_layers: frozenset[str] = frozenset({"seccomp", "gpu_memory_cap", "allowlist_root"})
    # Layers not applied at all (recorded missing): to find which one a machine's GPU stack cannot live with
    # (scripts/sandbox_cuda_probe.py), or to judge on such a machine without it.
    skip_layers: frozenset[str] = frozenset()
    uid: int | None = None  # None: a uid of its own for each worker, from WORKER_UIDS
    gid: int = 65534
    max_processes: int | None = field(default_factory=lambda: max(512, 32 * (os.cpu_count() or 1)))
    max_open_files: int | None = 4096
    max_file_bytes: int | None = 16 * GiB
    address_space_bytes: int | None = 64 * GiB
    cpu_time_s: int | None = None  # None: the worker's lifetime on every core, the most it could use
    tmpfs_bytes: int = 1 * GiB
    gpu_memory_bytes: int | None = None
    hide_paths: tuple[str, ...] = ()
    # The allow-listed root for CUDA workers too: off until it is traced on a GPU machine (issue 22);
    # scripts/sandbox_cuda_probe.py turns it on to try CUDA, Triton and an inline extension inside it, and
    # KJ_ALLOWLIST_CUDA=1 in the judge's environment turns it on for a whole run (scripts/gpu_suite.sh).
    allowlist_cuda: bool = field(default_factory=lambda: os.environ.get("KJ_ALLOWLIST_CUDA") == "1")

    def __post_init__(self) -> None:
        if self.require and not self.enabled:
            raise ValueError("a sandbox cannot be both required and disabled")
        unknown = (set(self.optional_layers) | set(self.skip_layers)) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown sandbox layers {sorted(unknown)}; known: {', '.join(LAYERS)}")

    def required_layers(self) -> list[str]:
        return [name for name in LAYERS if self.require and name not in self.optional_layers]


DEFAULT_POLICY = SandboxPolicy()

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


# Where the machine turns NVLink multicast off (it can take a shared host's GPUs out of service), every
# process the judge starts with an environment of its own keeps these set.
MULTICAST_OFF_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def policy_for(mode: str) -> SandboxPolicy:
    """The machine's default layers and limits (`DEFAULT_POLICY`), switched as `JudgeConfig.sandbox` says."""
    return replace(DEFAULT_POLICY, enabled=mode != "off", require=mode == "require")


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
    allow, why = None, "CUDA workers keep the hide-list until the allow-list is traced on a GPU machine"
    if not (cuda and cuda_possible()) or policy.allowlist_cuda:
        allow, why = plan_allowlist(ws, needed), None
    return {
        "workspace": ws,
        **plan_mounts(ws, needed, *state_dirs(policy)),
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


def read_report(fd: int, timeout_s: float) -> dict[str, Any]:
    """The launcher's one-line JSON report; a silent or garbled launcher is an error of the judge."""
    deadline = time.monotonic() + timeout_s
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise SandboxUnavailable(f"the sandbox launcher sent no report within {timeout_s:.0f} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    try:
        report = json.loads(data)
        layers = {name: Layer(**value) for name, value in report["layers"].items()}
    except (ValueError, KeyError, TypeError):
        raise SandboxUnavailable(f"the sandbox launcher died before reporting: {bytes(data[:200])!r}") from None
    return {"layers": layers, "error": report.get("error")}


def package_root() -> Path:
    """The folder that holds the kerneljudge package (what a worker needs on its PYTHONPATH)."""
    return Path(__file__).resolve().parents[2]


def run_confined(
    code: str, policy: SandboxPolicy = DEFAULT_POLICY, timeout_s: float = 60.0, cuda: bool = False
) -> tuple[dict[str, Layer], subprocess.CompletedProcess[bytes]]:
    """Run `python -c code` inside the launcher in a scratch workspace, confined as a CUDA worker is where
    `cuda`: the layers set up, and what it did."""
    from kerneljudge.sandbox.workspace import Workspace

    workspace = Workspace.create("probe")
    report_r, report_w = os.pipe()
    uid = take_worker_uid(policy)
    proc: subprocess.Popen[bytes] | None = None
    try:
        spec = launcher_spec(workspace.root, policy, package_root(), lifetime_s=timeout_s, uid=uid, cuda=cuda)
        paths = [str(package_root()), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        kept = ("PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", *MULTICAST_OFF_ENV)
        env = {k: os.environ[k] for k in kept if k in os.environ}
        env.update(PYTHONPATH=os.pathsep.join(paths), HOME=str(workspace.root))
        proc = subprocess.Popen(
            wrap_argv([sys.executable, "-c", code], spec, report_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_w,),
            cwd=workspace.root,
            env=env,
            start_new_session=True,
        )
        os.close(report_w)
        report_w = -1
        report = read_report(report_r, timeout_s)
        stdout, stderr = proc.communicate(timeout=timeout_s)
    finally:
        for fd in (report_r, report_w):
            if fd >= 0:
                os.close(fd)
        workspace.remove()
        if proc is None or proc.poll() is not None:  # a launcher still running keeps its uid taken
            release_worker_uid(uid)
    return complete(report["layers"]), subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def probe_layers(policy: SandboxPolicy = DEFAULT_POLICY, timeout_s: float = 60.0) -> dict[str, Layer]:
    """The layers this machine sets up, tried by starting the launcher around an empty interpreter."""
    from kerneljudge.sandbox.gpu_memory import open_nvml

    layers, _ = run_confined("pass", policy, timeout_s)
    nvml, handles, error = open_nvml()
    layers["gpu_memory_cap"] = (
        Layer("in_force", f"NVML reads per-process memory on {len(handles)} GPU(s); applies where a cap is set")
        if handles
        else Layer("not_applicable", error or "NVML sees no GPU")
    )
    return layers


def disabled_layers(reason: str) -> dict[str, Layer]:
    return {name: Layer("missing", reason) for name in LAYERS}


CUDA_UNCONFINED = "not applied to CUDA workers: SandboxPolicy.confine_cuda is off"


def gpus_hidden_by_sandbox(layers: dict[str, dict[str, str]]) -> str | None:
    """Why a confined worker saw no CUDA device on a machine where NVML sees GPUs; None when that is not so."""
    from kerneljudge.sandbox.gpu_memory import open_nvml

    if not any(layer["status"] == "in_force" for layer in layers.values()):
        return None
    _, handles, _ = open_nvml()
    if not handles:
        return None
    return (
        f"NVML sees {len(handles)} GPU(s) but CUDA did not start inside the sandbox: judge with --sandbox off, "
        "or find the layer with scripts/sandbox_cuda_probe.py"
    )


def complete(layers: dict[str, Layer]) -> dict[str, Layer]:
    """Every layer by name, in a fixed order; one the launcher never reached is missing."""
    return {name: layers.get(name, Layer("missing", "not reached by the launcher")) for name in LAYERS}


def missing_required(layers: dict[str, Layer], policy: SandboxPolicy) -> list[str]:
    return [name for name in policy.required_layers() if layers[name].status == "missing"]


def check_required(layers: dict[str, Layer], policy: SandboxPolicy, error: str | None = None) -> None:
    """Raise `SandboxUnavailable` with a one-line reason where a required layer is missing."""
    missing = missing_required(layers, policy)
    if missing or error:
        reasons = "; ".join(f"{name}: {layers[name].detail}" for name in missing)
        raise SandboxUnavailable(
            f"{error or 'required sandbox layers missing'} ({reasons or 'no layer detail'}); "
            "run where namespaces are allowed, or set require=False to judge without them"
        )
