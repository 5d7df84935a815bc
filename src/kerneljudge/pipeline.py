"""The judge pipeline for one candidate: preflight, build, correctness, timing, verdict.

The parent orchestrates two workers: a reference worker that runs the trusted
task (inputs from seeds, reference and oracle outputs) and a candidate worker
that imports the untrusted candidate. The parent never imports either; it
compares, decides and writes the record.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NoReturn

import torch

from kerneljudge import __version__, sanitize
from kerneljudge import plan as hidden_plan
from kerneljudge.candidate import Candidate, load_candidate
from kerneljudge.checks.catalog import finding
from kerneljudge.checks.correctness import Tolerance, tolerance_for
from kerneljudge.checks.outputs import check_received, check_structure, expected_bytes, signature_items
from kerneljudge.checks.precision import precision_finding
from kerneljudge.checks.refusals import refusal_finding, refused
from kerneljudge.checks.runtime import call_findings, import_findings
from kerneljudge.checks.screening import degenerate_outputs
from kerneljudge.checks.support import unsupported_reason
from kerneljudge.checks.trace import (
    CallTrace,
    MalformedTrace,
    analyse,
    read_call,
    timed_versus_traced,
    unjoined_capture,
)
from kerneljudge.config import JudgeConfig
from kerneljudge.env import fingerprint
from kerneljudge.gate import OPEN_GATE, POOL_SETS, Gate, memory_need, timing_pool_sets
from kerneljudge.preflight import preflight
from kerneljudge.reward import rewards_for
from kerneljudge.sandbox import confine
from kerneljudge.sandbox.confine import LAYERS, SandboxPolicy, SandboxUnavailable
from kerneljudge.sandbox.process import WorkerChannels, WorkerFailure, WorkerLimits, WorkerProcess
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_task
from kerneljudge.tasks.shapes import MalformedFamily, ShapeFamily, describe_shape, family_from, plain, read_family
from kerneljudge.tasks.source import Task
from kerneljudge.timing import drain
from kerneljudge.timing.basic import (
    BUSY_PRECURSOR,
    CUDA_GRAPH,
    DO_BENCH,
    HOST_CLOCK,
    INTERLEAVED,
    KERNELBENCH,
    CachedSide,
    GraphUnsupported,
    SampleTimes,
    TimeRequest,
    TimeSide,
    TimingPlan,
    run_interleaved,
)
from kerneljudge.timing.clocks import NvmlClockMonitor
from kerneljudge.verdict import (
    Capability,
    Correctness,
    Failure,
    Finding,
    Identity,
    Record,
    Timing,
    TrialRecord,
    WorkerLog,
    decide_status,
)
from kerneljudge.worker import wire
from kerneljudge.worker.wire import timed_set

COMPILE_ERROR_TYPES = {
    "CompilationError",
    "CompileTimeAssertionFailure",
    "SyntaxError",
    "IndentationError",
    "ImportError",
    "ModuleNotFoundError",
    "NameError",
}


def combined_timing(measured: list[tuple[dict[str, Any], Timing]]) -> Timing:
    """Timings at several shapes as one: the last shape's record, with the speedup (and each end of its
    interval) the geometric mean over the shapes, and every shape's own figures in `shapes`. The interval of
    the mean is not a confidence interval of it: each shape's is, and `shapes` keeps them."""
    last = measured[-1][1].model_copy(deep=True)
    timed = [t for _, t in measured if t.measured and t.speedup]
    last.shapes = [
        {
            "shape": {name: plain(tree) for name, tree in shape.items()},
            "speedup": t.speedup,
            "interval": t.speedup_interval,
            "candidate_ms": t.candidate.median_ms if t.candidate else None,
            "reference_ms": t.reference.median_ms if t.reference else None,
            "reason": t.reason,
        }
        for shape, t in measured
    ]
    if len(timed) != len(measured):
        last.measured, last.speedup, last.speedup_interval = False, None, None
        last.reason = f"timed at {len(timed)} of {len(measured)} timing shapes"
        return last

    def geomean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    last.speedup = geomean([t.speedup for t in timed])
    intervals = [t.speedup_interval for t in timed]
    if all(intervals):
        last.speedup_interval = [geomean([i[0] for i in intervals]), geomean([i[1] for i in intervals])]
    last.regime = (last.regime or "") + f"; geometric mean over {len(timed)} timing shapes"
    return last


def draws_random_note() -> Finding:
    return finding(
        "KJ-T002",
        "info",
        "the reference draws random numbers in its forward: both sides' calls start from the same random state, "
        "so a candidate that draws them the same way matches; timed calls' values cannot be checked",
    )


def task_check_disagrees(where: str, task_check: dict[str, Any], oracle_summary: str, oracle_passed: bool) -> Finding:
    """The task's own check and the float64 oracle disagree on one trial (the task's check decides)."""
    verdict = "passed" if task_check["passed"] else "failed"
    oracle = "passed" if oracle_passed else f"did not pass ({oracle_summary})"
    return finding(
        "KJ-C002",
        "info",
        f"{where}: the task's own check {verdict}, the oracle comparison {oracle}",
        {"task_check": task_check, "oracle": oracle_summary, "oracle_passed": oracle_passed},
    )


def integrity_failure(findings: list[Finding], phase: str, prefix: str) -> Failure:
    """The failure that error-severity findings amount to."""
    errors = [f for f in findings if f.severity == "error"]
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    return Failure(kind="integrity_violation", phase=phase, summary=f"{prefix}: {codes}: {errors[0].summary}")


class CandidateFailed(Exception):
    """The candidate failed a stage; carries the typed failure for the record."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.summary)
        self.failure = failure


class JudgeFailed(Exception):
    """The judge (or the trusted task) failed: the record is invalid and punishes nobody."""


class TaskUnsupported(Exception):
    """The task's reference cannot run on this machine (checks/support.py): UNSUPPORTED, with the reason."""


# KernelBench flushes 256 MB; otherwise at least twice the device's L2 (a 32 MiB write did not evict an
# H200's 60 MiB L2, 64 MiB and more did: GPU_NOTES.md), never under 64 MiB.
KERNELBENCH_FLUSH_BYTES = 256 * 2**20
MIN_FLUSH_BYTES = 64 * 2**20


def l2_flush_bytes(hello: dict[str, Any] | None, native: bool) -> int:
    if native:
        return KERNELBENCH_FLUSH_BYTES
    l2 = int((hello or {}).get("l2_cache_bytes") or 0)
    return max(MIN_FLUSH_BYTES, 2 * l2)


def perturbations(hello: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The perturbed replays of one trial on CUDA (worker/perturb.py): the GPU loaded by the worker's own
    matrix products on another stream for about three times the call's length, and another launch order (the
    L2 flushed and a 1 ms delay kernel queued ahead of the call)."""
    return [
        {"kind": "gpu_load", "side": 2048, "factor": 3.0},
        {"kind": "launch_order", "flush_bytes": l2_flush_bytes(hello, native=False), "delay_ms": 1.0},
    ]


# torch.compile of a reference may take minutes (Inductor's autotuning); it gets this many step timeouts.
COMPILE_TIMEOUT_FACTOR = 5


def sample_list(values: Any, count: int) -> bool:
    """A worker's list of `count` non-negative times."""
    return (
        isinstance(values, list)
        and len(values) == count
        and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in values)
    )


def classify_error(response: dict[str, Any]) -> str:
    phase = response.get("phase")
    if phase == "import" or response.get("exc_type") in COMPILE_ERROR_TYPES:
        return "compile_error"
    if "Error building extension" in str(response.get("message", "")):
        return "compile_error"
    return "runtime_error"


def error_failure(response: dict[str, Any], phase: str) -> Failure:
    kind = classify_error(response)
    return Failure(
        kind=kind,
        phase=phase,  # type: ignore[arg-type]
        summary=f"{response.get('exc_type')}: {str(response.get('message', ''))[:500]}",
        exception=f"{response.get('exc_module')}.{response.get('exc_type')}",
        traceback=str(response.get("traceback", ""))[-8000:],
    )


