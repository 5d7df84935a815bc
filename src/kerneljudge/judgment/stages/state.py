"""What one judgment knows as it goes: the state the stages read and extend, and the record is made from.

The inputs (task, candidate, configuration, the batch lane's gate and GPU, cached baselines) and the one
source of randomness come first, then the judge's spare worker pairs where it keeps them; everything after
them starts empty and is filled by the stages in order. What a stage returns as its own result
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

from kerneljudge.checks.trace import CallTrace
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import hidden_plan
from kerneljudge.judgment.gate import POOL_SETS, Gate
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


@dataclass(eq=False)
class JudgmentState:
    """One judgment's state. `source` is the one source of everything a candidate must not predict: the hidden
    plan (judgment/hidden_plan.py) and, as the timing stage draws them, its pools' seeds and the calls whose outputs
    are kept and checked; the operating system's randomness unless a test injects a source."""

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
    plan: hidden_plan.HiddenPlan | None = None  # drawn as correctness starts
    held: ExitStack = field(default_factory=ExitStack)  # the device memory reserved at the gate, until the end
    reserved_bytes: int = 0  # device memory reserved at the gate (gate.memory_need), 0 when none was
    footprint: dict[str, Any] | None = None  # the task's one-call footprint, where the reference read it
    admitted: bool = False  # the gate has admitted the judgment (once, whatever it reserved)
    pool_sets: int = POOL_SETS  # input sets in the timing pool: fewer where that many would not fit
    memory_peaks: dict[str, int] = field(default_factory=dict)  # per worker, the most device memory it held (NVML)
    failure: Failure | None = None
    findings: list[Finding] = field(default_factory=list)
    capabilities: dict[str, Capability] = field(default_factory=dict)
    trials: list[TrialRecord] = field(default_factory=list)
    checked_shapes: list[dict[str, Any]] = field(default_factory=list)  # hidden shapes the candidate was right at
    oracle_dtype: str | None = None
    device: str | None = None
    hello: dict[str, Any] | None = None
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    timing_pairs: int = 0  # fresh worker pairs started for timing (a second after a failed graph capture)
    closed_logs: dict[str, WorkerLog] = field(default_factory=dict)  # logs of the checked pair, once replaced
    closing: Closing | None = None  # a pair being closed in a thread (judgment/stages/workers.close_beside)
    carried: dict[str, Any] | None = None  # what the compiler-cache carry took to the timing worker
    booting: dict[str, WorkerProcess] = field(default_factory=dict)  # the timing pair, started early
    # The timing pair made ready ahead, in a thread (judgment/stages/timing_ahead.TimingAhead), and whether the two
    # pairs fit the GPU side by side for that (gate.ahead_fits; None until the task's footprint was read)
    ahead: TimingAhead | None = None
    ahead_fits: bool | None = None
    tolerances: dict[str, Any] = field(default_factory=dict)
    # The reference output's signature (dtype and shape of each item) at the public shape.
    signature: dict[str, Any] = field(default_factory=dict)
    inputs_writable: bool = False  # the task lets the candidate write into its inputs (INPUTS_WRITABLE)
    task_check: bool = False  # the task checks outputs itself (a GPU MODE problem's check_implementation)
    call_seed: int | None = None  # the random state the current trial's calls start from, both sides
    draws_random: bool = False  # the reference draws random numbers in its forward
    reference_rerun: list[Any] | None = None  # the reference's own replay from another random state, per output
    timed_checks: int = 0
    # Each side's spans of its measured requests on the parent's clock (judgment/stages/untimed_work.py), by span
    # ("commit":
    # from `commit` to `committed`; "requests": the round trip less the claimed calls and the precursors, per
    # sample), each (ms, the calls per sample).
    untimed_spans: dict[str, dict[str, list[tuple[float, int]]]] = field(default_factory=dict)
    # The kept outputs not yet checked, in order: each its pool set and the digests committed for it.
    deferred_checks: list[tuple[int, list[Any]]] = field(default_factory=list)
    kept_calls: list[dict[str, int]] = field(default_factory=list)  # each kept timed call: sample, call, set
    drain_left: list[float] = field(default_factory=list)  # per measured candidate sample, work its end missed (ms)
    drain_timed_ms: list[float] = field(default_factory=list)  # ... and what its events timed, all its calls (ms)
    declared_kernels: list[dict[str, Any]] = field(default_factory=list)
    reference_evidence: Any = None
    trial_screen: list[Any] | None = None  # the last trial's screen of the oracle's outputs
    last_task_check: dict[str, Any] | None = None  # the task's own check of the last compared output
    last_digests: list[Any] | None = None  # the digests of a timed output as the reference's worker received it
    traced_calls: list[CallTrace] = field(default_factory=list)
    trace_problems: list[str] = field(default_factory=list)
    family: ShapeFamily | None = None  # the task's shape family, as its reference worker described it
    family_read: bool = False
    size_integers: dict[str, int] = field(default_factory=dict)  # the integers a derived family may vary (Derive)
    stages_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage: waiting, build, ...
    stage: str | None = None  # the stage `workers.clocked` is in: its requests' round trips count under it
    # Where trials' inputs are made (worker/correctness/seeded.py): again in the candidate's worker from each trial's
    # seed in the hardened modes, until it cannot make the reference's; shipped from the reference's else.
    inputs: dict[str, Any] = field(init=False)
    # Findings come from two threads where the timing pair is made ready beside the trials (timing_ahead.py).
    findings_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        config = self.config
        self.limits = WorkerLimits(
            step_timeout_s=config.timeout_s,
            lifetime_s=max(1800.0, 20 * config.timeout_s),
            log_cap_bytes=config.log_cap_bytes,
            max_message_bytes=config.max_message_bytes,
        )
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
        triton = any(d.get("kind") == "triton" for d in self.declared_kernels)
        return triton and (self.device or self.config.device) != "cpu"

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
