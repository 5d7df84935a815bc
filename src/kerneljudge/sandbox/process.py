"""Starting one worker process, and closing it: talking to it is sandbox/talk.py's, killing it and reading its
end sandbox/ending.py's (both mixed into `WorkerProcess`).

A worker is a fresh interpreter (fork+exec through subprocess, never a fork of
the parent and never multiprocessing, which would pickle), in its own session
and process group, with its own workspace as cwd, HOME and cache directories.
Its stdout and stderr are drained by the parent into capped buffers so a flood
can neither block the worker nor fill the parent's memory. Requests and
responses travel over two dedicated pipes in the wire format.

The worker's argv is wrapped in the sandbox launcher (sandbox/plan.py,
sandbox/enter.py); `sandbox_layers` says which layers were in force, and
`workspace_changes` what the worker left in its workspace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kerneljudge.protocol import channel
from kerneljudge.sandbox import bytecode, confine, lifeline, plan
from kerneljudge.sandbox.confine import MULTICAST_OFF_ENV, SandboxPolicy
from kerneljudge.sandbox.ending import Lineage, StreamCapture, WorkerEnding
from kerneljudge.sandbox.gpu_memory import start_watch
from kerneljudge.sandbox.talk import WorkerChannels, WorkerTalk
from kerneljudge.sandbox.workspace import Workspace, WorkspaceChanges, diff

WORKER_USER = "kerneljudge-worker"

# Variables a worker inherits; everything else in the parent's environment stays behind.
INHERITED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "KJ_PINNED_HEADS",  # "0": no registered channel heads (protocol/pinned.py), for a measurement without them
    "NVIDIA_DRIVER_CAPABILITIES",
    *MULTICAST_OFF_ENV,
    "OMP_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "TRITON_PTXAS_PATH",
)


def worker_pythonpath() -> str:
    """The import path a worker (and the sandbox launcher before it) gets: the judge's own package root first,
    where the judge runs from a checkout rather than an install, then the parent's PYTHONPATH."""
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(paths))


@dataclass(frozen=True)
class WorkerLimits:
    step_timeout_s: float = 180.0
    start_timeout_s: float = 300.0
    lifetime_s: float = 1800.0
    log_cap_bytes: int = 64 * 1024
    # The capacity of each shared-memory channel (sparse: it costs memory only as far as written). KernelBench's
    # level 1 has 16 GiB inputs, and a timing pool holds three input sets.
    max_message_bytes: int = 64 * 1024**3


