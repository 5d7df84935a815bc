"""What this machine's sandbox can do, tried by starting the launcher around a snippet of Python: the layers it
sets up (`kerneljudge env`), and why a confined worker saw no GPU where NVML sees some.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kerneljudge.sandbox.confine import DEFAULT_POLICY, MULTICAST_OFF_ENV, Layer, SandboxPolicy, complete, read_report
from kerneljudge.sandbox.plan import launcher_spec, release_worker_uid, take_worker_uid, wrap_argv


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
