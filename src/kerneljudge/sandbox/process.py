"""Starting, talking to and killing one worker process.

A worker is a fresh interpreter (fork+exec through subprocess, never a fork of
the parent and never multiprocessing, which would pickle), in its own session
and process group, with its own workspace as cwd, HOME and cache directories.
Its stdout and stderr are drained by the parent into capped buffers so a flood
can neither block the worker nor fill the parent's memory. Requests and
responses travel over two dedicated pipes in the wire format.

The worker's argv is wrapped in the sandbox launcher (sandbox/confine.py,
sandbox/enter.py); `sandbox_layers` says which layers were in force, and
`workspace_changes` what the worker left in its workspace.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kerneljudge import protocol
from kerneljudge.sandbox import bytecode, confine, lifeline, plan
from kerneljudge.sandbox.confine import MULTICAST_OFF_ENV, SandboxPolicy
from kerneljudge.sandbox.gpu_memory import start_watch
from kerneljudge.sandbox.workspace import Workspace, WorkspaceChanges, diff
from kerneljudge.worker import channel, wire

WORKER_USER = "kerneljudge-worker"
# How long a worker whose pipe broke is given to finish exiting before it is killed: its launcher passes its
# exit status on within milliseconds, and a status read after the judge's own kill would say SIGKILL.
EXIT_GRACE_S = 2.0
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b:?")

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
    "NVIDIA_DRIVER_CAPABILITIES",
    *MULTICAST_OFF_ENV,
    "OMP_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "TRITON_PTXAS_PATH",
)


@dataclass(frozen=True)
class WorkerLimits:
    step_timeout_s: float = 180.0
    start_timeout_s: float = 300.0
    lifetime_s: float = 1800.0
    log_cap_bytes: int = 64 * 1024
    # The capacity of each shared-memory channel (sparse: it costs memory only as far as written). KernelBench's
    # level 1 has 16 GiB inputs, and a timing pool holds three input sets.
    max_message_bytes: int = 64 * 1024**3


class WorkerFailure(Exception):
    """The worker could not answer: it timed out, died, or broke the protocol."""

    kind = "crash"

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class WorkerTimeout(WorkerFailure):
    kind = "timeout"


class WorkerCrashed(WorkerFailure):
    kind = "crash"


class WorkerProtocolError(WorkerFailure):
    kind = "crash"


class WorkerOversized(WorkerFailure):
    """The worker announced a message larger than the output it could legitimately send."""

    kind = "shape_mismatch"


class WorkerChannels:
    """The parent's read-write endpoints of one worker's two channels, `<role>_in` and `<role>_out`
    (worker/channel.py); a reference worker is also handed the candidate's, as its peer."""

    def __init__(self, role: str, capacity_bytes: int) -> None:
        self.role = role
        self.inbox = channel.create(f"{role}_in", capacity_bytes)
        self.outbox = channel.create(f"{role}_out", capacity_bytes)
        self.access = channel.Channels([self.inbox, self.outbox])

    def close(self) -> None:
        self.access.close()

    def duplicate(self) -> WorkerChannels:
        """The same two channels through descriptors of their own, closed with the copy and not with these:
        the view of the candidate's channels that its sanitized workers get (sanitize.py)."""
        copy = object.__new__(WorkerChannels)
        copy.role = self.role
        copy.inbox, copy.outbox = (
            channel.Endpoint(e.name, os.dup(e.fd), e.writable, e.capacity_bytes) for e in (self.inbox, self.outbox)
        )
        copy.access = channel.Channels([copy.inbox, copy.outbox])
        return copy


class StreamCapture(threading.Thread):
    """Drains a pipe, keeping the first and last cap/2 bytes and counting the rest."""

    def __init__(self, stream: Any, cap_bytes: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.half = cap_bytes // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total_bytes = 0
        self.start()

    def run(self) -> None:
        fd = self.stream.fileno()
        while chunk := os.read(fd, 65536):
            self.total_bytes += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                del self.tail[: max(0, len(self.tail) - self.half)]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        middle = f"\n[... {self.total_bytes - kept} bytes dropped ...]\n" if self.total_bytes > kept else ""
        return self.head.decode(errors="replace") + middle + self.tail.decode(errors="replace")

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.head) + len(self.tail)


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid, read from /proc (empty where /proc is absent)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


CLOCK_PARTS = 8  # a worker's report of where a request's time went: at most this many parts, known names only
CLOCK_NAMES = frozenset({"read", "write", "inputs", "place", "reference", "compare", "task_check", "call", "evidence"})


