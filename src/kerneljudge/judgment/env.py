"""What this machine offers: the environment fingerprint and `kerneljudge env`.

Device facts come from a reference-role probe worker (a fresh process that has
seen no candidate), so the parent itself never creates a CUDA context.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerneljudge import __version__, protocol

if TYPE_CHECKING:
    from kerneljudge.sandbox.confine import SandboxPolicy


def nvidia_driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for token in text.split():
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return None


def host_fingerprint() -> dict[str, Any]:
    """The environment of a judgment on the CPU, known in the parent without a worker: the workers run this
    interpreter with this torch, and read Triton's version from its metadata as this does; what only a worker
    sees (CUDA, the GPU, the numerics flags) is left unknown."""
    import torch

    try:  # as the worker reads it (worker/base.py), without importing triton
        from importlib.metadata import version

        triton: str | None = version("triton")
    except Exception:  # absent or unreadable: the worker says None too
        triton = None
    return {**fingerprint(None), "torch": torch.__version__, "triton": triton}


def fingerprint(hello: protocol.Hello | None) -> dict[str, Any]:
    """The environment that produced a record: host software plus what the reference worker saw (its hello)."""
    seen = {
        name: None if hello is None else getattr(hello, name)
        for name in (
            "torch",
            "torch_cuda",
            "triton",
            "cuda_available",
            "gpu_name",
            "gpu_capability",
            "gpu_count",
            "gpu_memory_bytes",
            "l2_cache_bytes",
        )
    }
    return {
        "kerneljudge": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        **seen,
        "driver": nvidia_driver_version(),
        "flags": {} if hello is None else hello.flags,
    }


def namespace_support() -> dict[str, bool]:
    """Which Linux namespaces an unprivileged child can enter here (tried, not guessed)."""
    unshare = shutil.which("unshare")
    result: dict[str, bool] = {}
    for name, flags in (
        ("user", ["-U"]),
        ("network", ["-U", "-r", "-n"]),
        ("mount", ["-U", "-r", "-m"]),
        ("pid", ["-U", "-r", "-p", "-f"]),
    ):
        if unshare is None:
            result[name] = False
            continue
        try:
            done = subprocess.run([unshare, *flags, "true"], capture_output=True, timeout=10)
            result[name] = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            result[name] = False
    return result


def sandbox_support() -> dict[str, str]:
    """Each sandbox layer as this machine sets it up for a worker (tried by starting the launcher)."""
    from kerneljudge.sandbox.confine import SandboxUnavailable
    from kerneljudge.sandbox.probe import probe_layers

    try:
        layers = probe_layers()
    except (SandboxUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        return {"launcher": f"failed: {exc}"}
    return {name: f"{layer.status}: {layer.detail}" for name, layer in layers.items()}


def cuda_confinement(hello: protocol.Hello | None, layers: dict[str, dict[str, str]]) -> str:
    """Whether the layers above also confine workers that use the GPU here (hello and layers: a probe's)."""
    from kerneljudge.sandbox.confine import CUDA_UNCONFINED, DEFAULT_POLICY
    from kerneljudge.sandbox.probe import gpus_hidden_by_sandbox

    if hello is None or not hello.cuda_available:
        return gpus_hidden_by_sandbox(layers) or "not applicable: no CUDA device"
    if not DEFAULT_POLICY.confine_cuda:
        return CUDA_UNCONFINED
    if DEFAULT_POLICY.allowlist_cuda:
        return "the same layers"
    return "the same layers but allowlist_root: they keep the hide-list (KJ_ALLOWLIST_CUDA=0)"


def greeting(frame: Any) -> protocol.Hello | None:
    """A probe worker's first frame as its hello; None where it said none (an error, or a frame that breaks the
    protocol): `kerneljudge env` then shows what only a worker sees as unknown."""
    try:
        hello = protocol.decode_greeting(frame)
    except protocol.ProtocolError:
        return None
    return hello if isinstance(hello, protocol.Hello) else None


def probe(
    device: str = "auto", policy: SandboxPolicy | None = None, timeout_s: float = 120.0, gpu: str | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """Start a bare reference worker as a judgment would and return its hello and its sandbox layers.

    `gpu`: the worker's CUDA_VISIBLE_DEVICES, as a batch lane sets it. Raises SandboxUnavailable (a
    required layer missing), OSError or WorkerFailure.
    """
    with probe_worker(device, policy, timeout_s, gpu) as greeted:
        return greeted()


@contextmanager
def probe_worker(
    device: str = "auto", policy: SandboxPolicy | None = None, timeout_s: float = 120.0, gpu: str | None = None
) -> Iterator[Callable[[], tuple[dict[str, Any], dict[str, dict[str, str]]]]]:
    """A bare reference worker, started; yields the call that waits for its hello (and its sandbox layers).
    The caller may do other work while the worker imports torch, most of `kerneljudge env`'s time."""
    from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess

    worker = WorkerProcess("reference", device, "", WorkerLimits(step_timeout_s=timeout_s), policy=policy, gpu=gpu)
    try:
        yield lambda: (worker.receive(timeout_s=worker.limits.start_timeout_s), worker.sandbox_layers)
    finally:
        worker.close()


def clock_monitor(hello: protocol.Hello | None) -> str:
    """Whether timing can watch this GPU's clocks through NVML, or why not."""
    if hello is None or not hello.cuda_available:
        return "not needed: no CUDA device"
    from kerneljudge.timing.clocks import NvmlClockMonitor

    monitor, error = NvmlClockMonitor.open(hello.gpu_uuid)
    return f"nvml ({monitor.snapshot().get('sm_mhz')} MHz now)" if monitor is not None else str(error)


def report() -> dict[str, Any]:
    """Everything `kerneljudge env` prints. The probes of the namespaces and the launcher run while the probe
    worker imports torch, which is nearly all of the wait (1.5 s of 2.0 on the 2-core machine)."""
    with probe_worker() as greeted:
        namespaces = namespace_support()
        sandbox = sandbox_support()
        frame, layers = greeted()
    hello = greeting(frame)
    return {
        **fingerprint(hello),
        "python_executable": sys.executable,
        "triton_interpreter": hello is not None and hello.triton is not None,
        "namespaces": namespaces,
        "sandbox": sandbox,
        "sandbox_cuda_workers": cuda_confinement(hello, layers),
        "clock_monitor": clock_monitor(hello),
        "compute_sanitizer": compute_sanitizer(hello),
    }


def compute_sanitizer(hello: protocol.Hello | None) -> str:
    """Where compute-sanitizer is, for the checks of docs/sanitizer.md; why none runs where it is not."""
    from kerneljudge.judgment.sanitizer import NOT_FOUND, sanitizer_path

    if hello is None or not hello.cuda_available:
        return "not needed: no CUDA device"
    return sanitizer_path() or NOT_FOUND
