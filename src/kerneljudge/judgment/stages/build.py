"""The build stage: preflight's static scan hooked up, the reference worker's hello and load (where a batch's
gate admits the judgment by the device memory it needs), and the candidate's import and build, first at the
public shape and again at each hidden or timing shape. The capabilities known at the start (CUDA, Triton,
the OS sandbox, the profiler, compute-sanitizer) are recorded here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

from kerneljudge import protocol
from kerneljudge.checks.runtime import import_findings
from kerneljudge.checks.support import unsupported_reason
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.judgment.gate import OPEN_GATE, ahead_fits, memory_need, timing_pool_sets
from kerneljudge.judgment.stages.failures import (
    CandidateFailed,
    JudgeFailed,
    TaskUnsupported,
    error_failure,
    integrity_failure,
)
from kerneljudge.judgment.stages.shared_reference import KEEP_BYTES, LentReference
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.workers import add_waiting, ask, ask_candidate, candidate_step, counted, starting
from kerneljudge.preflight import preflight
from kerneljudge.results.verdict import Capability, Failure
from kerneljudge.sandbox.confine import LAYERS, SandboxPolicy
from kerneljudge.sandbox.probe import gpus_hidden_by_sandbox
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.tasks.inputs_source import inputs_source
from kerneljudge.tasks.shapes import MalformedFamily, describe_shape, family_from, size_integers

# The error answer of a candidate worker that found no ModelNew to build (worker/candidate.py, op_load).
NO_MODEL_ERROR = protocol.Error(
    phase="init", exc_type="AttributeError", exc_module="builtins", message="the candidate defines no ModelNew"
)


def settle_asked_device(state: JudgmentState) -> None:
    """A judgment asked for the CPU knows its device before any worker says hello (and if none does)."""
    if state.config.device == "cpu":
        state.build.device = "cpu"


def run_preflight(state: JudgmentState) -> None:
    """The static scan of the candidate's source (preflight/): its findings, the kernels it declares; in
    `enforce`, a rejected source fails before its import."""
    no_code = state.candidate.no_code  # a model's response with no block to judge (sources/candidate.py)
    try:
        result = preflight(state.candidate.text, state.config.mode, state.config.policy)
    except SyntaxError as exc:
        if no_code is not None and not state.candidate.extracted_from_response:  # prose, not broken code
            raise CandidateFailed(Failure(kind="compile_error", phase="preflight", summary=no_code)) from None
        raise CandidateFailed(
            Failure(
                kind="compile_error",
                phase="preflight",
                summary=f"SyntaxError: {exc.msg} (line {exc.lineno})",
                exception="SyntaxError",
            )
        ) from None
    state.findings.extend(result.findings)
    state.build.declared_kernels = result.report.declared_kernels
    if result.rejected and state.config.enforcing:
        raise CandidateFailed(integrity_failure(state.findings, "preflight", "rejected before import"))
    if result.defines_no_model:  # the failure its worker would report (worker/candidate.py), without one
        if no_code is not None:
            raise CandidateFailed(Failure(kind="compile_error", phase="preflight", summary=no_code))
        raise CandidateFailed(error_failure(NO_MODEL_ERROR, "init"))


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


def start_reference(state: JudgmentState, sanitizer_decision: Callable[[], sanitize.Decision]) -> None:
    """The reference worker's hello: the device the judgment runs on, and the capabilities it shows."""
    requested = state.config.device
    hello = state.build.hello = reference_hello(state)
    cuda = hello.cuda_available
    state.build.device = "cuda" if cuda and requested != "cpu" else ("cpu" if requested != "cuda" else None)
    layers = state.workers["reference"].sandbox_layers
    hidden = None if cuda or requested == "cpu" else gpus_hidden_by_sandbox(layers)
    state.capabilities["cuda_runtime"] = Capability(
        status="available" if cuda else "unavailable",
        required=requested == "cuda",
        detail=(
            f"{hello.gpu_name} (capability {hello.gpu_capability})"
            if cuda
            else (hidden or "no CUDA device visible") + ("" if requested == "cuda" else ": judged on the CPU")
        ),
    )
    triton = hello.triton
    state.capabilities["triton"] = Capability(
        status="available" if triton else "unavailable",
        required=False,
        detail=(
            f"Triton {triton}"
            + (" through the interpreter (TRITON_INTERPRET=1)" if state.build.device == "cpu" else "")
        )
        if triton
        else "Triton is not installed",
    )
    state.capabilities["os_sandbox"] = sandbox_capability(state.workers["candidate"].sandbox_layers, state.sandbox)
    state.capabilities["profiler_trace"] = Capability(
        status="unavailable",
        required=False,
        detail="kernel traces need CUDA" if state.build.device != "cuda" else "no call was traced",
    )
    state.capabilities["compute_sanitizer"] = sanitizer_decision().capability