def clock_parts(reported: Any) -> dict[str, float]:
    """The parts of a round trip as the worker clocked them (worker/base.py), kept only where they are plain
    seconds with a known name: a figure for where the time went, never evidence (a candidate's worker could
    report anything)."""
    if not isinstance(reported, dict) or len(reported) > CLOCK_PARTS:
        return {}
    return {
        k: float(v) for k, v in reported.items() if k in CLOCK_NAMES and type(v) in (int, float) and 0.0 <= v < 86400.0
    }


class WorkerProcess:
    """One worker: spawn, request/response, capped logs, kill of its whole process group.

    `policy` defaults to `confine.DEFAULT_POLICY`; with `require` set, a missing layer raises
    `SandboxUnavailable` here and no worker runs. `prefix` runs the interpreter under another program inside
    the sandbox (compute-sanitizer, sanitize.py), with `extra_env` added to its environment.
    """

    def __init__(
        self,
        role: str,
        device: str,
        source_text: str,
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
        source_path = self.workspace.write_source(f"{role}.py", source_text)
        self._manifest_before = self.workspace.manifest()
        self.workspace_changes: WorkspaceChanges | None = None  # known once closed
        self.started_at = time.monotonic()
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
            str(source_path),
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
        self.exit_asked = False
        self.gpu_watch = None
        self.last_clock: dict[str, float] = {}  # the last answer's parts as the worker clocked them
        self.gpu_peak_bytes = 0  # the most device memory its process tree held (NVML), known once it is closed
        try:
            layers = self._confinement(report_r)
        except confine.SandboxUnavailable:
            self.close()
            raise
        self.gpu_watch, layers["gpu_memory_cap"] = start_watch(
            device, self.policy.gpu_memory_bytes, lambda: {self.proc.pid, *descendants(self.proc.pid)}, self.kill
        )
        # What confined this worker, by layer name: {"status": in_force|missing|not_applicable, "detail": ...}.
        self.sandbox_layers: dict[str, dict[str, str]] = {name: layer.as_dict() for name, layer in layers.items()}

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
        package_root = str(Path(__file__).resolve().parents[2])
        paths = [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
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

    # ------------------------------------------------------------ talking

    def receive(self, timeout_s: float | None = None) -> dict[str, Any]:
        deadline = self._deadline(timeout_s)
        try:
            return wire.read_frame(self._resp_r, deadline)
        except wire.PeerTimeout:
            self.kill()
            raise WorkerTimeout(f"the {self.role} worker gave no answer within its time limit") from None
        except wire.FrameTooLarge as exc:
            self.kill()
            raise WorkerOversized(f"the {self.role} worker sent an oversized message: {exc}") from None
        except wire.PeerClosed:
            returncode, by_itself = self._ended()
            raise WorkerCrashed(self._died(returncode, by_itself), returncode) from None
        except wire.WireError as exc:
            returncode = self.kill()
            raise WorkerProtocolError(f"the {self.role} worker broke the protocol: {exc}", returncode) from None

    def request(
        self,
        request: protocol.Request,
        values: Any = None,
        max_bytes: int | None = None,
        timeout_s: float | None = None,
        placed: tuple[Any, dict[str, Any]] | None = None,
        fetch: tuple[str, ...] = ("values", "inputs", "init_inputs", "captured"),
    ) -> tuple[dict[str, Any], Any]:
        """Send one request (kerneljudge.protocol) and return the response header and the values it names
        under `fetch`, read from the worker's channel (at most `max_bytes` of tensors, else WorkerOversized).

        `values` are written to the worker's inbox; `placed` is (tree, descriptions) of values already
        there (a trial's inputs the reference worker wrote for the candidate).
        """
        inbox = self.channels.inbox.name
        tree, described = placed if placed is not None else self.channels.access.put(inbox, values or [])
        try:
            frame = {**request.header(), "args": tree, "tensors": described}
            wire.write_frame(self._req_w, frame, self._deadline(timeout_s))
        except wire.PeerTimeout:
            self.kill()
            raise WorkerTimeout(f"the {self.role} worker stopped reading its requests") from None
        except wire.WireError:
            returncode, by_itself = self._ended()
            raise WorkerCrashed(self._died(returncode, by_itself), returncode) from None
        response = self.receive(timeout_s)
        self.last_clock = clock_parts(response.get("clock_s") if isinstance(response, dict) else None)
        try:
            protocol.check_response(request, response)
        except protocol.ProtocolError as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker broke protocol: {exc}") from None
        keys = [k for k in fetch if k in response]
        self.described(response, keys, max_bytes)
        try:
            unpacked = {k: self.channels.access.get(response[k], response.get("tensors"), "cpu") for k in keys}
        except (wire.WireError, channel.ChannelError) as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker sent malformed values: {exc}") from None
        return response, unpacked

    def described(self, response: dict[str, Any], keys: list[str], max_bytes: int | None = None) -> int:
        """Check that the tensors the response names under `keys` lie in this worker's outbox and add up to at
        most `max_bytes`; their byte count. A worker that breaks this is killed (WorkerOversized, or a
        protocol error)."""
        descriptions = response.get("tensors") or {}
        try:
            names = set().union(*(wire.tensor_names(response[k]) for k in keys if k in response))
            if not isinstance(descriptions, dict) or names - set(descriptions):
                raise channel.ChannelError("a value refers to an undescribed tensor")
            total = 0
            for name in names:
                if descriptions[name].get("channel") != self.channels.outbox.name:
                    raise channel.ChannelError(f"tensor {name!r} does not lie in {self.channels.outbox.name}")
                total += self.channels.access.check(descriptions[name])[4]
        except (channel.ChannelError, AttributeError) as exc:
            self.kill()
            raise WorkerProtocolError(f"the {self.role} worker described its tensors wrongly: {exc}") from None
        if max_bytes is not None and total > max_bytes:
            self.kill()
            raise WorkerOversized(
                f"the {self.role} worker sent an oversized message: {total} bytes of tensors, "
                f"where at most {max_bytes} could be legitimate"
            )
        return total

    def _deadline(self, timeout_s: float | None) -> float:
        now = time.monotonic()
        step = timeout_s if timeout_s is not None else self.limits.step_timeout_s
        return min(now + step, self.started_at + self.limits.lifetime_s)

    def _ended(self) -> tuple[int | None, bool]:
        """After its pipe broke: the worker's exit status, and whether it ended by itself. It is given a moment
        to finish exiting (the launcher passes its status on) before the judge kills what is left; a status
        read after that kill is the judge's SIGKILL, not the worker's own end."""
        if not self.dead:
            try:
                returncode = self.proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                return self.kill(), False
            self.kill()  # its session may still hold processes it started
            return returncode, True
        return self.kill(), False

    def _died(self, returncode: int | None, by_itself: bool = True) -> str:
        """Why the worker died: the last exception line it wrote to stderr (a traceback's last line; CUDA's
        errors trail several lines of advice after it), else its last line."""
        if self.gpu_watch is not None and self.gpu_watch.reason():
            return f"the {self.role} worker was killed: it {self.gpu_watch.reason()}"
        self.stderr.join(timeout=2)
        lines = [line.strip() for line in self.stderr.text().splitlines() if line.strip()]
        raised = [line for line in lines if EXCEPTION_LINE.match(line)]
        cause = f": {(raised or lines)[-1][:300]}" if lines else ""
        if not by_itself:
            return f"the {self.role} worker closed its pipe without exiting and was killed by the judge{cause}"
        if returncode is not None and returncode >= 0:
            status = describe_returncode(returncode)
            return f"the {self.role} worker exited by itself ({status}) before answering{cause}"
        return f"the {self.role} worker died ({describe_returncode(returncode)}){cause}"

    # ------------------------------------------------------------ ending

    def kill(self) -> int | None:
        """Kill the worker's process group and every descendant; return its exit status."""
        if not self.dead:
            self.dead = True
            stragglers = descendants(self.proc.pid)
            for pid in [self.proc.pid, *stragglers]:
                try:
                    os.killpg(pid, signal.SIGKILL) if pid == self.proc.pid else os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return None

    def ask_exit(self) -> None:
        """Ask the worker to exit without waiting for it: workers asked together end together."""
        if not self.dead and not self.exit_asked and self.proc.poll() is None:
            self.exit_asked = True
            try:
                wire.write_frame(self._req_w, protocol.Exit().header(), time.monotonic() + 1.0)
            except wire.WireError:
                pass

    def close(self) -> None:
        """Ask the worker to exit, kill what remains, and remove its workspace."""
        self.ask_exit()
        if not self.dead and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.kill() is not None and self.uid is not None:  # its processes are gone: the uid may be reused
            if self.sharing is None:
                plan.release_worker_uid(self.uid)
            self.uid = None
        if self.gpu_watch is not None:
            self.gpu_watch.stop()
            self.gpu_peak_bytes = self.gpu_watch.peak_bytes
        self.stdout.join(timeout=5)
        self.stderr.join(timeout=5)
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.workspace_changes is None:
            self.workspace_changes = diff(self._manifest_before, self.workspace.manifest())
        if self.sharing is None:
            self.workspace.remove()
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


def describe_returncode(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"
