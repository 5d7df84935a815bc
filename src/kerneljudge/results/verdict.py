"""The verdict record: findings, capabilities, status, and the JSON record itself.

The record is the source of truth; every view is rendered from it. Its JSON
Schema is generated from these models and published in docs/schema/; tests
validate every record against the published file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"

Status = Literal["PASS", "FAIL", "SUSPICIOUS", "UNSUPPORTED", "ERROR"]
FailureKind = Literal[
    "compile_error",
    "runtime_error",
    "timeout",
    "crash",
    "output_type",
    "shape_mismatch",
    "dtype_mismatch",
    "device_mismatch",
    "non_finite",
    "tolerance",
    "shape_refused",
    "nondeterministic",
    "race",
    "memory_error",
    "integrity_violation",
    "judge_error",
]
Severity = Literal["info", "warning", "error"]
CapabilityStatus = Literal["available", "unavailable", "degraded"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Finding(Model):
    code: str
    detector: str
    severity: Severity
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    remediation: str = ""


class Capability(Model):
    status: CapabilityStatus
    required: bool
    detail: str = ""


class Failure(Model):
    kind: FailureKind
    phase: str
    summary: str
    exception: str | None = None
    traceback: str | None = None


class Identity(Model):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: str
    path: str | None = None
    extracted_from_response: bool = False


class TrialRecord(Model):
    index: int
    kind: Literal["public", "hidden", "shape"]
    seed: int
    passed: bool
    failure_kind: FailureKind | None = None
    summary: str
    outputs: list[dict[str, Any]] = Field(default_factory=list)
    distribution: dict[str, Any] | None = None  # how the hidden trial's inputs were reshaped (H11)
    shape: dict[str, Any] | None = None  # a shape trial's hidden shape: the task globals it set, and their values
    task_check: dict[str, Any] | None = None  # the task's own check of the output (GPU MODE): passed, message


class Correctness(Model):
    checked: bool
    passed: bool
    method: Literal["oracle", "kernelbench_native"]
    oracle_dtype: str | None = None
    tolerance: dict[str, Any] = Field(default_factory=dict)
    trials: list[TrialRecord] = Field(default_factory=list)
    replay: dict[str, Any] | None = None
    worst: dict[str, Any] | None = None
    # The task's shape family (form, size, the globals it varies, the public shape); None if it declares none
    shape_family: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = (
        None  # where trials' inputs were made (worker/correctness/seeded.py), and why shipped
    )
    # compute-sanitizer's run on one call (sanitize.py): why it ran, the shape, each tool's outcome; None if not
    sanitizer: dict[str, Any] | None = None
    # The hidden plan (plan.py): trials' seeds and distributions, replays, the canary, the traced trials, the
    # shape trials' seeds; None where correctness did not start
    plan: dict[str, Any] | None = None


class TimingStats(Model):
    median_ms: float
    p95_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    cv: float
    count: int
    samples_ms: list[float]


class Timing(Model):
    measured: bool
    reason: str | None = None
    device: str | None = None
    method: str | None = None
    launch_regime: str | None = None  # busy_precursor, back_to_back, cuda_graph, host_clock, single_call, do_bench
    graph_fallback: str | None = None  # why the cuda_graph regime fell back to busy_precursor, when it did
    regime: str | None = None  # the regime in words, with the cache state
    calls_per_sample: dict[str, int] = Field(default_factory=dict)
    precursor_ms: dict[str, float] = Field(default_factory=dict)  # GPU-busy precursor per side (busy_precursor)
    host_bound_samples: dict[str, int] = Field(default_factory=dict)  # samples whose issue outlasted the precursor
    host_ms_per_call: dict[str, float] = Field(default_factory=dict)  # median host time to issue one call
    candidate: TimingStats | None = None
    reference: TimingStats | None = None
    block_ratios: list[float] = Field(default_factory=list)
    speedup: float | None = None
    speedup_interval: list[float] | None = None  # [low, high] percentile bootstrap of the median log ratio
    interval_level: float | None = None
    speedup_rse: float | None = None  # relative standard error of the speedup
    stop_reason: str | None = None  # precision_reached, max_blocks, time_budget, native_trials
    clock_check: dict[str, Any] | None = None  # the candidate's claimed time against the parent's clock
    trace_check: dict[str, Any] | None = None  # the timed calls' device time against the traced calls' kernels
    # Each side's time beyond what its calls claim, on the parent's clock, in its commits and around its samples,
    # the candidate's against the bound the reference's set (judgment/stages/untimed_work.py), by span
    untimed_work: dict[str, dict[str, Any]] | None = None
    timed_outputs_checked: int = 0  # timed calls whose output was checked against the oracle
    graph_rechecks: int = 0  # of those, plain calls on the candidate's graph buffers after its replays
    # The timed calls whose outputs were kept for those checks, each named after its sample ran
    # (judgment/stages/kept_call.py):
    # the sample of its request, the call within the sample, the timing pool's input set it used.
    kept_calls: list[dict[str, int]] = Field(default_factory=list)
    parent_observed_ms: dict[str, float] = Field(default_factory=dict)
    l2_flush_bytes: int | None = None  # bytes overwritten before every sample (0: warm cache)
    persisting_l2_reset: dict[str, bool | None] = Field(default_factory=dict)  # per side, before its samples
    clocks: dict[str, Any] | None = None  # the device's clocks around the blocks; throttled blocks left out
    compiled: TimingStats | None = None  # the reference under torch.compile, when measured
    speedup_vs_compile: float | None = None
    speedup_vs_compile_interval: list[float] | None = None
    compile_error: str | None = None  # why the torch.compile baseline is missing, when it was asked for
    # "paired" (timed in this judgment, block by block with the candidate) or, with cached baselines, where
    # the reference's figures come from; None for the compatibility methods and untimed records
    reference_source: str | None = None
    # Timing shapes (TIMING_SHAPES): each shape's own speedup, interval and medians; the figures above are then
    # their geometric mean (docs/tasks.md)
    shapes: list[dict[str, Any]] = Field(default_factory=list)
    # How much of the timing stage the device spent on the timed calls: their own time on both sides (device
    # time on CUDA, host time on the CPU; calibration, warm-up, flushes and precursors not counted) summed over
    # the timing shapes, and that over the stage's wall time (`stages_s["timing"]`: the fresh pair's start
    # included, waiting at the gate not). Sides taken from cached baselines count for nothing. The candidate's
    # side is its worker's claimed time, which the clock check holds against the parent's clock (clock_check).
    timed_busy_s: float | None = None
    busy_fraction: float | None = None
    # With `timing_carry`: the candidate's compiler caches copied from its checked worker to its timing worker
    # (files, bytes, entries left behind, why none were, seconds; sandbox/cache_carry.py)
    carried_caches: dict[str, Any] | None = None
    # With `timing_ahead`: whether the timing pair was made ready while correctness ran (loaded; its pool staged
    # and which sides' first calls made), in how many seconds of its thread, or why not
    # (judgment/stages/timing_ahead.py)
    ahead: dict[str, Any] | None = None


class Reward(Model):
    spec: str
    value: float | None
    reason: str
    components: dict[str, float] = Field(default_factory=dict)

    def __str__(self) -> str:
        """The value first, as `print(record.reward(spec))` shows it: `-1 (not verified)`; the number is `.value`."""
        return f"{'None' if self.value is None else format(self.value, '.4g')} ({self.reason})"


class WorkerLog(Model):
    stdout_tail: str
    stdout_bytes: int
    stderr_tail: str
    stderr_bytes: int
    truncated: bool
    # The OS sandbox layers around this worker: name -> {"status": in_force|missing|not_applicable, "detail"}
    sandbox_layers: dict[str, dict[str, str]] = Field(default_factory=dict)
    # What the worker left in its workspace (sandbox/workspace.WorkspaceChanges): created, modified and deleted
    # paths (relative, escaped: sandbox/tree.shown), truncated, the walk's bound past which it stopped (KJ-R070)
    # and its counts, and what its removal left
    workspace_changes: dict[str, Any] | None = None


class GroupPlace(Model):
    """A judgment's place in a group of candidates of one task judged together (judgment/group.py)."""

    id: str  # the group's id: random, one per group
    index: int  # the candidate's place in the group, from 0
    size: int  # the candidates in the group