def reference_hello(state: JudgmentState) -> protocol.Hello:
    """The reference worker's first frame; a worker that does not start is the judge's failure."""
    try:
        # the wait for the worker's start (torch's import, CUDA's), the pair stopped while another lane measures
        with counted(state, "reference", "hello"), starting(state, state.workers.values()):
            frame = state.workers["reference"].receive(timeout_s=state.limits.start_timeout_s)
        hello = protocol.decode_greeting(frame)
    except WorkerFailure as exc:
        raise JudgeFailed(f"the reference worker did not start: {exc}") from None
    except protocol.ProtocolError as exc:
        raise JudgeFailed(f"the reference worker did not say hello: {exc}") from None
    if not isinstance(hello, protocol.Hello):
        raise JudgeFailed(f"the reference worker did not say hello: {hello.exc_type}: {hello.message}")
    return hello


def task_failed(state: JudgmentState, error: protocol.Answer, what: str) -> NoReturn:
    """The reference failed (`error`, its answer: an error, or a kind the request cannot have gone wrong with):
    the task cannot run here (UNSUPPORTED) or it is broken (a judge error)."""
    if not isinstance(error, protocol.Failed):
        raise JudgeFailed(f"{what}: the reference worker answered {error.kind!r}")
    reason = unsupported_reason(error, state.build.device)
    if reason is not None:
        raise TaskUnsupported(reason)
    raise JudgeFailed(f"{what}: {error.exc_type}: {error.message}")


def load_reference(state: JudgmentState, shape: dict[str, Any] | None = None) -> Any:
    """Build the reference (at `shape`, a hidden shape of its family) and return its init inputs."""
    admit = (
        shape is None and state.gate is not OPEN_GATE and state.build.device == "cuda" and not state.admission.admitted
    )
    # Whether both pairs fit the GPU side by side, for a timing pair to be made ready ahead
    # (judgment/stages/timing_ahead.py)
    room = state.readies_ahead and shape is None and state.build.device == "cuda" and state.admission.ahead_fits is None
    fresh = shape is None and not state.build.family_read  # the judgment's first load (a group's reference: Load)
    # A group's reference keeps its trials' outputs for the group's next judgments (worker/correctness/memo.py).
    keep = KEEP_BYTES if isinstance(state.workers["reference"], LentReference) else 0
    load = protocol.Load(seed=state.config.public_seed, shape=shape, footprint=admit or room, fresh=fresh, keep=keep)
    loaded, values = ask(state, "reference", load)
    where = f" at {describe_shape(shape)}" if shape else ""
    if not isinstance(loaded, protocol.Loaded):
        phase = loaded.phase if isinstance(loaded, protocol.Failed) else loaded.kind
        task_failed(state, loaded, f"the task failed to {phase}{where}")
    if fresh and state.shared is not None and state.pair_log.checked_from == "group":
        differs = state.shared.check_fresh(loaded)
        if differs:
            raise JudgeFailed(f"the group's reference described its task otherwise than at its first load: {differs}")
    total = state.build.gpu_memory_bytes
    footprint = loaded.footprint
    if shape is None and footprint:
        state.admission.footprint = footprint  # what a run short of memory is set against (device_memory.py)
    if room:
        state.admission.ahead_fits = ahead_fits(footprint, total, timing_pool_sets(footprint, total))
    if admit:  # asked even for no need: a gate may hold a judgment to run alone (batch.py)
        state.admission.pool_sets = timing_pool_sets(footprint, total)
        # A group's reference waits, idle, with its model and last outputs while the candidate is timed on a fresh
        # pair (judgment/stages/shared_reference.py): reserved as two pairs side by side, as timing ahead is.
        timed, beside = state.config.timing, bool(state.admission.ahead_fits) or state.shared is not None
        state.admission.reserved_bytes = memory_need(footprint, timed, state.admission.pool_sets, beside=beside)
        if state.admission.reserved_bytes and keep:  # and the outputs it keeps for the group's next judgments
            state.admission.reserved_bytes += keep
        if state.admission.reserved_bytes:
            state.progress(f"waiting for {state.admission.reserved_bytes / 2**30:.1f} GiB of device memory")
        waited = time.monotonic()
        state.admission.held.enter_context(state.gate.admit(state.gpu, state.admission.reserved_bytes, total))
        state.admission.admitted = True
        add_waiting(state, time.monotonic() - waited)
    if shape is None:
        state.build.inputs_writable = loaded.inputs_writable is True
    if shape is None and not state.build.family_read and not state.native:
        state.build.family_read = True
        state.build.size_integers = size_integers(loaded.integers)
        try:
            state.build.family = family_from(loaded)
        except MalformedFamily as exc:
            if state.config.shape_trials:  # the task asks for shapes the judge cannot draw: the task's fault
                raise JudgeFailed(f"the task's shape family is malformed: {exc}") from None
    return values["init_inputs"]


