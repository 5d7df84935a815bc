"""The operating-system layers around a worker: the policy, and the record of what was in force.

Every layer is tried for every worker and recorded by name as in force, missing (with the reason) or
not applicable; a missing layer does not stop the worker unless the policy requires the sandbox, and
then the worker never starts and the judge raises `SandboxUnavailable`. The layers are applied by the
trusted launcher `kerneljudge.sandbox.enter`, which the worker's argv is wrapped in (the plan it is handed
is sandbox/plan.py's); its report comes back over a pipe the candidate never holds. What each layer
protects is in docs/security.md.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kerneljudge.protocol import wire

GiB = 1024**3

LAYERS = (
    "network_namespace",
    "mount_namespace",
    "read_only_root",
    "hidden_state",
    "allowlist_root",
    "private_tmp",
    "pid_namespace",
    "ipc_namespace",
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
    as root gives each worker a uid of its own (`plan.take_worker_uid`), so the cap bounds that worker alone.
    """

    enabled: bool = True
    # CUDA workers get the same layers. Off, for a machine whose GPU stack cannot start inside them, their
    # record says each layer is missing and why (docs/security.md).
    confine_cuda: bool = True
    require: bool = False
    # Layers a worker may lack and still count as sandboxed, and that `require` does not insist on. The
    # allow-listed root is one of them only where CUDA workers are given the hide-list (KJ_ALLOWLIST_CUDA=0).
    optional_layers: frozenset[str] = frozenset({"seccomp", "gpu_memory_cap"})
    # Layers not applied at all (recorded missing): to find which one a machine's GPU stack cannot live with
    # (scripts/sandbox_cuda_probe.py), or to judge on such a machine without it.
    skip_layers: frozenset[str] = frozenset()
    uid: int | None = None  # None: a uid of its own for each worker, from plan.WORKER_UIDS
    gid: int = 65534
    max_processes: int | None = field(default_factory=lambda: max(512, 32 * (os.cpu_count() or 1)))
    max_open_files: int | None = 4096
    max_file_bytes: int | None = 16 * GiB
    address_space_bytes: int | None = 64 * GiB
    cpu_time_s: int | None = None  # None: the worker's lifetime on every core, the most it could use
    tmpfs_bytes: int = 1 * GiB
    gpu_memory_bytes: int | None = None
    hide_paths: tuple[str, ...] = ()
    # The allow-listed root for CUDA workers too (traced and run on an H200, docs/security.md);
    # KJ_ALLOWLIST_CUDA=0 in the judge's environment gives them the hide-list instead, for a whole run (a
    # machine whose GPU stack needs a path the list lacks: scripts/sandbox_cuda_probe.py finds out).
    allowlist_cuda: bool = field(default_factory=lambda: os.environ.get("KJ_ALLOWLIST_CUDA") != "0")

    def __post_init__(self) -> None:
        if self.require and not self.enabled:
            raise ValueError("a sandbox cannot be both required and disabled")
        if not self.allowlist_cuda:
            object.__setattr__(self, "optional_layers", self.optional_layers | {"allowlist_root"})
        unknown = (set(self.optional_layers) | set(self.skip_layers)) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown sandbox layers {sorted(unknown)}; known: {', '.join(LAYERS)}")

    def required_layers(self) -> list[str]:
        return [name for name in LAYERS if self.require and name not in self.optional_layers]


DEFAULT_POLICY = SandboxPolicy()

# Where the machine turns NVLink multicast off (it can take a shared host's GPUs out of service), every
# process the judge starts with an environment of its own keeps these set.
MULTICAST_OFF_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def policy_for(mode: str) -> SandboxPolicy:
    """The machine's default layers and limits (`DEFAULT_POLICY`), switched as `JudgeConfig.sandbox` says."""
    return replace(DEFAULT_POLICY, enabled=mode != "off", require=mode == "require")


def read_report(fd: int, timeout_s: float) -> dict[str, Any]:
    """The launcher's one-line JSON report; a silent or garbled launcher is an error of the judge."""
    deadline = time.monotonic() + timeout_s
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not wire.ready(fd, left):
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


def disabled_layers(reason: str) -> dict[str, Layer]:
    return {name: Layer("missing", reason) for name in LAYERS}


CUDA_UNCONFINED = "not applied to CUDA workers: SandboxPolicy.confine_cuda is off"


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
