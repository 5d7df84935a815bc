"""A probe's child process started in the judge's own sandbox, as a CUDA worker is launched (sandbox/process.py):
its own uid, PID, mount and network namespaces, seccomp. The GPU probes (cuda_ipc_probe.py, context_teardown.py)
ask what holds for a worker there, not for a bare process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kerneljudge.sandbox import confine, lifeline, plan
from kerneljudge.sandbox.process import INHERITED_ENV, WORKER_USER, worker_pythonpath
from kerneljudge.sandbox.workspace import Workspace


def sandboxed(
    workspace: Workspace, name: str, source: str, args: list[str], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[str]:
    """Run `source` (written into the workspace as `name`) with `args`, confined; its pipes are text. The
    process returned is the launcher's; `layers` on it says which of the sandbox's layers were in force."""
    policy = confine.DEFAULT_POLICY
    workspace.write_source(name, source)
    package_root = Path(confine.__file__).resolve().parents[2]
    uid = plan.take_worker_uid(policy)
    report_r, report_w = os.pipe()
    spec = plan.launcher_spec(workspace.root, policy, package_root, 600.0, uid, cuda=True)
    spec["lifeline_fd"] = lifeline.read_end()
    argv = plan.wrap_argv([sys.executable, name, *args], spec, report_w)
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ} | workspace.env()
    env["PYTHONPATH"] = worker_pythonpath()  # the launcher imports the judge: from a checkout on the GPU machine
    env |= {"USER": WORKER_USER, "LOGNAME": WORKER_USER, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(report_w, spec["lifeline_fd"], *pass_fds),
        cwd=workspace.root,
        env=env,
        start_new_session=True,
    )
    os.close(report_w)
    try:
        report = confine.read_report(report_r, 60.0)
    except confine.SandboxUnavailable as error:  # what the launcher said as it died is the finding
        proc.kill()
        raise confine.SandboxUnavailable(f"{error}; its stderr: {proc.communicate()[1][-2000:]!r}") from None
    finally:
        os.close(report_r)
    proc.layers = {name: layer.status for name, layer in report["layers"].items()}  # type: ignore[attr-defined]
    return proc
