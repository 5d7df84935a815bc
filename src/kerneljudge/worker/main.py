"""Entry point of a worker process: ``python -m kerneljudge.worker.main``.

A worker serves one role for one judgment: the reference (worker/reference.py), which runs the trusted
task, or the candidate (worker/candidate.py), which imports the untrusted candidate. The parent starts it
with the pipes it reads requests from and writes responses to, and the shared-memory channels it holds
(`--channel NAME:FD:MODE:CAPACITY`, protocol/channel.py).
"""

from __future__ import annotations

import argparse
import os
import sys

from kerneljudge.protocol import channel, wire
from kerneljudge.worker import prepare


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this worker when the judge's thread that started it ends (PR_SET_PDEATHSIG; the judge's
    threads close their workers before they end); exit now if the judge is already gone. A confined worker
    gets this from its launcher instead (sandbox/enter.py, sandbox/lifeline.py)."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kerneljudge-worker")
    parser.add_argument("--role", choices=("reference", "candidate"), required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--resp-fd", type=int, required=True)
    parser.add_argument("--channel", action="append", default=[])
    parser.add_argument("--parent-pid", type=int, help="a worker started without the launcher: die with it")
    ns = parser.parse_args(argv)
    if ns.parent_pid is not None:
        die_with_parent(ns.parent_pid)
    prepare.begin(ns.device, ns.role)  # a candidate's worker: Triton's import and key beside torch's import
    # A CUDA worker's device tensors cross the channels' registered heads (protocol/pinned.py); a sanitized
    # worker's do not (sanitize.SANITIZED_ENV), so that the tool sees the copies it always saw.
    heads = ns.device != "cpu" and os.environ.get("KJ_PINNED_HEADS") != "0"
    channels = channel.Channels([channel.Endpoint.parse(text) for text in ns.channel], heads=heads)
    if ns.role == "reference":
        from kerneljudge.worker.reference import ReferenceWorker as cls
    else:
        from kerneljudge.worker.candidate import CandidateWorker as cls
    worker = cls(ns.device, ns.source, ns.req_fd, ns.resp_fd, channels)
    try:
        worker.serve()
    except wire.WireError:
        return 3
    if os.environ.get("KJ_WORKER_TEARDOWN") == "1":  # a tool around the worker reports at its teardown
        return 0
    # Asked to exit: nothing is left to say, so the interpreter's teardown (torch's, a CUDA context's, the
    # candidate's atexit hooks) is skipped; it took 0.7 s of each worker's close on the CPU machine.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