class WorkerPairs(Model):
    """Where a judgment's worker pairs came from: started for it, a spare started ahead (`--spare-workers`), or,
    for the checked pair of a judgment in a group, the group's reference worker lent with a fresh candidate worker;
    the timing pairs (one, or two after a failed graph capture) are always fresh to it, started or spare."""

    checked: Literal["started", "spare", "group"] = "started"
    timing: list[Literal["started", "spare"]] = Field(default_factory=list)
    group: GroupPlace | None = None


class Record(Model):
    schema_version: Literal["1.0"] = SCHEMA_VERSION
    kerneljudge_version: str
    created_at: str
    task: Identity
    candidate: Identity
    config: dict[str, Any]
    device: str | None
    status: Status
    verified: bool
    valid: bool
    failure_kind: FailureKind | None = None
    failure: Failure | None = None
    findings: list[Finding] = Field(default_factory=list)
    capabilities: dict[str, Capability] = Field(default_factory=dict)
    preflight: dict[str, Any] = Field(default_factory=dict)
    kernel_trace: dict[str, Any] | None = None
    correctness: Correctness
    timing: Timing
    rewards: list[Reward] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    logs: dict[str, WorkerLog] = Field(default_factory=dict)
    workers: WorkerPairs = Field(default_factory=WorkerPairs)
    duration_s: float
    # Wall seconds per stage: waiting (for a batch's other lanes), build, correctness (shape trials included)
    # and timing (its fresh worker pair included)
    stages_s: dict[str, float] = Field(default_factory=dict)

    def reward(self, spec: str) -> Reward:
        """The reward under `spec` (docs/reward.md): a `Reward`, whose `.value` is the number (None where the
        record earns none: an ERROR or UNSUPPORTED record), with `.reason` and `.components`; printed, it shows
        the value and the reason. A record written before the spec existed has it computed from the record now.
        An unknown spec raises `kerneljudge.results.reward.UnknownRewardSpec` (a ValueError naming the known ones).
        """
        from kerneljudge.results.reward import REWARD_SPECS, UnknownRewardSpec, rewards_for  # reward imports this

        if spec not in REWARD_SPECS:
            raise UnknownRewardSpec(spec)
        kept = next((r for r in self.rewards if r.spec == spec), None)
        return kept if kept is not None else next(r for r in rewards_for(self) if r.spec == spec)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def decide_status(failure: Failure | None, findings: list[Finding], capabilities: dict[str, Capability]) -> Status:
    """Status from the evidence; precedence: judge failure, failure or error finding, missing capability, warning.

    A proven failure stands even where a capability is missing: the missing
    capability could only have found more wrong, never made the candidate right.
    """
    if failure is not None and failure.kind == "judge_error":
        return "ERROR"
    if failure is not None or any(f.severity == "error" for f in findings):
        return "FAIL"
    if any(c.required and c.status == "unavailable" for c in capabilities.values()):
        return "UNSUPPORTED"
    if any(f.severity == "warning" for f in findings):
        return "SUSPICIOUS"
    return "PASS"


def record_json_schema() -> dict[str, Any]:
    schema = Record.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"urn:kerneljudge:record:{SCHEMA_VERSION}"
    return schema
