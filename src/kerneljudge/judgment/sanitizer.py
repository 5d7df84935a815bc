"""compute-sanitizer on one call of the candidate: finding the tool, deciding when it runs, running it.

Where NVIDIA's compute-sanitizer is on the machine, one call of the candidate runs under each of its four
tools, racecheck (shared-memory hazards), memcheck (out-of-bounds and misaligned accesses, device faults),
initcheck (reads of uninitialised device memory) and synccheck (barrier misuse), each in a candidate worker
of its own (memcheck and synccheck only for a candidate whose kernels are all Triton's: `TRITON_TOOLS`): the
same sandbox and the same worker entry as the checked one, started as `compute-sanitizer --tool X ... python
-m kerneljudge.worker.main ...`. The tools slow a call 10 to 100 times and a worker's
start several times over, so the four share one call at the smallest shape the candidate was checked at,
side by side. Their reports are read in checks/sanitizer.py; when and why is in docs/sanitizer.md.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks import sanitizer
from kerneljudge.config import JudgeConfig
from kerneljudge.results.verdict import Capability, Failure, Finding, WorkerLog
from kerneljudge.sandbox.confine import SandboxPolicy, SandboxUnavailable
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels, WorkerFailure
from kerneljudge.tasks.shapes import ShapeFamily, plain

TOOL_NAME = "compute-sanitizer"
PRINT_LIMIT = 32  # reports printed per tool; the summary still counts them all
EXIT_WAIT_S = 120.0  # for the tool's summary, printed once the worker has exited
# Every tensor in a cudaMalloc of its own, so that memcheck sees a read past a tensor's end (torch's caching
# allocator hands out slices of larger segments, where such a read is in bounds) and initcheck sees memory
# nothing wrote. Line tables in a torch extension's kernels come with every worker's builds (sandbox/process.py).
# The worker ends through the interpreter's teardown, not os._exit (worker/main.py): the tool may flush its
# reports as the CUDA context and its libraries are torn down, which os._exit skips.
SANITIZED_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "KJ_WORKER_TEARDOWN": "1", "KJ_PINNED_HEADS": "0"}
CUSTOM_CUDA_KINDS = ("cuda", "cuda_source")  # a __global__ in a source string; load_inline, cupy.RawKernel, ...
NOT_FOUND = f"{TOOL_NAME} not found (PATH, $CUDA_HOME/bin, next to nvcc, /usr/local/cuda*/bin)"


def find_sanitizer(
    env: Mapping[str, str] | None = None, system: tuple[str, ...] | None = None, torch_home: bool = True
) -> str | None:
    """compute-sanitizer's resolved path: on PATH, under $CUDA_HOME or $CUDA_PATH, in the toolkit of the nvcc
    on PATH, under /usr/local/cuda*, or under torch's CUDA home; None where there is none."""
    env = os.environ if env is None else env
    found = shutil.which(TOOL_NAME, path=env.get("PATH", ""))
    if found:
        return os.path.realpath(found)
    homes = [env.get("CUDA_HOME"), env.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    if nvcc:
        homes.append(str(Path(os.path.realpath(nvcc)).parents[1]))
    if system is None:
        system = ("/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True))
    homes += list(system)
    if torch_home:
        homes.append(_torch_cuda_home())
    for home in homes:
        for sub in ("bin", "compute-sanitizer"):
            path = Path(home, sub, TOOL_NAME) if home else None
            if path is not None and path.is_file() and os.access(path, os.X_OK):
                return os.path.realpath(path)
    return None


def _torch_cuda_home() -> str | None:
    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except Exception:  # a torch without the extension builder: nothing to learn from it
        return None
    return CUDA_HOME


@functools.lru_cache(maxsize=1)
def sanitizer_path() -> str | None:
    """The machine's compute-sanitizer, looked for once per process."""
    return find_sanitizer()


# The tools for a candidate whose only kernels are Triton's. racecheck is left out: it reports shared-memory
# hazards inside Triton's own reductions in honest kernels (triton-lang/triton#7264, butterfly shuffles; #4736,
# tl.min with tl.sum), which would fail an honest candidate as a race. initcheck is left out too: a warning under
# strict, never shown clean on Triton's kernels. memcheck's and synccheck's reports are real faults.
TRITON_TOOLS = ("memcheck", "synccheck")


@dataclass(frozen=True)
class Decision:
    run: bool
    reason: str
    capability: Capability
    path: str | None = None
    tools: tuple[str, ...] = sanitizer.TOOLS


def decide(
    config: JudgeConfig, device: str | None, declared_kernels: list[dict[str, Any]], source: str, path: str | None
) -> Decision:
    """Whether the tools run on this judgment, which, why, and the capability as the machine offers it.

    Never in `off`; in the hardened modes, under "auto", for a candidate that builds CUDA of its own (a
    `__global__` in a source string, load_inline and the other builders, cupy's raw kernels, Triton's inline
    PTX), and for one whose only kernels are Triton's under strict, or as `sanitizer_triton` says; under
    "always" for every candidate. A candidate whose only kernels are Triton's runs `TRITON_TOOLS`."""
    if device != "cuda":
        return Decision(False, "needs CUDA", Capability(status="unavailable", required=False, detail="needs CUDA"))
    if path is None:
        return Decision(False, NOT_FOUND, Capability(status="unavailable", required=False, detail=NOT_FOUND))
    kinds = {str(d.get("kind")) for d in declared_kernels}
    custom = bool(kinds & set(CUSTOM_CUDA_KINDS)) or "inline_asm" in source
    triton_only = "triton" in kinds and not custom
    asked = config.sanitizer_triton
    triton = config.strict if asked is None else asked
    tools = TRITON_TOOLS if triton_only else sanitizer.TOOLS
    if config.native:
        why = "not run in --mode off"
    elif config.sanitizer == "off":
        why = "not run: switched off (sanitizer = off)"
    elif config.sanitizer == "always" or custom or (triton_only and triton):
        if config.sanitizer == "always" or custom:
            reason = "sanitizer = always" if config.sanitizer == "always" else "custom CUDA"
        else:
            reason = "Triton kernels under strict" if asked is None else "Triton kernels (sanitizer_triton)"
        if triton_only:
            reason += f"; {' and '.join(tools)} only (racecheck reports Triton's own reductions)"
        capability = Capability(status="available", required=False, detail=f"{path}; {reason}")
        return Decision(True, reason, capability, path, tools)
    else:
        why = "not run: the candidate builds no CUDA of its own" + (
            " (its Triton kernels under strict or with sanitizer_triton)" if "triton" in kinds else ""
        )
    return Decision(False, why, Capability(status="available", required=False, detail=f"{path}; {why}"), path, tools)


def _integers(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [i for v in value for i in _integers(v)]
    return []


def smallest_shape(family: ShapeFamily | None, checked: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The smallest of the shapes the candidate was checked at and right (the public one, None, and the hidden
    ones), by the product of the integers its globals take; the public one on a tie."""
    if family is None:
        return None

    def size(shape: dict[str, Any] | None) -> int:
        product = 1
        for tree in {**family.public, **(shape or {})}.values():
            for number in _integers(plain(tree)):
                product *= max(1, abs(number))
        return product

    return min([None, *checked], key=size)


def argv_prefix(path: str, tool: str) -> list[str]:
    return [path, "--tool", tool, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no"]


@dataclass
class Lane:
    """One tool's sanitized worker through its steps; the first step that fails ends it (`problem`)."""

    tool: str
    worker: WorkerProcess | None = None
    problem: str | None = None
    began: float = field(default_factory=time.monotonic)

    def ask(self, what: str, exchange: Callable[[WorkerProcess], str | None]) -> None:
        """One step: `exchange` with the worker says what went wrong (None: it answered as expected); else the lane
        ends with the reason."""
        if self.worker is None or self.problem is not None:
            return
        try:
            wrong = exchange(self.worker)
        except WorkerFailure as exc:
            self.problem = f"{what}: {exc}"[:500]
            return
        if wrong is not None:
            self.problem = f"{what}: {wrong}"[:500]

    def end(self) -> sanitizer.ToolRun:
        """Let the worker exit (the tool prints its summary then), and read what the tool printed."""
        if self.worker is None:
            return sanitizer.ToolRun(self.tool, problem=self.problem)
        self.worker.ask_exit()
        try:
            self.worker.proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.problem = self.problem or f"the worker did not exit within {EXIT_WAIT_S:.0f} s"
        self.worker.close()
        run = sanitizer.parse(self.tool, self.worker.stdout.text())
        root = self.worker.workspace.root
        roots = tuple(dict.fromkeys((str(root), os.path.realpath(root))))
        problem = self.problem or (None if run.complete else "the tool printed no summary")
        return replace(run, problem=problem, roots=roots, seconds=round(time.monotonic() - self.began, 3))


def run_tools(
    start: Callable[[str], WorkerProcess],
    load: protocol.Load,
    init_placed: Any,
    make_inputs: Callable[[], tuple[protocol.Call, Any]],
    timeout_s: float,
    tools: tuple[str, ...] = sanitizer.TOOLS,
) -> tuple[list[sanitizer.ToolRun], dict[str, WorkerProcess]]:
    """Start a sanitized worker per tool, build the candidate in each (`load`, its init inputs already in the
    shared inbox: `init_placed`), have the reference write one trial's inputs (`make_inputs`: the call's
    header and the inputs' placement), call each once, let each exit; each tool's run and its worker."""
    lanes = [Lane(tool) for tool in tools]
    for lane in lanes:
        try:
            lane.worker = start(lane.tool)
        except (SandboxUnavailable, WorkerFailure, OSError) as exc:
            lane.problem = f"start: {exc}"[:500]

    def greet(worker: WorkerProcess) -> str | None:
        try:  # the worker's first frame, answering no request
            hello = protocol.decode_greeting(worker.receive(timeout_s=timeout_s))
        except protocol.ProtocolError as exc:
            return str(exc)
        return None if isinstance(hello, protocol.Hello) else f"{hello.exc_type}: {hello.message}"

    def build(worker: WorkerProcess) -> str | None:
        return unexpected(worker.request(load, placed=init_placed, fetch=(), timeout_s=timeout_s)[0], protocol.Loaded)

    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        try:
            list(pool.map(lambda lane: lane.ask("start", greet), lanes))
            list(pool.map(lambda lane: lane.ask("build", build), lanes))
            if any(lane.worker is not None and lane.problem is None for lane in lanes):
                try:
                    call, placed = make_inputs()
                except Exception as exc:  # the reference failed at a shape it ran before: nothing to learn
                    for lane in lanes:
                        lane.problem = lane.problem or f"the reference's inputs: {type(exc).__name__}: {exc}"[:500]
                else:

                    def once(worker: WorkerProcess) -> str | None:
                        answer = worker.request(call, placed=placed, fetch=(), timeout_s=timeout_s)[0]
                        return unexpected(answer, protocol.Output)

                    list(pool.map(lambda lane: lane.ask("call", once), lanes))
        finally:
            runs = list(pool.map(Lane.end, lanes))
    return runs, {lane.tool: lane.worker for lane in lanes if lane.worker is not None}


def unexpected(answer: protocol.Answer, expected: type[protocol.Answer]) -> str | None:
    """What a sanitized worker answered instead of an answer of the `expected` kind (its error, why it could not make
    the inputs, or the kind); None where it answered so."""
    if isinstance(answer, expected):
        return None
    if isinstance(answer, protocol.Failed):
        return f"{answer.exc_type}: {answer.message}"
    if isinstance(answer, protocol.InputsDiffer):
        return answer.detail or answer.kind
    return answer.kind


def outcome(runs: list[sanitizer.ToolRun], declared: set[str], path: str, where: str) -> Capability:
    """The capability once the tools ran: degraded where a tool's run was inconclusive."""
    tools = sanitizer.summary(runs, declared)
    unclear = [tool for tool, t in tools.items() if t["status"] == "inconclusive"]
    detail = f"{path}: " + ", ".join(f"{tool} {t['status']}" for tool, t in tools.items()) + f" on one call at {where}"
    if unclear:
        detail += f"; {unclear[0]}: {tools[unclear[0]]['problem']}"
    return Capability(status="degraded" if unclear else "available", required=False, detail=detail[:1000])


def kept_log(worker: WorkerProcess, cap_bytes: int) -> WorkerLog:
    """A sanitized worker's log for the record: its last `cap_bytes` characters of each stream (the tool's
    reports and summary come last), its sandbox layers and workspace changes."""
    logs = worker.logs()
    for key in ("stdout_tail", "stderr_tail"):
        text = logs[key]
        if len(text) > cap_bytes:
            logs[key] = f"[... {len(text) - cap_bytes} characters dropped ...]\n" + text[-cap_bytes:]
            logs["truncated"] = True
    return WorkerLog(**logs)


LOG_CAP_BYTES = 1 << 20  # a sanitized worker's capture: the tool's reports among whatever the candidate prints


def starter(
    path: str,
    source_text: str,
    limits: WorkerLimits,
    policy: SandboxPolicy,
    gpu: str | None,
    channels: WorkerChannels,
    timeout_s: float,
    sharing: WorkerProcess | None = None,
    device: str = "cuda",
) -> Callable[[str], WorkerProcess]:
    """How a tool's worker starts: the candidate worker's entry under `compute-sanitizer --tool X`, in the same
    sandbox, sharing the checked candidate's channels (through descriptors of its own), and the workspace and
    uid of the checked worker (`sharing`), with its own limits. In that workspace a torch extension the checked
    worker built is up to date: four builds of it again, side by side, took longer than a red-team run's whole
    window on an H200 (2026-12-02, judge 0.2.0)."""
    limits = replace(
        limits,
        step_timeout_s=timeout_s,
        start_timeout_s=timeout_s,
        lifetime_s=4 * timeout_s + EXIT_WAIT_S,
        log_cap_bytes=max(limits.log_cap_bytes, LOG_CAP_BYTES),
    )

    def start(tool: str) -> WorkerProcess:
        return WorkerProcess(
            "candidate",
            device,
            source_text,
            limits,
            policy,
            gpu,
            channels=channels.duplicate(),
            prefix=argv_prefix(path, tool),
            extra_env=SANITIZED_ENV,
            sharing=sharing,
        )

    return start


def conclude(
    runs: list[sanitizer.ToolRun], declared: set[str], policy: str, path: str, where: str
) -> tuple[list[Finding], dict[str, Any], Failure | None, Capability]:
    """The runs judged: findings, what the record keeps (`correctness.sanitizer`), the failure they amount to,
    and the capability."""
    found = sanitizer.findings_for(runs, declared, policy)
    kept = {"path": path, "where": where, "tools": sanitizer.summary(runs, declared)}
    return found, kept, sanitizer.failure_for(found), outcome(runs, declared, path, where)