def sandbox_capability(layers: dict[str, dict[str, str]], policy: SandboxPolicy) -> Capability:
    """The candidate worker's OS sandbox as a capability: available when every layer the policy counts is in
    force (seccomp and the GPU memory cap are optional); the detail names the missing ones."""
    missing = [
        name
        for name in LAYERS
        if name not in policy.optional_layers and layers.get(name, {}).get("status") == "missing"
    ]
    in_force = [name for name in LAYERS if layers.get(name, {}).get("status") == "in_force"]
    if not missing:
        detail = "in force: " + ", ".join(in_force)
    else:
        first = layers[missing[0]].get("detail", "")
        detail = f"missing: {', '.join(missing)} ({first})" + (f"; in force: {', '.join(in_force)}" if in_force else "")
    return Capability(status="unavailable" if missing else "available", required=policy.require, detail=detail)


class Judgment:
    """One judgment; `run()` always returns a record, whatever the candidate or the judge did."""

    def __init__(
        self,
        task: Task,
        candidate: Candidate,
        config: JudgeConfig,
        progress: Callable[[str], None] | None = None,
        gpu: str | None = None,
        gate: Gate | None = None,
        baselines: dict[str, CachedSide] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.task = task
        self.candidate = candidate
        self.config = config
        # The one source of everything a candidate must not predict: the hidden plan (plan.py) and, as the
        # timing stage draws them, its pools' seeds and the calls whose outputs are kept and checked. The
        # operating system's randomness unless a test injects a source.
        self.source: random.Random = rng if rng is not None else secrets.SystemRandom()
        self.plan: hidden_plan.HiddenPlan | None = None  # drawn as correctness starts
        self.progress = progress or (lambda stage: None)
        self.gpu = gpu  # the GPU the workers see (CUDA_VISIBLE_DEVICES), for a batch lane; None: as inherited
        self.gate = gate or OPEN_GATE
        self.held = ExitStack()  # the device memory reserved at the gate, given back when the judgment ends
        self.reserved_bytes = 0  # device memory reserved at the gate (gate.memory_need), 0 when none was
        self.pool_sets = POOL_SETS  # input sets in the timing pool: fewer where that many would not fit
        self.memory_peaks: dict[str, int] = {}  # per worker, the most device memory it held (NVML)
        # Cached baselines (a batch's `--cached-baselines`): the task's reference, and its compiled form when
        # measured, timed once on this device; used instead of timing them here, where the regime matches.
        self.baselines = baselines or {}
        self.limits = WorkerLimits(
            step_timeout_s=config.timeout_s,
            lifetime_s=max(1800.0, 20 * config.timeout_s),
            log_cap_bytes=config.log_cap_bytes,
            max_message_bytes=config.max_message_bytes,
        )
        self.sandbox = confine.policy_for(config.sandbox)
        self.failure: Failure | None = None
        self.findings: list[Finding] = []
        self.capabilities: dict[str, Capability] = {}
        self.trials: list[TrialRecord] = []
        self.replay: dict[str, Any] | None = None
        self.checked_shapes: list[dict[str, Any]] = []  # hidden shapes the candidate was right at
        self.sanitizer: dict[str, Any] | None = None  # compute-sanitizer's run (sanitize.py), where it ran
        self.oracle_dtype: str | None = None
        self.timing = Timing(measured=False, reason="not reached")
        self.device: str | None = None
        self.hello: dict[str, Any] | None = None
        self.workers: dict[str, WorkerProcess] = {}
        self.timing_pairs = 0  # fresh worker pairs started for timing (a second after a failed graph capture)
        self.closed_logs: dict[str, WorkerLog] = {}  # logs of the checked pair, once replaced
        self.booting: dict[str, WorkerProcess] = {}  # the timing pair, started while the checked pair works
        self.correctness_checked = False
        self.correctness_passed = False
        self.tolerances: dict[str, Any] = {}
        # The trials whose inputs the timing pool makes again (seed and distribution), and the reference
        # output's signature (dtype and shape of each item) at the public shape.
        self.timing_sets: list[dict[str, Any]] = []
        self.signature: dict[str, Any] = {}
        self.inputs_writable = False  # the task lets the candidate write into its inputs (INPUTS_WRITABLE)
        self.task_check = False  # the task checks outputs itself (a GPU MODE problem's check_implementation)
        self.call_seed: int | None = None  # the random state the current trial's calls start from, both sides
        self.draws_random = False  # the reference draws random numbers in its forward
        self.timed_checks = 0
        self.drain_left: list[float] = []  # per measured candidate sample, device work its end event missed (ms)
        self.declared_kernels: list[dict[str, Any]] = []
        self.reference_evidence: Any = None
        self.trial_screen: list[Any] | None = None  # the last trial's screen of the oracle's outputs
        self.last_task_check: dict[str, Any] | None = None  # the task's own check of the last compared output
        self.traced_calls: list[CallTrace] = []
        self.trace_problems: list[str] = []
        self.trace_summary: dict[str, Any] | None = None
        self.family: ShapeFamily | None = None  # the task's shape family, as its reference worker described it
        self.family_read = False
        self.stages_s: dict[str, float] = {}  # wall seconds per stage: waiting (for other lanes), build, ...
        self.stage: str | None = None  # the stage `_clocked` is in: its requests' round trips count under it
        # Where trials' inputs are made (worker/seeded.py): again in the candidate's worker from each trial's
        # seed in the hardened modes, until it cannot make the reference's; shipped from the reference's else.
        self.inputs: dict[str, Any] = {"made": "each worker" if config.mode != "off" else "reference worker"}

    # ------------------------------------------------------------ the pipeline

    def run(self) -> Record:
        started = time.monotonic()
        try:
            self._pipeline()
        except CandidateFailed as exc:
            self.failure = exc.failure
        except JudgeFailed as exc:
            self.failure = Failure(kind="judge_error", phase="judge", summary=str(exc))
        except TaskUnsupported as exc:
            self.capabilities["task_runs_here"] = Capability(status="unavailable", required=True, detail=str(exc))
        except Exception as exc:  # a bug in the judge must not become the candidate's verdict
            self.failure = Failure(kind="judge_error", phase="judge", summary=f"{type(exc).__name__}: {exc}")
        finally:
            for worker in [*self.booting.values(), *self.workers.values()]:  # all end together
                worker.ask_exit()
            for worker in self.booting.values():  # never told to load anything: no candidate code ran there
                worker.close()
            self.booting = {}
            logs = {**self.closed_logs, **self._close_workers()}
            self.held.close()
        if any(self.memory_peaks.values()):  # the reservation checked against what was held (a stage log line)
            held = ", ".join(f"{role} {peak / 2**30:.1f}" for role, peak in self.memory_peaks.items())
            self.progress(f"device memory: reserved {self.reserved_bytes / 2**30:.1f} GiB; held at most {held} GiB")
        return self._record(time.monotonic() - started, logs)

    @contextmanager
    def _clocked(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to the record's `stages_s[name]`, less what it spent waiting at the
        gate (counted in `stages_s["waiting"]`)."""
        began, waited = time.monotonic(), self.stages_s.get("waiting", 0.0)
        self.stage = name
        try:
            yield
        finally:
            self.stage = None
            spent = time.monotonic() - began - (self.stages_s.get("waiting", 0.0) - waited)
            self.stages_s[name] = round(self.stages_s.get(name, 0.0) + spent, 3)

    def _pipeline(self) -> None:
        waited = time.monotonic()
        with self.gate.work():
            self.stages_s["waiting"] = round(time.monotonic() - waited, 3)
            with self._clocked("build"):
                self._preflight()
                # Both interpreters start at once (imports take seconds); the candidate's is only told
                # to import the candidate once the reference has settled the device.
                self.progress("starting workers")
                self.workers = self._new_pair(self.config.device)
                self._start_reference()
                if self._unsupported():
                    return
                init_inputs = self._load_reference()
                self.progress(f"building the candidate on {self.device}")
                self._start_candidate(init_inputs)
                if self.config.timing:
                    self._boot_timing_pair()
            with self._clocked("correctness"):
                self._correctness()
            voiding = sorted({f.code for f in self.findings if f.severity == "error"})
            if self.config.timing and self.config.mode == "enforce" and voiding:
                # Fail-closed: the verdict is already FAIL and no figure could stand; timing it would only spend
                # device time, and work hidden from the timed stream (H20) can make that minutes.
                self.timing = Timing(
                    measured=False, reason=f"not timed: enforce fails the candidate on {', '.join(voiding)}"
                )
                return
            if not self.config.timing:
                self.timing = Timing(measured=False, reason="timing disabled by configuration")
                return
            # The fresh pair is loaded as work, beside the other lanes: only the measurement holds them back
            # (on an H200 the load took about 4 s of each timed judgment's turn alone, session g).
            with self._clocked("timing"):
                self.progress("starting a fresh worker pair for timing")
                self._start_timing_pair()
        if self.gate is not OPEN_GATE:
            self.progress("waiting for the other lanes to pause")
        waited = time.monotonic()
        with self.gate.measure(self.gpu):
            self.stages_s["waiting"] = round(self.stages_s["waiting"] + time.monotonic() - waited, 3)
            with self._clocked("timing"):
                self.progress("timing candidate and reference")
                self._timing()

    def _preflight(self) -> None:
        try:
            result = preflight(self.candidate.text, self.config.mode, self.config.policy)
        except SyntaxError as exc:
            raise CandidateFailed(
                Failure(
                    kind="compile_error",
                    phase="preflight",
                    summary=f"SyntaxError: {exc.msg} (line {exc.lineno})",
                    exception="SyntaxError",
                )
            ) from None
        self.findings.extend(result.findings)
        self.declared_kernels = result.report.declared_kernels
        if result.rejected and self.config.mode == "enforce":
            raise CandidateFailed(integrity_failure(self.findings, "preflight", "rejected before import"))

    def _start_reference(self) -> None:
        requested = self.config.device
        self.hello = self._reference_hello()
        cuda = bool(self.hello.get("cuda_available"))
        self.device = "cuda" if cuda and requested != "cpu" else ("cpu" if requested != "cuda" else None)
        layers = self.workers["reference"].sandbox_layers
        hidden = None if cuda or requested == "cpu" else confine.gpus_hidden_by_sandbox(layers)
        self.capabilities["cuda_runtime"] = Capability(
            status="available" if cuda else "unavailable",
            required=requested == "cuda",
            detail=(
                f"{self.hello.get('gpu_name')} (capability {self.hello.get('gpu_capability')})"
                if cuda
                else (hidden or "no CUDA device visible") + ("" if requested == "cuda" else ": judged on the CPU")
            ),
        )
        triton = self.hello.get("triton")
        self.capabilities["triton"] = Capability(
            status="available" if triton else "unavailable",
            required=False,
            detail=(
                f"Triton {triton}" + (" through the interpreter (TRITON_INTERPRET=1)" if self.device == "cpu" else "")
            )
            if triton
            else "Triton is not installed",
        )
        self.capabilities["os_sandbox"] = sandbox_capability(self.workers["candidate"].sandbox_layers, self.sandbox)
        self.capabilities["profiler_trace"] = Capability(
            status="unavailable",
            required=False,
            detail="kernel traces need CUDA" if self.device != "cuda" else "no call was traced",
        )
        self.capabilities["compute_sanitizer"] = self._sanitizer_decision().capability

    def _reference_hello(self) -> dict[str, Any]:
        try:
            hello = self.workers["reference"].receive(timeout_s=self.limits.start_timeout_s)
        except WorkerFailure as exc:
            raise JudgeFailed(f"the reference worker did not start: {exc}") from None
        if hello.get("type") != "hello":
            raise JudgeFailed("the reference worker did not say hello")
        return hello

    def _task_failed(self, response: dict[str, Any], what: str) -> NoReturn:
        """The reference failed: the task cannot run here (UNSUPPORTED) or it is broken (a judge error)."""
        reason = unsupported_reason(response, self.device)
        if reason is not None:
            raise TaskUnsupported(reason)
        raise JudgeFailed(f"{what}: {response.get('exc_type')}: {response.get('message')}")

    def _unsupported(self) -> bool:
        return any(c.required and c.status == "unavailable" for c in self.capabilities.values())

    def _load_reference(self, shape: dict[str, Any] | None = None) -> Any:
        """Build the reference (at `shape`, a hidden shape of its family) and return its init inputs."""
        admit = shape is None and self.gate is not OPEN_GATE and self.device == "cuda" and not self.reserved_bytes
        header: dict[str, Any] = {"op": "load", "seed": self.config.public_seed, "shape": shape, "footprint": admit}
        response, values = self._ask("reference", header)
        where = f" at {describe_shape(shape)}" if shape else ""
        if response.get("type") != "loaded":
            self._task_failed(response, f"the task failed to {response.get('phase')}{where}")
        if admit:  # asked even for no need: a gate may hold a judgment to run alone (batch.py)
            total = int((self.hello or {}).get("gpu_memory_bytes") or 0)
            self.pool_sets = timing_pool_sets(response.get("footprint"), total)
            self.reserved_bytes = memory_need(response.get("footprint"), self.config.timing, self.pool_sets)
            if self.reserved_bytes:
                self.progress(f"waiting for {self.reserved_bytes / 2**30:.1f} GiB of device memory")
            waited = time.monotonic()
            self.held.enter_context(self.gate.admit(self.gpu, self.reserved_bytes, total))
            self.stages_s["waiting"] = round(self.stages_s.get("waiting", 0.0) + time.monotonic() - waited, 3)
        if shape is None:
            self.inputs_writable = response.get("inputs_writable") is True
        if shape is None and not self.family_read and self.config.mode != "off":
            self.family_read = True
            try:
                self.family = family_from(response)
            except MalformedFamily as exc:
                if self.config.shape_trials:  # the task asks for shapes the judge cannot draw: the task's fault
                    raise JudgeFailed(f"the task's shape family is malformed: {exc}") from None
        return values["init_inputs"]

    def _start_candidate(self, init_inputs: Any) -> None:
        worker = self.workers["candidate"]
        hello = self._candidate_step(lambda: worker.receive(timeout_s=self.limits.start_timeout_s), phase="start")
        if hello.get("type") != "hello":
            raise CandidateFailed(Failure(kind="crash", phase="start", summary="the candidate worker did not start"))
        if str(hello.get("device", "")).split(":")[0] != self.device:
            raise JudgeFailed(f"the workers disagree on the device ({hello.get('device')} vs {self.device})")
        self._build_candidate(init_inputs)

    def _build_candidate(self, init_inputs: Any, shape: dict[str, Any] | None = None) -> None:
        """Import the candidate and build its model (the first time), or build it again at a hidden shape."""
        worker = self.workers["candidate"]
        header: dict[str, Any] = {"op": "load", "seed": self.config.public_seed}
        if self._inputs_made():  # the task's source, loaded before the candidate's, to make inputs there
            header["task"] = self.task.text
        response, _ = self._candidate_step(lambda: worker.request(header, init_inputs), phase="build")
        if response.get("type") == "error":
            failure = error_failure(response, "import" if response.get("phase") == "import" else "init")
            if shape:
                failure.summary = f"at {describe_shape(shape)}: {failure.summary}"
            raise CandidateFailed(failure)
        if response.get("type") != "loaded":
            raise CandidateFailed(Failure(kind="crash", phase="build", summary="the candidate worker broke protocol"))
        if self.config.mode != "off":
            self.add_findings(import_findings(response.get("evidence"), self.config.policy))

    def add_findings(self, findings: list[Finding]) -> None:
        """Record findings, one per code: a repeat only counts its occurrences."""
        for new in findings:
            old = next((f for f in self.findings if f.code == new.code), None)
            if old is None:
                self.findings.append(new)
            else:
                old.evidence["repeats"] = int(old.evidence.get("repeats", 0)) + 1
                if new.severity == "error" and old.severity != "error":
                    old.severity = "error"

    # ------------------------------------------------------------ correctness

    def _correctness(self) -> None:
        native = self.config.mode == "off"
        config = self.config
        self.plan = hidden_plan.draw(
            config.public_seed,
            config.public_trials,
            config.hidden_trials,
            config.shape_trials,
            native,
            self.device == "cuda",
            self.source,
        )
        plan, screens = self.plan, []
        self.correctness_checked = True
        for index, trial in enumerate(plan.trials):
            kind, seed = trial.kind, trial.seed
            self.progress(f"correctness trial {index + 1}/{len(plan.trials)} ({kind})")
            call = {
                "phase": f"trial {index}",
                "reuse": index == plan.canary_at,
                "trace": index in plan.trace_at,
                "keep_inputs": index + 1 == plan.canary_at,
            }
            distribution = self._trial(index, kind, seed, trial.distribution, call, replay=index in plan.replay_at)
            if self.trial_screen is not None:
                screens.append(self.trial_screen)
            if distribution.get("kind") == "standard" or "rejected" in distribution:
                self.timing_sets = (self.timing_sets + [{"seed": seed, "variant": distribution}])[-POOL_SETS:]
        self.add_findings(degenerate_outputs(screens))
        if not native:
            self._shape_trials()
            self._sanitize()
        self.correctness_passed = True

    def _trial(
        self, index: int, kind: str, seed: int, distribution: dict[str, Any], call: dict[str, Any], replay: bool
    ) -> dict[str, Any]:
        """One trial: the reference's run, the candidate's call, the comparison, and the replay where one is
        due; the distribution the inputs had. Run again, its inputs shipped, where the candidate's worker
        could not make them as the reference did, at the call or at the replay (`call_candidate`: None)."""
        native = self.config.mode == "off"
        while True:  # twice at most: once shipped, call_candidate always answers
            inputs, used = self._reference_trial(seed, oracle=not native, distribution=distribution)
            cand = self.call_candidate(inputs, **call)
            if cand is None:
                continue
            self._check_trial(index, kind, seed, cand, None if native else used, keep=replay)
            if not replay or self._replay(index, inputs, keep_inputs=call["keep_inputs"]):
                return used
            self.trials.pop()  # its record is the second run's

    def _tolerances(self, native: bool = False) -> list[Tolerance]:
        """The tolerance of each output, by its dtype (docs/tolerances.md), recorded as it is chosen."""
        chosen = []
        for item in signature_items(self.signature):
            tol = tolerance_for(getattr(torch, item["dtype"]), native=native)
            self.tolerances[item["dtype"]] = {
                "name": tol.name,
                "atol": tol.atol,
                "rtol": tol.rtol,
                "ref_error_factor": tol.ref_error_factor,
            }
            chosen.append(tol)
        return chosen

    def _compare(self, slot: str, cand: dict[str, Any], method: str, keep: bool = False, key: str = "values") -> list:
        """The reference worker's comparison of the candidate's outputs (`cand`, its response: the outputs lie
        in its outbox) with slot `slot`; a list of results, one per output."""
        tols = self._tolerances(native=method == "native")
        header = {
            "op": "compare",
            "slot": slot,
            "method": method,
            "keep": keep,
            "task_check": self.task_check,
            "container": self.signature.get("container", "Tensor"),
            "tolerances": [
                {"atol": t.atol, "rtol": t.rtol, "ref_error_factor": t.ref_error_factor, "name": t.name} for t in tols
            ],
        }
        names = wire.tensor_names(cand[key])
        placed = (cand[key], {n: cand["tensors"][n] for n in names})
        response, _ = self._ask("reference", header, placed=placed)
        if response.get("type") != "compared":
            raise JudgeFailed(
                f"the reference worker could not compare the outputs: {response.get('exc_type')}: "
                f"{response.get('message')}"
            )
        self.last_task_check = response.get("task_check")
        return list(response["results"])

    def _check_trial(
        self,
        index: int,
        kind: str,
        seed: int,
        cand: dict[str, Any],
        distribution: dict[str, Any] | None,
        shape: dict[str, Any] | None = None,
        keep: bool = False,
    ) -> None:
        """Compare one trial's outputs with the oracle (or natively in `off`), record it, fail on the first miss."""
        native = self.config.mode == "off"
        where = f"{kind} trial {index}" + (f" at {describe_shape(shape)}" if shape else "")
        outputs, failure_kind, summary = [], None, "passed"
        results = self._compare("trial", cand, "native" if native else "oracle", keep=keep)
        for i, (result, item) in enumerate(zip(results, signature_items(self.signature), strict=True)):
            metrics = dict(result.get("metrics") or {})
            forensic = None if native or self.task_check else precision_finding(metrics, item["dtype"], where)
            if forensic is not None:
                self.add_findings([forensic])
            outputs.append({"index": i, "passed": result["passed"], "summary": result["summary"], **metrics})
            if result["passed"] is False and failure_kind is None:
                failure_kind, summary = result["failure_kind"], result["summary"]
        task_check = self.last_task_check if self.task_check else None
        if task_check is not None:  # the task's own check decides; the oracle's figures stay in the record
            uncompared = [r["summary"] for r in results if r["passed"] is None]
            oracle_passed = failure_kind is None and not uncompared
            oracle_summary = summary if failure_kind is not None else (uncompared or ["passed"])[0]
            if task_check["passed"] != oracle_passed and len(uncompared) < len(results):  # else nothing compared
                self.add_findings([task_check_disagrees(where, task_check, oracle_summary, oracle_passed)])
            failure_kind = None if task_check["passed"] else "tolerance"
            summary = "passed" if task_check["passed"] else f"the task's own check: {task_check['message']}"
        self.trials.append(
            TrialRecord(
                index=index,
                kind=kind,  # type: ignore[arg-type]
                seed=seed,
                passed=failure_kind is None,
                failure_kind=failure_kind,  # type: ignore[arg-type]
                summary=summary,
                outputs=outputs,
                distribution=distribution,
                shape={name: plain(tree) for name, tree in shape.items()} if shape else None,
                task_check=task_check,
            )
        )
        if failure_kind is not None:
            raise CandidateFailed(
                Failure(kind=failure_kind, phase=f"correctness ({where})", summary=summary)  # type: ignore[arg-type]
            )
        if shape is not None:
            self.checked_shapes.append(shape)

    def _shape_trials(self) -> None:
        """One trial at each of a few hidden shapes of the task's family, both models built again for it.

        A kernel that only handles the public shape (its width baked in, a tail it never masks) fails here.
        The shapes are drawn now, in the parent; the candidate learns one only from its new init inputs
        and the inputs it is called with.
        """
        count = self.config.shape_trials
        why_none = self._derive_family() if self.family is None and count else ""
        if self.family is None or count == 0:
            self.capabilities["hidden_shapes"] = Capability(
                status="unavailable",
                required=False,
                detail="no hidden shapes asked for (shape_trials = 0)" if self.family is not None else why_none,
            )
            return
        shapes = self.plan.shapes(self.family, count)
        refusals: list[dict[str, str]] = []
        skipped: list[str] = []
        for number, shape in enumerate(shapes):
            index, label, seed = len(self.trials), describe_shape(shape), self.plan.shape_seed(number)
            self.progress(f"correctness at a hidden shape ({label})")
            if self.family.derived:
                self._derived_shape_trial(index, shape, seed, refusals, skipped)
                continue
            self._build_candidate(self._load_reference(shape), shape)
            inputs, _ = self._reference_trial(seed, oracle=True, distribution={"kind": "standard"}, shape=shape)
            cand = self.call_candidate(inputs, phase=f"shape trial {index} at {label}")
            self._check_trial(index, "shape", seed, cand, {"kind": "standard"}, shape)
        if refusals:
            self.add_findings([refusal_finding(refusals, self.config.policy)])
        self.capabilities["hidden_shapes"] = Capability(
            status="available" if len(shapes) > len(skipped) else "unavailable",
            required=False,
            detail=self.family.trials_detail(len(shapes), len(refusals), skipped),
        )

    def _derive_family(self) -> str:
        """A family derived from the task's size globals (worker/derived.py), asked of the reference worker for
        a task that declares none; why there is none, where there is none. The judge's own reading of the
        task: where it cannot be had, the task is judged at its public shape, as before."""
        self.progress("deriving a shape family from the task's size globals")
        response: dict[str, Any] = {}
        try:
            response, _ = self._ask("reference", {"op": "derive"})
            self.family = read_family(response.get("family")) if response.get("type") == "derived" else None
        except (JudgeFailed, MalformedFamily):
            self.family = None
        if self.family is not None and not self.family.derived:
            self.family = None
        if response.get("declared") is True:
            return "the task declares that it has no shape but the public one (SHAPE_FAMILY = [])"
        return (
            "the task declares no shape family (SHAPE_FAMILY or get_shape_family()) and none could be derived "
            "from its size globals: correct at its public shape only"
        )

    def _derived_shape_trial(
        self, index: int, shape: dict[str, Any], seed: int, refusals: list[dict[str, str]], skipped: list[str]
    ) -> None:
        """One trial at a shape derived from the task's size globals (worker/derived.py): the judge's reading
        of the task, not the task's word. Where the reference itself fails there, the shape is skipped; a
        candidate that refuses it with an error is recorded (checks/refusals.py); a wrong answer fails."""
        label = describe_shape(shape)
        try:
            init_inputs = self._load_reference(shape)
        except (JudgeFailed, TaskUnsupported) as exc:
            skipped.append(f"{label}: {str(exc)[:300]}")
            return
        try:
            self._build_candidate(init_inputs, shape)
            try:
                inputs, _ = self._reference_trial(seed, oracle=True, distribution={"kind": "standard"}, shape=shape)
            except (JudgeFailed, TaskUnsupported) as exc:
                skipped.append(f"{label}: {str(exc)[:300]}")
                return
            cand = self.call_candidate(inputs, phase=f"shape trial {index} at {label}")
        except CandidateFailed as exc:
            if not refused(exc.failure):
                raise
            refusals.append({"shape": label, "phase": exc.failure.phase, "error": exc.failure.summary[:500]})
            return
        self._check_trial(index, "shape", seed, cand, {"kind": "standard"}, shape)

    def _sanitizer_decision(self) -> sanitize.Decision:
        path = sanitize.sanitizer_path() if self.device == "cuda" else None
        return sanitize.decide(self.config, self.device, self.declared_kernels, self.candidate.text, path)

    def _sanitize(self) -> None:
        """One call of the candidate under each compute-sanitizer tool, each in a sandboxed worker of its own,
        at the smallest shape it was right at (sanitize.py, docs/sanitizer.md): reports in its own kernels are
        findings, and racecheck's, memcheck's and synccheck's fail it (`race`, `memory_error`)."""
        decision = self._sanitizer_decision()
        self.capabilities["compute_sanitizer"] = decision.capability
        path = decision.path
        if not decision.run or path is None:
            return
        shape = sanitize.smallest_shape(self.family, self.checked_shapes)
        where = describe_shape(shape) if shape else "the public shape"
        self.progress(f"compute-sanitizer: one call at {where} under each tool")
        began, channels = time.monotonic(), self.workers["candidate"].channels
        load = {
            "op": "load",
            "seed": self.config.public_seed,
            **({"task": self.task.text} if self._inputs_made(shape) else {}),
        }
        try:
            init_placed = channels.access.put("candidate_in", self._load_reference(shape))
        except (JudgeFailed, TaskUnsupported) as exc:  # it ran there before: the tools are not run, and say why
            self.capabilities["compute_sanitizer"] = Capability(status="degraded", required=False, detail=str(exc))
            return

        def make_inputs() -> tuple[dict[str, Any], Any]:
            inputs, _ = self._reference_trial(self.source.randrange(2**32 - 1), False, {"kind": "standard"}, shape)
            made = inputs.get("made") if isinstance(inputs, dict) else None
            return {"op": "call", "made": made, "call_seed": self.call_seed}, ([], {}) if made is not None else inputs

        timeout_s = self.config.sanitizer_timeout_s
        checked = self.workers["candidate"]
        start = sanitize.starter(
            path, self.candidate.text, self.limits, self.sandbox, self.gpu, channels, timeout_s, checked, self.device
        )
        runs, workers = sanitize.run_tools(start, load, init_placed, make_inputs, timeout_s)
        cap = self.config.log_cap_bytes
        self.closed_logs.update({f"candidate_{t}": sanitize.kept_log(w, cap) for t, w in workers.items()})
        declared = {str(d["name"]) for d in self.declared_kernels if d.get("kind") in ("triton", "cuda")}
        found, kept, failure, capability = sanitize.conclude(runs, declared, self.config.policy, path, where)
        self.sanitizer = {
            **kept,
            "reason": decision.reason,
            "shape": {name: plain(tree) for name, tree in shape.items()} if shape else None,
            "seconds": round(time.monotonic() - began, 3),
        }
        self.capabilities["compute_sanitizer"] = capability
        self.add_findings(found)
        if failure is not None:
            raise CandidateFailed(failure)

    def _inputs_made(self, shape: dict[str, Any] | None = None) -> bool:
        """Whether the candidate's worker makes this trial's inputs itself (worker/seeded.py): in the hardened
        modes, at the public shape (a hidden shape's inputs are shipped), until it could not."""
        return self.config.mode != "off" and shape is None and "shipped" not in self.inputs

    def _reference_trial(
        self, seed: int, oracle: bool, distribution: dict[str, Any], shape: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """One trial in the reference worker: its inputs go straight to the candidate's inbox, or are made
        again there (`_inputs_made`); its outputs and the oracle's stay in the worker (slot "trial"). The
        inputs (their (tree, descriptions), or what the candidate's worker needs to make them: {"made": ...})
        and the distribution."""
        self.call_seed = self.source.randrange(2**31 - 1)  # the random state both sides' calls start from
        header = {
            "op": "trial",
            "seed": seed,
            "call_seed": self.call_seed,
            "oracle": oracle,
            "variant": distribution,
            "slot": "trial",
            "inputs_to": "made" if self._inputs_made(shape) else "candidate",
            "on_device": self.config.mode != "off",  # KernelBench makes inputs on the host: `off` does too
        }
        response, _ = self._ask("reference", header)
        if response.get("type") != "trial":
            self._task_failed(response, f"the reference failed on seed {seed}")
        self.signature = dict(response.get("signature") or {})
        self.task_check = bool(response.get("task_check"))
        if response.get("draws_random") and not self.draws_random:
            self.draws_random = True
            self.add_findings([draws_random_note()])
        values = [item for item in signature_items(self.signature) if "dtype" not in item]
        if values:
            raise JudgeFailed(f"the reference returns a {values[0].get('type')}, not a tensor: nothing to compare")
        if oracle:
            self.oracle_dtype = response.get("oracle_dtype")
        self.trial_screen = response.get("screen")
        self.reference_evidence = response.get("evidence")
        inputs = {"made": response["made"]} if "made" in response else (response["inputs"], response["input_tensors"])
        return inputs, dict(response.get("variant") or distribution)

    def call_candidate(
        self,
        inputs: Any,
        phase: str,
        reuse: bool = False,
        trace: bool = False,
        keep_inputs: bool = False,
        perturb: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """One candidate call on the inputs the reference wrote to its inbox or that its worker makes again
        ({"made": ...}), or, for a canary, on the previous storage; maybe traced. Its response, whose outputs
        lie in its outbox, checked against the signature; None when its worker could not make the inputs
        (they are shipped from then on: the trial must be run again)."""
        size = expected_bytes(self.signature)
        worker = self.workers["candidate"]
        made = inputs.get("made") if isinstance(inputs, dict) else None
        header = {
            "op": "call",
            "made": made,
            "reuse_inputs": reuse,
            "poison_bytes": 2 * size,
            "reread_s": self.config.reread_delay_s,
            "trace": trace,
            "call_seed": self.call_seed,
            "keep_inputs": keep_inputs,  # the next call is the canary: it reuses these inputs' storage
            "perturb": perturb,  # a perturbed replay's conditions (worker/perturb.py)
        }
        placed = ([], {}) if made is not None else inputs
        with self._counted("candidate", header):
            response, _ = self._candidate_step(
                lambda: worker.request(header, placed=placed, fetch=(), max_bytes=2 * size + (1 << 20)), phase=phase
            )
        if response.get("type") == "error":
            raise CandidateFailed(error_failure(response, phase))
        if response.get("type") == "inputs_differ" and made is not None:
            self.inputs = {**self.inputs, "shipped": phase, "why": str(response.get("detail"))[:500]}
            return None
        if self.config.mode != "off":
            self.add_findings(
                call_findings(
                    response.get("evidence"), self.reference_evidence, phase, self.config.policy, self.inputs_writable
                )
            )
        if trace:
            self._keep_trace(response.get("evidence"), phase)
        problem = check_structure(response, self.signature, self.device or "cpu", exact=not self.task_check)
        if problem is None and response.get("type") == "output":
            problem = check_received(response)
        if problem is None:
            self._candidate_step(lambda: worker.described(response, ["values"], 2 * size + (1 << 20)), phase=phase)
        if problem is not None:
            raise CandidateFailed(Failure(kind=problem.kind, phase=phase, summary=problem.summary))  # type: ignore[arg-type]
        return response

    def _keep_trace(self, evidence: Any, phase: str) -> None:
        try:
            self.traced_calls.append(read_call(evidence.get("trace") if isinstance(evidence, dict) else None, phase))
        except MalformedTrace as exc:
            self.trace_problems.append(f"{phase}: {exc}")

    def _judge_traces(self) -> None:
        """Read the traced calls; a trace that was asked for and not read makes the capability unavailable."""
        if self.device != "cuda" or self.config.mode == "off":
            return
        declared = {d["name"] for d in self.declared_kernels if d.get("kind") in ("triton", "cuda")}
        if self.traced_calls:
            self.trace_summary, found = analyse(self.traced_calls, declared, self.config.policy)
            self.add_findings(found)
        if self.trace_problems:
            problems = {"problems": self.trace_problems}
            self.add_findings([finding("KJ-R030", "warning", f"kernel trace: {self.trace_problems[0]}", problems)])
        asked = len(self.traced_calls) + len(self.trace_problems)
        self.capabilities["profiler_trace"] = Capability(
            status="available" if asked and not self.trace_problems else "unavailable",
            required=True,
            detail=(
                f"{len(self.traced_calls)} call(s) traced at random hidden trials"
                if asked and not self.trace_problems
                else ("; ".join(self.trace_problems)[:500] if self.trace_problems else "no call was traced")
            ),
        )

    def _replay(self, index: int, inputs: Any, keep_inputs: bool = False) -> bool:
        """The trial's call again on the same inputs, and at one trial on CUDA (the plan's `perturbed_at`) again under
        each perturbation (`perturbations`); False where its worker could not make them again (the trial is
        run again, shipped)."""
        planned = self.plan.perturbed_at if self.plan is not None else None
        perturbed = perturbations(self.hello) if index == planned else []
        return all(self._replay_once(index, inputs, keep_inputs, p) for p in [None, *perturbed])

    def _replay_once(self, index: int, inputs: Any, keep_inputs: bool, perturb: dict[str, Any] | None) -> bool:
        """One replay: a difference beyond rounding fails as `nondeterministic`, one at rounding level is KJ-C001."""
        if not self.draws_random:  # another random state: what differs then is the kernel's own nondeterminism
            self.call_seed = self.source.randrange(2**31 - 1)
        phase = f"replay of trial {index}" + (f" under {perturb['kind']}" if perturb else "")
        again = self.call_candidate(inputs, phase=phase, keep_inputs=keep_inputs, perturb=perturb)
        if again is None:
            return False
        results = self._compare("trial", again, "replay")
        worst = next((r for r in results if not r["passed"]), None) or max(
            results, key=lambda r: r["metrics"].get("differing_elements", 0)
        )
        entry = {"trial": index, "summary": worst["summary"], **worst["metrics"]}
        if perturb:  # what the worker reports of it: a perturbation it could not set up is said so
            done = again.get("perturbed") if isinstance(again.get("perturbed"), dict) else {}
            entry["perturbation"] = perturb["kind"] if "error" not in done else f"not applied: {done['error']}"[:300]
        replays = (self.replay or {}).get("trials", []) + [entry]
        self.replay = {"trials": replays, "bitwise_identical": all(r["differing_elements"] == 0 for r in replays)}
        if not worst["passed"]:
            raise CandidateFailed(Failure(kind="nondeterministic", phase=phase, summary=worst["summary"]))
        if worst["metrics"].get("differing_elements"):
            self.findings.append(finding("KJ-C001", "info", evidence={"trial": index, **worst["metrics"]}))
        return True

    # ------------------------------------------------------------ timing

    def _timing(self) -> None:
        """Time at the public shape, or at each of the task's timing shapes (TIMING_SHAPES: a GPU MODE
        problem's benchmarks), reporting their geometric mean as the leaderboard ranks."""
        shapes = list(self.family.timing) if self.family is not None and self.config.mode != "off" else []
        if not shapes:
            self._timed(None, self.config.timing_budget_s)
            return
        measured: list[tuple[dict[str, Any], Timing]] = []
        fallback = None
        for shape in shapes:
            self.progress(f"timing at {describe_shape(shape)}")
            self._timed(shape, self.config.timing_budget_s / len(shapes))
            fallback = fallback or self.timing.graph_fallback
            measured.append((shape, self.timing))
        self.timing = combined_timing(measured)
        self.timing.graph_fallback = fallback

    def _timed(self, shape: dict[str, Any] | None, budget_s: float) -> None:
        regime = BUSY_PRECURSOR if self.timing.graph_fallback else self.config.timing_regime
        try:
            self._measure(regime, shape, budget_s)
        except GraphUnsupported as exc:
            unjoined = unjoined_capture(str(exc)) if exc.side == "candidate" else None
            if unjoined is not None and self.config.mode != "off":
                self.add_findings([unjoined])
            # A failed capture can leave a worker's CUDA state unusable: a fresh pair times without graphs.
            self.progress("no CUDA graph; timing again in a fresh worker pair behind a busy precursor")
            self._start_timing_pair()
            self._measure(BUSY_PRECURSOR, shape, budget_s)
            self.timing.graph_fallback = str(exc)

    def _measure(self, regime: str, shape: dict[str, Any] | None = None, budget_s: float | None = None) -> None:
        method = self.config.resolved_timing_method()
        if method == DO_BENCH and self.device != "cuda":
            self.timing = Timing(measured=False, reason="Triton's do_bench times CUDA devices only")
            return
        native = method == KERNELBENCH
        sets = self.timing_sets[:1] if method != INTERLEAVED else self.timing_sets[-self.pool_sets :]
        if shape is not None:  # both models built at the timing shape, timed on fresh hidden inputs of it
            self._build_candidate(self._load_reference(shape), shape)
            sets = [{"seed": self.source.randrange(2**32 - 1), "variant": {"kind": "standard"}} for _ in sets]
        flush_bytes = l2_flush_bytes(self.hello, native) if self.config.timing_l2_flush else 0
        l2_reset: dict[str, bool | None] = {}
        graph_keep: dict[tuple[str, int], int] = {}

        def side(role: str, compiled: bool = False) -> TimeSide:
            def time_side(request: TimeRequest) -> SampleTimes:
                header: dict[str, Any] = {
                    "op": "time",
                    "calls": request.calls,
                    "samples": request.samples,
                    "warmup": request.warmup,
                    "flush_bytes": flush_bytes,
                    "precursor_ms": request.precursor_ms,
                    "method": request.method,
                    "compiled": compiled,
                    "profile_range": role == "candidate",
                    "staged": True,  # the pool was sent once, before the first request
                    "graph": request.graph,
                }
                if request.graph:  # a graph keeps one call's output, at a position drawn once per graph
                    header["graph_keep"] = graph_keep.setdefault(
                        (role, request.calls), self.source.randrange(request.calls)
                    )
                if request.measured and method == INTERLEAVED and self.config.mode != "off" and role == "candidate":
                    # One timed call's output, at a position drawn here, kept by the worker and fetched by a
                    # request of its own after the parent's clock stops: its copy to the host is no part of the
                    # round trip set against the claimed times (worker/timer.py). The reference keeps none: a
                    # graph's kept output copied on the device (milliseconds for 4 GiB) is all it would add.
                    position = header.get("graph_keep", self.source.randrange(request.calls))
                    header["capture"] = [self.source.randrange(request.samples), position]
                began = time.perf_counter()  # the parent's clock around the round trip only, not its checks
                if role == "candidate":
                    response, _ = self._candidate_step(
                        lambda: self.workers["candidate"].request(header, fetch=()), phase="timing"
                    )
                    request_ms = (time.perf_counter() - began) * 1e3
                    if response.get("type") == "graph_unsupported":
                        raise GraphUnsupported(f"the candidate side: {response.get('message')}", side=role)
                    if response.get("type") == "error":
                        raise CandidateFailed(error_failure(response, "timing"))
                    if "capture" in header:
                        worker = self.workers["candidate"]
                        captured, _ = self._candidate_step(
                            lambda: worker.request({"op": "captured"}, fetch=()), phase="timing"
                        )
                        self._check_timed_output(captured, timed_set(*header["capture"], len(request.inputs)))
                else:
                    response, _ = self._ask("reference", header, fetch=())
                    request_ms = (time.perf_counter() - began) * 1e3
                    if response.get("type") == "graph_unsupported":
                        raise GraphUnsupported(f"the {role} side: {response.get('message')}", side=role)
                    if response.get("type") == "error":
                        raise JudgeFailed(f"the {role} failed while timed: {response.get('message')}")
                expected = 1 if request.method == "do_bench" else request.samples
                times, host, busy = response.get("times_ms"), response.get("host_ms", []), response.get("busy_ms", [])
                # Samples timed without a graph on CUDA come with their drains (timing/drain.py).
                drained = self.device == "cuda" and not request.graph and request.method != "do_bench"
                drains, floor = response.get("drain_ms"), response.get("drain_floor_ms")
                if not (
                    sample_list(times, expected)
                    and (request.method == "do_bench" or sample_list(host, expected))
                    and (busy == [] or sample_list(busy, expected))
                    and (not drained or (sample_list(drains, expected) and drain.is_number(floor)))
                ):
                    if role == "candidate":
                        raise CandidateFailed(
                            Failure(kind="crash", phase="timing", summary="the candidate worker sent malformed timings")
                        )
                    raise JudgeFailed(f"the {role} worker sent malformed timings")
                if request.measured:
                    l2_reset[role] = response.get("l2_reset") if isinstance(response.get("l2_reset"), bool) else None
                times = [float(t) for t in times]
                if drained and self.config.mode != "off":  # `off` keeps KernelBench's figures as they are
                    left = drain.left_behind([float(d) for d in drains], float(floor))
                    times = drain.covered(times, request.calls, left)
                    if request.measured and role == "candidate":
                        self.drain_left += left
                return SampleTimes(times, [float(h) for h in host], [float(b) for b in busy], request_ms)

            return time_side

        pool = [[None] * len(sets)]  # the sets stay in the workers (`_stage`); requests name them by position
        self._stage(sets, shape)
        timed_regime = regime if self.device == "cuda" else HOST_CLOCK
        cached = {
            name: entry
            for name, entry in self.baselines.items()
            if method == INTERLEAVED and entry.launch_regime == timed_regime
        }
        sides = {"candidate": side("candidate")} | ({} if "reference" in cached else {"reference": side("reference")})
        compile_error = None
        if self.config.timing_compile and method == INTERLEAVED and "compiled" not in cached:
            compile_error = self._compile_reference()
            if compile_error is None:
                sides["compiled"] = side("compiled", compiled=True)
        monitor, monitor_error = (None, None)
        if self.device == "cuda" and method == INTERLEAVED:
            monitor, monitor_error = NvmlClockMonitor.open((self.hello or {}).get("gpu_uuid"))
        plan = TimingPlan(
            blocks=self.config.timing_blocks,
            samples=self.config.timing_samples,
            target_sample_ms=self.config.timing_target_ms,
            method=method,
            regime=regime,
            max_blocks=self.config.timing_max_blocks,
            target_rse=self.config.timing_target_rse,
            budget_s=budget_s if budget_s is not None else self.config.timing_budget_s,
        )
        self.drain_left = []
        self.timing = run_interleaved(sides, pool, plan, self.device or "cpu", monitor=monitor, cached=cached)
        left_behind = drain.drain_finding(self.drain_left)
        if left_behind is not None:
            self.add_findings([left_behind])
        if method == INTERLEAVED and self.baselines and not cached:
            regimes = sorted({entry.launch_regime for entry in self.baselines.values()})
            self.timing.reference_source = f"paired: the cached reference was timed in another regime ({regimes[0]})"
        if self.timing.launch_regime == CUDA_GRAPH and self.config.mode != "off":
            before = self.timed_checks
            for (role, calls), keep in graph_keep.items():
                if role == "candidate":
                    self._recheck_graph(calls, keep, len(pool[0]))
            self.timing.graph_rechecks = self.timed_checks - before
        self.timing.timed_outputs_checked = self.timed_checks
        self.timing.compile_error = compile_error
        if monitor_error and self.timing.clocks is not None:
            self.timing.clocks["error"] = monitor_error
        if self.device == "cuda":
            self.timing.l2_flush_bytes = flush_bytes
            self.timing.persisting_l2_reset = l2_reset
            self.timing.regime = (self.timing.regime or "") + (
                f"; {flush_bytes / 2**20:.0f} MiB L2 flush before every sample" if flush_bytes else "; warm L2"
            )
        if method == INTERLEAVED and self.timing.candidate is not None:
            self.timing.trace_check, found = timed_versus_traced(self.trace_summary, self.timing.candidate.median_ms)
            self.add_findings(found)
        check = self.timing.clock_check or {}
        if check.get("suspicious") and self.config.mode != "off":
            self.add_findings(
                [
                    finding(
                        "KJ-R050",
                        "error",
                        f"the candidate worker claimed {check['candidate_claimed_ms']:.3g} ms of timed calls where "
                        f"the parent's clock implies about {check['candidate_implied_ms']:.3g} ms",
                        check,
                    )
                ]
            )

    def _stage(self, sets: list[dict[str, Any]], shape: dict[str, Any] | None = None) -> None:
        """Make the timing pool once: the reference worker makes the sets' inputs again (from their seeds and
        distributions), keeps their outputs and the oracle's to check timed calls, and writes them to the
        candidate's inbox, or has the candidate's worker make them again (`_inputs_made`); every timing
        request then names the pool."""
        made = self._inputs_made(shape)
        header = {
            "op": "stage",
            "sets": sets,
            "on_device": self.config.mode != "off",
            "inputs_to": "made" if made else "candidate",
        }
        response, _ = self._ask("reference", header)
        if response.get("type") != "staged":
            self._task_failed(response, "the reference worker could not stage the timing inputs")
        placed = ([], {}) if made else (response["inputs"], response["input_tensors"])
        self.signature = dict(response.get("signature") or self.signature)
        request = {"op": "stage", "made": response["made"]} if made else {"op": "stage"}
        response, _ = self._candidate_step(
            lambda: self.workers["candidate"].request(request, placed=placed, fetch=()), "timing"
        )
        if response.get("type") == "inputs_differ" and made:  # shipped from now on, the pool staged again
            self.inputs = {**self.inputs, "shipped": "timing pool", "why": str(response.get("detail"))[:500]}
            self._stage(sets, shape)
            return
        if response.get("type") == "error":
            raise CandidateFailed(error_failure(response, "timing"))
        if response.get("type") != "staged":
            raise CandidateFailed(Failure(kind="crash", phase="timing", summary="the candidate worker broke protocol"))

    def _compile_reference(self) -> str | None:
        """Compile the reference under torch.compile in its worker (never timed); why not, when it fails."""
        try:
            response, _ = self.workers["reference"].request(
                {"op": "compile"}, timeout_s=COMPILE_TIMEOUT_FACTOR * self.config.timeout_s
            )
        except WorkerFailure as exc:
            raise JudgeFailed(f"the reference worker failed while compiling: {exc}") from None
        if response.get("type") == "error":
            return f"{response.get('exc_type')}: {str(response.get('message', ''))[:500]}"
        return None

    def _recheck_graph(self, calls: int, keep: int, sets: int) -> None:
        """Plain calls on two of the candidate's graph buffers after its replays, each checked like a timed call.

        A replayed graph runs what was captured, so a candidate that switches to a shortcut once timing
        starts (H03), or serves answers from a cache keyed on storage (H01), may never show it in a replay.
        Its Python still runs in these calls, on buffers that hold other contents than its last calls saw
        (`op_recheck`): the last answer cannot be right for both, and a storage-keyed cache for either.
        """
        buffers = self.source.sample(range(sets), min(2, sets))
        for buffer in buffers:
            header = {"op": "recheck", "calls": calls, "graph_keep": keep, "buffer": buffer, "compiled": False}
            response, _ = self._candidate_step(
                lambda h=header: self.workers["candidate"].request(h, fetch=()), "timing"
            )
            if response.get("type") == "error":
                raise CandidateFailed(error_failure(response, "timing"))
            what = f"plain call on graph buffer {buffer} after the replays"
            self._check_timed_output(response, buffer, what=what)

    def _check_timed_output(self, response: dict[str, Any], set_index: int, what: str = "") -> None:
        """A timed call's output must be as right as the checked ones (H03: honest only while checked)."""
        phase = f"timing ({what or f'timed call {self.timed_checks}'})"
        self.timed_checks += 1
        problem = check_structure(response, self.signature, self.device or "cpu", exact=not self.task_check)
        if problem is None:
            problem = check_received({**response, "unreadable": "not sent"}, key="captured")
        if problem is None:
            size = expected_bytes(self.signature)
            worker = self.workers["candidate"]
            self._candidate_step(lambda: worker.described(response, ["captured"], 2 * size + (1 << 20)), "timing")
        if problem is not None:
            raise CandidateFailed(Failure(kind=problem.kind, phase="timing", summary=f"{phase}: {problem.summary}"))  # type: ignore[arg-type]
        if self.draws_random:  # no common random state inside a timed region: the structure is all to check
            return
        results = self._compare(f"pool{set_index}", response, "timed", key="captured")
        if self.task_check:  # the task's own check decides, as in the trials
            verdict = self.last_task_check or {"passed": False, "message": "the task's check gave no answer"}
            if not verdict["passed"]:
                summary = f"{phase}: the task's own check: {verdict['message']}"
                raise CandidateFailed(Failure(kind="tolerance", phase="timing", summary=summary))
            return
        for result in results:
            if not result["passed"]:
                raise CandidateFailed(
                    Failure(kind=result["failure_kind"], phase="timing", summary=f"{phase}: {result['summary']}")  # type: ignore[arg-type]
                )

    # ------------------------------------------------------------ workers

    def _new_pair(self, device: str) -> dict[str, WorkerProcess]:
        """A reference and a candidate worker; the reference holds the candidate's channels (it writes the
        candidate's inputs and reads its outputs), never the other way round."""
        channels = WorkerChannels("candidate", self.limits.max_message_bytes)
        pair: dict[str, WorkerProcess] = {}
        try:
            pair["reference"] = WorkerProcess(
                "reference", device, self.task.text, self.limits, policy=self.sandbox, gpu=self.gpu, peer=channels
            )
            pair["candidate"] = WorkerProcess(
                "candidate", device, self.candidate.text, self.limits, self.sandbox, self.gpu, channels=channels
            )
        except SandboxUnavailable as exc:
            for worker in pair.values():
                worker.close()
            channels.close()
            raise JudgeFailed(f"a worker cannot be sandboxed as required: {exc}") from None
        return pair

    def _ask(
        self,
        role: str,
        header: dict[str, Any],
        values: Any = None,
        placed: Any = None,
        fetch: tuple[str, ...] = ("values", "init_inputs", "captured"),
    ) -> tuple[dict[str, Any], Any]:
        try:
            with self._counted(role, header):
                return self.workers[role].request(header, values, placed=placed, fetch=fetch)
        except WorkerFailure as exc:
            raise JudgeFailed(f"the {role} worker failed: {exc}") from None

    @contextmanager
    def _counted(self, role: str, header: dict[str, Any]) -> Iterator[None]:
        """Where a stage's time goes, request by request: `stages_s["correctness.candidate.call"]` is the round
        trip of the candidate's calls in that stage, its outputs written to the channel included
        (docs/record.md)."""
        began = time.monotonic()
        try:
            yield
        finally:
            if self.stage is not None:
                key = f"{self.stage}.{role}.{header.get('op')}"
                self.stages_s[key] = round(self.stages_s.get(key, 0.0) + time.monotonic() - began, 3)

    def _candidate_step(self, step: Any, phase: str) -> Any:
        try:
            return step()
        except WorkerFailure as exc:
            raise CandidateFailed(Failure(kind=exc.kind, phase=phase, summary=str(exc))) from None  # type: ignore[arg-type]

    def _start_timing_pair(self) -> None:
        """Replace both workers by fresh ones, loaded the same way, for timing only.

        The checked pair has been through the correctness trials, and on CUDA the candidate's through a
        kernel trace: on an H200 a traced process launched the same softmax 2-4% slower afterwards even
        with CUPTI torn down (the A/A control read 0.962x and 0.977x), while the reference, never traced,
        did not. A fresh pair times both sides in the same state. Its logs are kept as `<role>_timing`.
        """
        self.closed_logs.update(self._close_workers())
        if not self.booting:  # a second pair, after a failed graph capture
            self._boot_timing_pair()
        self.workers, self.booting = self.booting, {}
        self._reference_hello()
        self.timing_pairs += 1
        self._start_candidate(self._load_reference())

    def _boot_timing_pair(self) -> None:
        """Start the timing pair's interpreters now; `_start_timing_pair` greets and loads them.

        Importing torch and starting CUDA take most of a worker's start (about 8 s a pair on an H200).
        Started while the checked pair works, that is done before the measurement, and in a batch
        before the lanes' gate holds the others back for it. Until loaded, the pair runs no task or
        candidate code.
        """
        self.booting = self._new_pair(self.device or "cpu")

    def _close_workers(self) -> dict[str, WorkerLog]:
        logs = {}
        pairs = self.timing_pairs
        suffix = "" if pairs == 0 else "_timing" if pairs == 1 else f"_timing{pairs}"
        for worker in self.workers.values():
            worker.ask_exit()
        for role, worker in self.workers.items():
            worker.close()
            logs[role + suffix] = WorkerLog(**worker.logs())
            self.memory_peaks[role + suffix] = worker.gpu_peak_bytes
        self.workers = {}
        return logs

    # ------------------------------------------------------------ the record

    def _record(self, duration_s: float, logs: dict[str, WorkerLog]) -> Record:
        self._judge_traces()
        if self.oracle_dtype is not None:
            degraded = self.oracle_dtype != "float64"
            self.capabilities["float64_oracle"] = Capability(
                status="degraded" if degraded else "available",
                required=False,
                detail="an op lacks float64: oracle ran in float32 with TF32 off"
                if degraded
                else "reference re-run in float64",
            )
        if self.failure is None and any(f.severity == "error" for f in self.findings):
            self.failure = integrity_failure(self.findings, "integrity", "integrity rules broken")
        status = decide_status(self.failure, self.findings, self.capabilities)
        worst = max(
            (o for t in self.trials for o in t.outputs), default=None, key=lambda o: o.get("max_abs_error", 0.0)
        )
        correctness = Correctness(
            checked=self.correctness_checked,
            passed=self.correctness_passed,
            method="kernelbench_native" if self.config.mode == "off" else "oracle",
            oracle_dtype=self.oracle_dtype,
            tolerance=self.tolerances,
            trials=self.trials,
            replay=self.replay,
            worst=worst,
            shape_family=self.family.summary() if self.family is not None else None,
            inputs=self.inputs,
            sanitizer=self.sanitizer,
            plan=self.plan.as_record() if self.plan is not None else None,
        )
        record = Record(
            kerneljudge_version=__version__,
            created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            task=Identity(sha256=self.task.sha256, name=self.task.name, path=self.task.path),
            candidate=Identity(
                sha256=self.candidate.sha256,
                name=self.candidate.name,
                path=self.candidate.path,
                extracted_from_response=self.candidate.extracted_from_response,
            ),
            config=self.config.to_dict(),
            device=self.device,
            status=status,
            verified=status == "PASS" and self.config.mode != "off",
            valid=status != "ERROR",
            failure_kind=self.failure.kind if self.failure else None,
            failure=self.failure,
            findings=self.findings,
            capabilities=self.capabilities,
            preflight={"declared_kernels": self.declared_kernels},
            kernel_trace=self.trace_summary,
            correctness=correctness,
            timing=self.timing,
            environment=fingerprint(self.hello),
            logs=logs,
            duration_s=round(duration_s, 3),
            stages_s=self.stages_s,
        )
        record.rewards = rewards_for(record)
        return record


def judge(
    task: Task | str | Path,
    candidate: Candidate | str | Path,
    config: JudgeConfig | None = None,
    progress: Callable[[str], None] | None = None,
    gpu: str | None = None,
    gate: Gate | None = None,
    baselines: dict[str, CachedSide] | None = None,
    rng: random.Random | None = None,
    **overrides: Any,
) -> Record:
    """Judge one candidate against one task and return the verdict record.

    `overrides` are JudgeConfig fields (device="cpu", mode="off", ...); `progress`
    is called with a short description as each stage starts. A batch lane passes
    `gpu` (the workers' CUDA_VISIBLE_DEVICES), `gate` (shared by its lanes) and, with cached baselines,
    the task's `baselines` (`kerneljudge.batch.BaselineCache`). `rng` replaces the operating system's
    randomness in the hidden plan (plan.py): for tests only, since a candidate that knows it knows the plan.
    """
    config = (config or JudgeConfig()).with_(**overrides) if overrides else (config or JudgeConfig())
    task = task if isinstance(task, Task) else load_task(task)
    candidate = candidate if isinstance(candidate, Candidate) else load_candidate(candidate)
    candidate = gpumode.adapt_candidate(task, candidate)  # a GPU MODE submission: custom_kernel as ModelNew
    return Judgment(task, candidate, config, progress, gpu=gpu, gate=gate, baselines=baselines, rng=rng).run()
