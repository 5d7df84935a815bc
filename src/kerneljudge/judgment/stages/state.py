"""What one judgment knows as it goes: the state the stages read and extend, and the record is made from.

The inputs (task, candidate, configuration, the batch lane's gate and GPU, cached baselines) and the one
source of randomness come first, then the judge's spare worker pairs, the hidden plan, the worker handles and the
verdict as it grows. What each stage learns on the way is its own typed group (`BuildFacts`, `Admission`,
`CallFacts`, `Checked`, `TimedLedger`, `TraceLog`, `PairLog`), written only by the modules `OWNERS` names, so that
which stage writes what can be seen, and a test keeps it so. What a stage returns as its result
(judgment/stages/results.py: the correctness stage's replays, sanitizer run and the trials' sets the timing pool
makes again, the timing stage's timing, the kernel traces read) is not here: judgment/pipeline.py keeps it, hands it
to the stages that need it and to the record.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kerneljudge import protocol
from kerneljudge.checks.trace import CallTrace
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import hidden_plan
from kerneljudge.judgment.gate import POOL_SETS, Gate
from kerneljudge.judgment.stages.shared_reference import SharedReference
from kerneljudge.judgment.stages.spare_pairs import SparePairs
from kerneljudge.results.verdict import Capability, Failure, Finding, TrialRecord, WorkerLog
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.confine import SandboxPolicy
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sources.candidate import Candidate
from kerneljudge.sources.task import Task
from kerneljudge.tasks.shapes import ShapeFamily
from kerneljudge.timing.sides import CachedSide

if TYPE_CHECKING:  # the stage that makes it imports this module
    from kerneljudge.judgment.stages.timing_ahead import TimingAhead


@dataclass(eq=False)
class Closing:
    """A worker pair being closed in a thread (judgment/stages/workers.close_beside): `ended` is set once its
    processes are gone (what the measuring hold waits for), the thread then files its logs and removes its
    workspaces."""

    ended: threading.Event
    thread: threading.Thread | None = None  # set as it starts
    logs: dict[str, WorkerLog] = field(default_factory=dict)
    failed: list[Exception] = field(default_factory=list)  # raised again where it is joined, as in line
    ended_s: float = 0.0  # from the thread's start until the processes were gone
    seconds: float = 0.0  # the whole close, in its thread


@dataclass
class BuildFacts:
    """What the build stage (judgment/stages/build.py) learns, and only it writes: the reference worker's hello
    (`protocol.Hello`), the device the judgment runs on, the kernels the candidate's source declares (preflight), the
    task's shape family and the integers a derived family may vary (`Derive`), and whether the task lets the candidate
    write into its inputs (INPUTS_WRITABLE). The hidden-shapes stage narrows the family where it cannot draw it."""

    hello: protocol.Hello | None = None
    device: str | None = None
    declared_kernels: list[dict[str, Any]] = field(default_factory=list)
    family: ShapeFamily | None = None  # the task's shape family, as its reference worker described it
    family_read: bool = False
    size_integers: dict[str, int] = field(default_factory=dict)
    inputs_writable: bool = False

    @property
    def gpu_memory_bytes(self) -> int:
        """The GPU's memory as the reference worker's hello said; 0 where it said none (no GPU, no hello yet)."""
        return (self.hello.gpu_memory_bytes or 0) if self.hello is not None else 0


@dataclass(eq=False)
class Admission:
    """The judgment's admission at a batch's gate (judgment/stages/build.load_reference): the task's one-call
    footprint as the reference read it, the input sets the timing pool can hold, whether both worker pairs fit the
    GPU side by side (None until the footprint was read), the device memory reserved and held until the end, and per
    worker the most device memory it held (NVML; judgment/stages/workers.py), which the reservation is checked
    against."""

    held: ExitStack = field(default_factory=ExitStack)
    reserved_bytes: int = 0  # 0 where none was reserved
    admitted: bool = False  # once, whatever it reserved
    pool_sets: int = POOL_SETS  # fewer where that many would not fit
    ahead_fits: bool | None = None
    footprint: dict[str, Any] | None = None
    memory_peaks: dict[str, int] = field(default_factory=dict)


@dataclass
class CallFacts:
    """What a call of both sides leaves for the next (judgment/stages/calls.py, reference_replay.py, replays.py, and
    the timing stage for the outputs' signature at each timing shape): the random state both sides' calls start
    from, the reference output's signature (dtype and shape of each item) at the current shape, the tolerances
    and the oracle's dtype, whether the task checks outputs itself and whether its reference draws random numbers,
    the reference's own evidence and its replay from another random state, and the last comparison's screen,
    task check and digests."""

    call_seed: int | None = None
    signature: dict[str, Any] = field(default_factory=dict)
    tolerances: dict[str, Any] = field(default_factory=dict)
    oracle_dtype: str | None = None
    task_check: bool = False  # a GPU MODE problem's check_implementation
    draws_random: bool = False
    reference_evidence: Any = None
    reference_rerun: list[Any] | None = None  # per output
    trial_screen: list[Any] | None = None  # the last trial's screen of the oracle's outputs
    last_task_check: dict[str, Any] | None = None
    last_digests: list[Any] | None = None  # of a timed output as the reference's worker received it


@dataclass
class Checked:
    """What the correctness trials checked (judgment/stages/trials.py): each trial's record, and the hidden shapes
    the candidate was right at (where compute-sanitizer runs the smallest)."""

    trials: list[TrialRecord] = field(default_factory=list)
    shapes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TimedLedger:
    """What the timing stage's measured calls leave (judgment/stages/timed_calls.py, timing.py): the timed outputs
    checked, each side's spans of its measured requests on the parent's clock (judgment/stages/untimed_work.py, by
    span, each (ms, the calls per sample)), the kept outputs not yet checked (each its pool set and committed
    digests), each kept call (sample, call, set), and per measured candidate sample the work its end missed and
    what its events timed (ms)."""

    checks: int = 0
    untimed_spans: dict[str, dict[str, list[tuple[float, int]]]] = field(default_factory=dict)
    deferred_checks: list[tuple[int, list[Any]]] = field(default_factory=list)
    kept_calls: list[dict[str, int]] = field(default_factory=list)
    drain_left: list[float] = field(default_factory=list)
    drain_timed_ms: list[float] = field(default_factory=list)


@dataclass
class TraceLog:
    """The kernel traces of traced calls as they come back (judgment/stages/integrity.py), read at the end into the
    record's `kernel_trace`; and the calls whose trace could not be read."""

    calls: list[CallTrace] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class PairLog:
    """The fresh worker pairs started for timing (judgment/stages/timing_pair.py; a second after a failed graph
    capture), what the compiler-cache carry took to the timing worker, and where each pair came from
    (judgment/stages/workers.new_pair: started, a spare, or the group's reference lent)."""

    started: int = 0
    carried: dict[str, Any] | None = None
    checked_from: str = "started"
    timing_from: list[str] = field(default_factory=list)


# Which modules of judgment/ may write each group of `JudgmentState` (tests/judgment/test_state_ownership.py reads
# every assignment and mutating call): a group is its stage's own, the others only read it.
OWNERS: dict[str, tuple[str, ...]] = {
    "build": ("build", "hidden_shapes"),
    "admission": ("build", "workers", "pipeline"),
    "calls": ("calls", "reference_replay", "replays", "timed_calls", "timing", "timing_ahead"),
    "checked": ("trials", "correctness"),
    "timed": ("timed_calls", "timing"),
    "trace_log": ("integrity",),
    "pair_log": ("timing_pair", "workers"),
}


def worker_limits(config: JudgeConfig) -> WorkerLimits:
    """The limits a judgment's workers run under, from its configuration."""
    return WorkerLimits(
        step_timeout_s=config.timeout_s,
        lifetime_s=max(1800.0, 20 * config.timeout_s),
        log_cap_bytes=config.log_cap_bytes,
        max_message_bytes=config.max_message_bytes,
    )


@dataclass(eq=False)
class JudgmentState:
    """One judgment's state: its inputs, the one source of randomness, the hidden plan, the worker handles, the
    verdict as it grows (failure, findings, capabilities), the stage clock, and each stage's own typed facts, written
    only by the modules `OWNERS` names. `source` is the one source of everything a candidate must not predict: the
    hidden plan (judgment/hidden_plan.py) and, as the timing stage draws them, its pools' seeds and the calls whose
    outputs are kept and checked; the operating system's randomness unless a test injects a source."""

    task: Task
    candidate: Candidate
    config: JudgeConfig
    progress: Callable[[str], None]
    gpu: str | None  # the GPU the workers see (CUDA_VISIBLE_DEVICES), for a batch lane; None: as inherited
    gate: Gate
    # Cached baselines (a batch's `--cached-baselines`): the task's reference, and its compiled form when
    # measured, timed once on this device; used instead of timing them here, where the regime matches.
    baselines: dict[str, CachedSide]
    source: random.Random
    limits: WorkerLimits = field(init=False)
    sandbox: SandboxPolicy = field(init=False)
    spares: SparePairs | None = None  # worker pairs started ahead, for a judge that keeps them (spare_pairs.py)
    # The reference worker of a group's checked pairs, lent to this judgment (shared_reference.py); None: its own.
    shared: SharedReference | None = None
    plan: hidden_plan.HiddenPlan | None = None  # drawn as correctness starts
    # The worker handles: the pair at work, the timing pair started early, a pair being closed in a thread
    # (judgment/stages/workers.close_beside), the logs of the checked pair once replaced, and the timing pair made
    # ready ahead, in a thread (judgment/stages/timing_ahead.TimingAhead).
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    booting: dict[str, WorkerProcess] = field(default_factory=dict)
    closing: Closing | None = None
    closed_logs: dict[str, WorkerLog] = field(default_factory=dict)
    ahead: TimingAhead | None = None
    # The verdict as it grows.
    failure: Failure | None = None
    findings: list[Finding] = field(default_factory=list)
    capabilities: dict[str, Capability] = field(default_factory=dict)
    # Where trials' inputs are made (worker/correctness/seeded.py): again in the candidate's worker from each trial's
    # seed in the hardened modes, until it cannot make the reference's; shipped from the reference's else.
    inputs: dict[str, Any] = field(init=False)
    stages_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage: waiting, build, ...
    stage: str | None = None  # the stage `workers.clocked` is in: its requests' round trips count under it
    # Each stage's own facts (OWNERS).
    build: BuildFacts = field(default_factory=BuildFacts)
    admission: Admission = field(default_factory=Admission)
    calls: CallFacts = field(default_factory=CallFacts)
    checked: Checked = field(default_factory=Checked)
    timed: TimedLedger = field(default_factory=TimedLedger)
    trace_log: TraceLog = field(default_factory=TraceLog)
    pair_log: PairLog = field(default_factory=PairLog)
    # Findings come from two threads where the timing pair is made ready beside the trials (timing_ahead.py).
    findings_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        config = self.config
        self.limits = worker_limits(config)
        self.sandbox = confine.policy_for(config.sandbox)
        self.inputs = {"made": "reference worker" if self.native else "each worker"}

    @property
    def native(self) -> bool:
        """KernelBench's own evaluation (`--mode off`, judgment/stages/native.py): none of the hardened stages' work."""
        return self.config.native

    @property
    def readies_triton(self) -> bool:
        """Whether the candidate's worker readies Triton as it starts (worker/prepare.py): its source declares a
        Triton kernel (preflight), off the CPU as far as is known (the device settled, else the one asked;
        a worker of "auto" tells for itself)."""
        triton = any(d.get("kind") == "triton" for d in self.build.declared_kernels)
        return triton and (self.build.device or self.config.device) != "cpu"

    def add_findings(self, findings: list[Finding]) -> None:
        """Record findings, one per code: a repeat only counts its occurrences."""
        with self.findings_lock:
            for new in findings:
                old = next((f for f in self.findings if f.code == new.code), None)
                if old is None:
                    self.findings.append(new)
                else:
                    old.evidence["repeats"] = int(old.evidence.get("repeats", 0)) + 1
                    if new.severity == "error" and old.severity != "error":
                        old.severity = "error"

    @property
    def readies_ahead(self) -> bool:
        """Whether the timing pair is to be made ready while correctness runs (judgment/stages/timing_ahead.py): asked
        for, timed, hardened (KernelBench's `off` keeps its own order; the carry, which needs the checked workspace
        whole first, is refused with it by JudgeConfig)."""
        return self.config.timing and self.config.timing_ahead and not self.native

    def inputs_made(self, shape: dict[str, Any] | None = None) -> bool:
        """Whether the candidate's worker makes this trial's inputs itself (worker/correctness/seeded.py): in the
        hardened modes, at the public shape (a hidden shape's inputs are shipped), until it could not."""
        return not self.native and shape is None and "shipped" not in self.inputs

    def unsupported(self) -> bool:
        """A capability the judgment requires is unavailable here."""
        return any(c.required and c.status == "unavailable" for c in self.capabilities.values())