def start_candidate(state: JudgmentState, init_inputs: Any) -> None:
    """The candidate worker's hello (on the reference's device), then its import and build."""
    worker = state.workers["candidate"]
    with counted(state, "candidate", "hello"), starting(state, [worker]):  # as the reference's (reference_hello)
        frame = candidate_step(lambda: worker.receive(timeout_s=state.limits.start_timeout_s), phase="start")
    try:
        hello = protocol.decode_greeting(frame)
    except protocol.ProtocolError:
        hello = None
    if not isinstance(hello, protocol.Hello):
        raise CandidateFailed(Failure(kind="crash", phase="start", summary="the candidate worker did not start"))
    if hello.device.split(":")[0] != state.build.device:
        raise JudgeFailed(f"the workers disagree on the device ({hello.device} vs {state.build.device})")
    prepared = hello.triton_prepared_s  # said before any candidate code ran (worker/prepare.py)
    if prepared is not None and state.stage is not None:
        state.stages_s[f"{state.stage}.candidate.hello:triton"] = float(prepared)
    build_candidate(state, init_inputs)


def inputs_text(state: JudgmentState, shape: dict[str, Any] | None = None) -> str | None:
    """What of the task a Load sends the candidate's worker: where it makes this shape's inputs itself, the
    task's inputs-only source (tasks/inputs_source.py), never the task's own text; else nothing. A task whose
    inputs cannot be cut from its reference has them shipped from the start, and the record says why."""
    if not state.inputs_made(shape):
        return None
    reduced = inputs_source(state.task.text)
    if reduced.text is None:
        why = f"the task's inputs cannot be made apart from its reference: {reduced.refused}"
        state.inputs = {**state.inputs, "shipped": "the start", "why": why[:500]}
    return reduced.text


def build_candidate(state: JudgmentState, init_inputs: Any, shape: dict[str, Any] | None = None) -> None:
    """Import the candidate and build its model (the first time), or build it again at a hidden shape."""
    # With inputs made in each worker, the task's inputs-only source is loaded before the candidate's.
    load = protocol.Load(seed=state.config.public_seed, task=inputs_text(state))
    loaded, _ = ask_candidate(state, load, "build", values=init_inputs)
    if isinstance(loaded, protocol.Error):
        failure = error_failure(loaded, "import" if loaded.phase == "import" else "init")
        if shape:
            failure.summary = f"at {describe_shape(shape)}: {failure.summary}"
        raise CandidateFailed(failure)
    if not isinstance(loaded, protocol.Loaded):
        raise CandidateFailed(Failure(kind="crash", phase="build", summary="the candidate worker broke protocol"))
    if not state.native:
        state.add_findings(import_findings(loaded.evidence, state.config.policy))