class WorkerProcess(WorkerTalk, WorkerEnding):
    """One worker: spawn, request/response, capped logs, kill of its whole process group.

    `policy` defaults to `confine.DEFAULT_POLICY`; with `require` set, a missing layer raises
    `SandboxUnavailable` here and no worker runs. `prefix` runs the interpreter under another program inside
    the sandbox (compute-sanitizer, sanitize.py), with `extra_env` added to its environment.
    """

    def __init__(
        self,
        role: str,
        device: str,
        source_text: str | None,
        limits: WorkerLimits,
        policy: SandboxPolicy | None = None,
        gpu: str | None = None,
        channels: WorkerChannels | None = None,
        peer: WorkerChannels | None = None,
        prefix: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        sharing: WorkerProcess | None = None,
    ) -> None:
        self.role = role
        self.extra_env = dict(extra_env or {})
        # Its own channels (made here unless given), and for a reference worker the candidate's: it writes a
        # trial's inputs straight into the candidate's inbox and reads its outputs to compare them.
        self.channels = channels or WorkerChannels(role, limits.max_message_bytes)
        self.limits = limits
        self.policy = policy or confine.DEFAULT_POLICY
        confined = self.policy.enabled and (device == "cpu" or self.policy.confine_cuda)
        if not confined:  # a required sandbox that will not be applied: refuse before anything starts
            confine.check_required(confine.disabled_layers(confine.CUDA_UNCONFINED), self.policy)
        # Its own workspace and uid, or those of another live worker of the same candidate (`sharing`: a
        # sanitized one finds the extension that worker built up to date); what it shares is its owner's to
        # remove and give back. One uid: the launcher hands the workspace to the worker's uid at start.
        self.sharing = sharing
        self.workspace = sharing.workspace if sharing is not None else Workspace.create(role)
        # The source the worker imports when told to load; None: a spare worker, its source written when a
        # judgment takes it (`assign`: judgment/stages/spare_pairs.py). The worker reads the file only at its load.
        self.source_path = self.workspace.root / f"{role}.py"
        if source_text is not None:
            self.workspace.write_source(self.source_path.name, source_text)
        self._manifest_before = self.workspace.manifest()
        self.workspace_changes: WorkspaceChanges | None = None  # known once closed
        self.started_at = time.monotonic()
        self.assigned = source_text is not None
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        os.set_blocking(self._req_w, False)
        argv = [*(prefix or []), sys.executable, "-X", "faulthandler"]
        if sys.version_info >= (3, 11):
            argv.append("-P")  # keep the workspace (cwd) off sys.path
        argv += [
            "-m",
            "kerneljudge.worker.main",
            "--role",
            role,
            "--device",
            device,
            "--source",
            str(self.source_path),
            "--req-fd",
            str(req_r),
            "--resp-fd",
            str(resp_w),
        ]
        granted = [channel.reader(self.channels.inbox), self.channels.outbox]
        if peer is not None:
            granted += [peer.inbox, channel.reader(peer.outbox)]
        for endpoint in granted:
            argv += ["--channel", endpoint.argument()]
        pass_fds: tuple[int, ...] = (req_r, resp_w, *(e.fd for e in granted))
        report_r = report_w = None
        self.uid: int | None = None  # the uid taken for it, given back once it is gone
        # The judge's bytecode cache, where the installed packages carry none: for confined workers only, which
        # can only read it (sandbox/bytecode.py).
        package_root = Path(__file__).resolve().parents[2]
        self.bytecode = bytecode.prepared(package_root) if confined else None
        if confined:
            report_r, report_w = os.pipe()
            owner_uid = sharing.uid if sharing is not None else None
            self.uid = owner_uid if owner_uid is not None else plan.take_worker_uid(self.policy)
            spec = plan.launcher_spec(
                self.workspace.root,
                self.policy,
                package_root,
                limits.lifetime_s,
                self.uid,
                cuda=device != "cpu",
                readable=[self.bytecode] if self.bytecode else [],
            )
            spec["lifeline_fd"] = lifeline.read_end()  # the launcher kills the worker if the judge dies
            argv = plan.wrap_argv(argv, spec, report_w)
            pass_fds += (report_w, spec["lifeline_fd"])
        elif not prefix:  # the worker asks for the parent-death signal itself (under a prefix, that is its parent)
            argv += ["--parent-pid", str(os.getpid())]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
            cwd=self.workspace.root,
            env=self._env(device, gpu),
            start_new_session=True,
        )
        for fd in (req_r, resp_w, report_w, *(e.fd for e in granted if not e.writable)):
            if fd is not None:
                os.close(fd)
        self.stdout = StreamCapture(self.proc.stdout, limits.log_cap_bytes)
        self.stderr = StreamCapture(self.proc.stderr, limits.log_cap_bytes)
        self.dead = False
        self.asked = False  # whether a request was sent: until then no task or candidate code ran here (assign's aside)
        self.exit_asked_at: float | None = None  # when the word to exit was written, once it was
        self.gone_s: float | None = None  # from the word to exit until its launcher was gone (`end`)
        self.gpu_watch = None
        self.last_clock: dict[str, float] = {}  # the last answer's parts as the worker clocked them
        self.gpu_peak_bytes = 0  # the most device memory its process tree held (NVML), known once it is closed
        try:
            layers = self._confinement(report_r)
        except confine.SandboxUnavailable:
            self.close()
            raise
        self.gpu_watch, layers["gpu_memory_cap"] = start_watch(
            device, self.policy.gpu_memory_bytes, Lineage(self.proc.pid), self.kill
        )
        # What confined this worker, by layer name: {"status": in_force|missing|not_applicable, "detail": ...}.
        self.sandbox_layers: dict[str, dict[str, str]] = {name: layer.as_dict() for name, layer in layers.items()}

    def assign(self, source_text: str) -> None:
        """Give a spare worker (started with no source) the source it will import when told to load. What its
        workspace held until now is its start's, not the judgment's: the manifest is taken again, and its
        lifetime counts from here."""
        if self.assigned:
            raise RuntimeError("this worker already has its source")
        # A new file, never through a name already there (the workspace is the worker's to write).
        fd = os.open(self.source_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as out:
            out.write(source_text)
        self._manifest_before = self.workspace.manifest()
        self.started_at = time.monotonic()
        self.assigned = True

    def received(self) -> None:
        """What the parent put in the workspace since the manifest was taken (carried caches) is not the
        worker's doing: take it again."""
        self._manifest_before = self.workspace.manifest()

    def _confinement(self, report_fd: int | None) -> dict[str, confine.Layer]:
        """The launcher's report of the layers in force; raises where the policy's required ones are not."""
        if report_fd is None:
            reason = confine.CUDA_UNCONFINED if self.policy.enabled else "the sandbox is disabled by policy"
            return confine.disabled_layers(reason)
        try:
            report = confine.read_report(report_fd, timeout_s=min(60.0, self.limits.start_timeout_s))
        finally:
            os.close(report_fd)
        layers = confine.complete(report["layers"])
        if report["error"] or confine.missing_required(layers, self.policy):
            confine.check_required(layers, self.policy, report["error"])
        return layers

    def _env(self, device: str, gpu: str | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        env["PYTHONPATH"] = worker_pythonpath()
        env.update(self.workspace.env())
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.bytecode is not None:
            env["PYTHONPYCACHEPREFIX"] = self.bytecode
        env["PYTHONUNBUFFERED"] = "1"
        # A worker's own uid has no passwd entry; getpass.getuser() (torch's cache paths) reads these first.
        env["USER"] = env["LOGNAME"] = WORKER_USER
        # Kineto leaves CUPTI attached after a profiling session unless told to tear it down: on an H200 a
        # softmax's back-to-back calls went from 7.6 to 10.8 us each after one traced call (7.1 to 7.3 with
        # teardown). The candidate worker is traced and the reference is not; without this the A/A control
        # measured 0.71x (docs/timing.md).
        env["TEARDOWN_CUPTI"] = "1"
        # torch.compile's Inductor compiles in a pool of subprocesses that outlives the call (with threads
        # to watch it): an honest `torch.compile`d kernel then shows child processes and threads still alive
        # (KJ-R010, KJ-R011; GPU MODE's pmpp sort and vectorsum solutions, docs/conformance.md). One compile
        # thread: Inductor compiles in the worker itself.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        # Line tables in every device-code build of a torch extension (nvcc appends the flag; it changes no code):
        # a compute-sanitizer report then names the source line, and the sanitized workers, which share the
        # checked worker's workspace, find its build up to date instead of compiling it again (sanitize.py).
        env["NVCC_APPEND_FLAGS"] = "-lineinfo"
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif gpu is not None:  # a batch lane's GPU: the worker sees that one only
            env["CUDA_VISIBLE_DEVICES"] = gpu
        env.update(self.extra_env)
        return env

    # ------------------------------------------------------------ ending

    def end(self) -> None:
        """Ask the worker to exit and kill what remains: once this returns, no process of the worker's runs, on
        CUDA its contexts are gone with them, and its uid may be reused. Its logs and workspace are `close`'s."""
        self.ask_exit()
        if not self.dead and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.exit_asked_at is not None and self.gone_s is None and self.proc.poll() is not None:
            self.gone_s = time.monotonic() - self.exit_asked_at
        if self.kill() is not None and self.uid is not None:  # its processes are gone: the uid may be reused
            if self.sharing is None:
                plan.release_worker_uid(self.uid)
            self.uid = None
        if self.gpu_watch is not None:
            self.gpu_watch.stop()
            self.gpu_peak_bytes = self.gpu_watch.peak_bytes

    def close(self, before_removal: Callable[[Path], None] | None = None) -> None:
        """End the worker (`end`), then file its output and remove its workspace; `before_removal` is given the
        workspace's root once the worker is gone (the compiler-cache carry: sandbox/cache_carry.py)."""
        self.end()
        self.stdout.join(timeout=5)
        self.stderr.join(timeout=5)
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            if self.workspace_changes is None:
                self.workspace_changes = diff(self._manifest_before, self.workspace.manifest())
            if before_removal is not None:
                before_removal(self.workspace.root)
        finally:
            if self.sharing is None:
                # Never raised: the record says what stayed, and the next judge's sweep (remove_stale) tries again.
                left = self.workspace.remove()
                if left and self.workspace_changes is not None:
                    self.workspace_changes = replace(self.workspace_changes, not_removed=left)
        self.channels.close()

    def logs(self) -> dict[str, Any]:
        return {
            "stdout_tail": self.stdout.text(),
            "stdout_bytes": self.stdout.total_bytes,
            "stderr_tail": self.stderr.text(),
            "stderr_bytes": self.stderr.total_bytes,
            "truncated": self.stdout.truncated or self.stderr.truncated,
            "sandbox_layers": self.sandbox_layers,
            "workspace_changes": asdict(self.workspace_changes) if self.workspace_changes is not None else None,
        }

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
