"""The timed requests of the timing stage, one side at a time: a `time` request to a worker and its answer
read (samples checked, drains covered, the persisting-L2 reset noted), a timed call's output named after its
sample ran (judgment/stages/kept_call.py), kept and checked like a trial's (H03: honest only while checked), the
timing pool staged once in both workers, and the reference compiled for its compiled side. The calls checked
after the measurement are judgment/stages/timed_rechecks.py's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.outputs import check_received, check_structure, expected_bytes
from kerneljudge.checks.runtime import timed_findings
from kerneljudge.judgment.stages.build import task_failed
from kerneljudge.judgment.stages.calls import compare, tolerance_specs
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed, error_failure
from kerneljudge.judgment.stages.kept_call import MENDED, KeptCall, kept_problem, sample_findings
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.workers import ask, ask_candidate, candidate_step
from kerneljudge.results.verdict import Failure
from kerneljudge.sandbox.talk import WorkerFailure
from kerneljudge.timing import drain
from kerneljudge.timing.plan import INTERLEAVED
from kerneljudge.timing.sides import GraphUnsupported, SampleTimes, TimeRequest, TimeSide

# torch.compile of a reference may take minutes (Inductor's autotuning); it gets this many step timeouts.
COMPILE_TIMEOUT_FACTOR = 5

# The outputs measured requests keep are checked after the samples, outside the measuring hold (`check_deferred`),
# while the candidate's worker keeps them all on the device, up to this many bytes of them; past it, each is
# checked as its request is answered, in the hold (where they were all checked before 0.3.6: 0.06-0.07 s of a
# 0.22-0.26 s hold for the built-in suite's kernels on an H100, docs/batch.md).
DEFERRED_BYTES = 512 * 2**20


def sample_list(values: Any, count: int) -> bool:
    """A worker's list of `count` non-negative times."""
    return (
        isinstance(values, list)
        and len(values) == count
        and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in values)
    )


def time_op(request: TimeRequest) -> str:
    """A timing request's name in `stages_s`: `time` where it is measured, `calibrate` where it only sizes the
    calls per sample (a CUDA graph's capture is in the first of either), `warm` for the call before both."""
    return "warm" if request.warming else "time" if request.measured else "calibrate"


def time_side(
    state: JudgmentState,
    role: str,
    compiled: bool,
    method: str,
    flush_bytes: int,
    graphs: set[tuple[str, int]],
    l2_reset: dict[str, bool | None],
) -> TimeSide:
    """One side of the measurement (`role`: candidate, reference or compiled) as timing/basic.py calls it.
    `graphs` collects the (role, calls) of each CUDA graph timed, `l2_reset` what each side said of the L2."""

    def timed(request: TimeRequest) -> SampleTimes:
        if request.graph:
            graphs.add((role, request.calls))
        keeper = None
        if request.measured and method == INTERLEAVED and not state.native:
            # One timed call's output of the candidate's, kept by its worker and fetched by a request of its
            # own after the parent's clock stops: its copy to the host is no part of the round trip set
            # against the claimed times (worker/timing/timer.py). The call is named after it ran
            # (judgment/stages/kept_call.py).
            # The reference is asked alike and keeps none.
            sets = len(request.inputs)
            keeper = KeptCall(
                state.source,
                request.samples,
                request.calls,
                sets,
                keeps=role == "candidate",
                commits=request.commit_calls,
            )
        keeps = keeper is not None and role == "candidate"
        deferred = keeps and defers(state, len(state.timed.deferred_checks) + 1)
        if keeps and not deferred:
            check_deferred(state)  # the kept outputs in order, before this request's is kept
        timing = protocol.Time(
            calls=request.calls,
            samples=request.samples,
            warmup=request.warmup,
            flush_bytes=flush_bytes,
            precursor_ms=request.precursor_ms,
            method=request.method,
            compiled=compiled,
            profile_range=role == "candidate",
            staged=True,  # the pool was sent once, before the first request
            graph=request.graph,
            ask_keep=keeper is not None,
            keep_earlier=bool(state.timed.deferred_checks),
        )
        interim = keeper.answer if keeper is not None else None
        began = time.perf_counter()  # the parent's clock around the round trip only, not its checks
        if role == "candidate":
            answer, _ = ask_candidate(state, timing, "timing", op=time_op(request), fetch=(), interim=interim)
            request_ms = (time.perf_counter() - began) * 1e3
            if isinstance(answer, protocol.GraphUnsupported):
                raise GraphUnsupported(f"the candidate side: {answer.message}", side=role)
            if isinstance(answer, protocol.Error):
                raise CandidateFailed(error_failure(answer, "timing"))
            if keeper is not None:
                state.timed.deferred_checks.append(kept_set(state, keeper, answer))
                if not deferred:
                    check_deferred(state)
        else:
            answer, _ = ask(state, "reference", timing, fetch=(), op=time_op(request), interim=interim)
            request_ms = (time.perf_counter() - began) * 1e3
            if isinstance(answer, protocol.GraphUnsupported):
                raise GraphUnsupported(f"the {role} side: {answer.message}", side=role)
            if isinstance(answer, protocol.Error):
                raise JudgeFailed(f"the {role} failed while timed: {answer.message}")
            if keeper is not None and keeper.missing():
                raise JudgeFailed(f"the {role} worker {keeper.missing()}")
        assert isinstance(answer, protocol.Timed)  # (a `time` request's every other answer is handled above)
        expected = 1 if request.method == "do_bench" else request.samples
        times = answer.times_ms
        host = answer.host_ms if answer.host_ms is not None else []
        busy = answer.busy_ms if answer.busy_ms is not None else []
        # Samples timed without a graph on CUDA come with their drains (timing/drain.py).
        drained = state.build.device == "cuda" and not request.graph and request.method != "do_bench"
        drains, floor = answer.drain_ms, answer.drain_floor_ms
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
            l2_reset[role] = answer.l2_reset
        times = [float(t) for t in times]
        if drained and not state.native:  # `off` keeps KernelBench's figures as they are
            left = drain.left_behind([float(d) for d in drains], float(floor))
            if request.measured and role == "candidate":
                state.timed.drain_left += left
                state.timed.drain_timed_ms += [t * request.calls for t in times]
            times = drain.covered(times, request.calls, left)
        if request.measured and keeper is not None:
            note_spans(state, role, request, keeper, times, request_ms)
        return SampleTimes(times, [float(h) for h in host], [float(b) for b in busy], request_ms)

    return timed


def note_spans(
    state: JudgmentState, role: str, request: TimeRequest, keeper: KeptCall, times: list[float], request_ms: float
) -> None:
    """A measured request's spans on the parent's clock beyond its claimed calls (judgment/stages/untimed_work.py): its
    commit, and its round trip less the calls' claimed time and the precursors asked for, per sample."""
    spans = state.timed.untimed_spans.setdefault(role, {})
    if keeper.window_ms is not None:
        spans.setdefault("commit", []).append((keeper.window_ms, keeper.commits))
    around = request_ms - sum(times) * request.calls - request.samples * request.precursor_ms
    spans.setdefault("requests", []).append((around / max(1, request.samples), request.calls))


def stage(state: JudgmentState, sets: list[dict[str, Any]], shape: dict[str, Any] | None = None) -> None:
    """Make the timing pool once: the reference worker makes the sets' inputs again (from their seeds and
    distributions), keeps their outputs and the oracle's to check timed calls, and writes them to the
    candidate's inbox, or has the candidate's worker make them again (`JudgmentState.inputs_made`); every
    timing request then names the pool."""
    made = state.inputs_made(shape)
    # The checks of timed outputs made ready with the pool, beside the other lanes, not in the measuring hold
    checked = not (state.native or state.calls.task_check or state.calls.draws_random) and state.calls.signature
    tolerances = tolerance_specs(state) if checked else None
    inputs_to = "made" if made else "candidate"
    staging = protocol.Stage(sets=sets, on_device=not state.native, inputs_to=inputs_to, tolerances=tolerances)
    staged, _ = ask(state, "reference", staging)
    if not isinstance(staged, protocol.Staged):
        task_failed(state, staged, "the reference worker could not stage the timing inputs")
    placed = ([], {}) if made else (staged.inputs, staged.input_tensors)
    state.calls.signature = dict(staged.signature or state.calls.signature)
    request = protocol.Stage(made=staged.made) if made else protocol.Stage()
    answer, _ = ask_candidate(state, request, "timing", placed=placed, fetch=())
    if isinstance(answer, protocol.InputsDiffer) and made:  # shipped from now on, the pool staged again
        state.inputs = {**state.inputs, "shipped": "timing pool", "why": answer.detail[:500]}
        stage(state, sets, shape)
        return
    if isinstance(answer, protocol.Error):
        raise CandidateFailed(error_failure(answer, "timing"))
    if not isinstance(answer, protocol.Staged):
        raise CandidateFailed(Failure(kind="crash", phase="timing", summary="the candidate worker broke protocol"))


@dataclass
class Ready:
    """A timing pair made ready to measure: its pool staged (the sets it was made of), the sides to time, the
    reference's compile where asked and why it failed, the sides whose first call was made."""

    sets: list[dict[str, Any]]
    sides: list[str]
    signature: dict[str, Any]  # of the outputs at the pool's shape, as the staging reported it
    compile_error: str | None = None
    warmed: list[str] = field(default_factory=list)


def make_ready(
    state: JudgmentState,
    sets: list[dict[str, Any]],
    shape: dict[str, Any] | None,
    method: str,
    flush_bytes: int,
    cached: set[str],
    warm: bool,
) -> Ready:
    """Stage the pool, compile the reference where a compiled side is asked for, and with `warm` make one
    untimed call of each side (its first: a fresh worker's JIT compiles there). `cached`: the sides whose
    figures come from cached baselines, not timed here."""
    stage(state, sets, shape)
    ready = Ready(sets, ["candidate"] + ([] if "reference" in cached else ["reference"]), dict(state.calls.signature))
    if state.config.timing_compile and method == INTERLEAVED and "compiled" not in cached:
        ready.compile_error = compile_reference(state)
        if ready.compile_error is None:
            ready.sides.append("compiled")
    if warm and method == INTERLEAVED:  # first calls (compiles) beside the other lanes
        for name in ready.sides:
            side = time_side(state, name, name == "compiled", method, flush_bytes, set(), {})
            side(TimeRequest([None] * len(sets), 1, 1, 0, measured=False, warming=True))
        ready.warmed = list(ready.sides)
    return ready


def compile_reference(state: JudgmentState) -> str | None:
    """Compile the reference under torch.compile in its worker (never timed); why not, when it fails."""
    try:
        compiled, _ = state.workers["reference"].request(
            protocol.Compile(), timeout_s=COMPILE_TIMEOUT_FACTOR * state.config.timeout_s
        )
    except WorkerFailure as exc:
        raise JudgeFailed(f"the reference worker failed while compiling: {exc}") from None
    if isinstance(compiled, protocol.Error):
        return f"{compiled.exc_type}: {compiled.message[:500]}"
    return None


def kept_set(state: JudgmentState, keeper: KeptCall, answer: protocol.Answer) -> tuple[int, list[Any]]:
    """Read a candidate's answer to a `time` request that kept a call: what the request left (findings), what its
    worker found in the named sample before the copy (`kept_problem`; the seal, worker/seal/sample.py), and the
    input set of the kept call, noted in `kept_calls`, with the digests its worker committed for that call's output
    before the call was named. A worker that did not say each sample was over, kept nothing or committed nothing
    fails the candidate."""
    # An answer of another kind (a `graph_unsupported` to a request without `graph`) says nothing of its samples.
    timed = answer if isinstance(answer, protocol.Timed) else protocol.Timed(times_ms=[])
    state.add_findings(timed_findings(timed.evidence, state.config.policy))
    state.add_findings(sample_findings(timed))
    problem = kept_problem(timed)
    if problem is not None:
        raise CandidateFailed(problem)
    checked, missing, committed = keeper.checked_set(), keeper.missing(), keeper.checked_digests()
    if checked is None or keeper.call is None or missing or timed.kept != 1:
        summary = f"the candidate worker {missing or 'kept no timed output'}"
        raise CandidateFailed(Failure(kind="crash", phase="timing", summary=summary))
    if committed is None:
        summary = "the candidate worker committed no digests of its checked sample's outputs"
        raise CandidateFailed(Failure(kind="integrity_violation", phase="timing", summary=summary))
    state.timed.kept_calls.append({"sample": keeper.sample, "call": keeper.call, "set": checked})
    return checked, committed


def defers(state: JudgmentState, kept: int) -> bool:
    """Whether `kept` outputs of the timing pool's signature fit DEFERRED_BYTES, to be checked after the samples."""
    return kept * expected_bytes(state.calls.signature) <= DEFERRED_BYTES


def check_deferred(state: JudgmentState) -> None:
    """Check the outputs the candidate's worker still keeps, oldest first: after the samples, or before a request
    whose kept output would not fit beside them."""
    while state.timed.deferred_checks:
        check_captured(state, state.timed.deferred_checks.pop(0))


def check_captured(state: JudgmentState, kept: tuple[int, list[Any]], what: str = "") -> None:
    """Fetch the output the candidate's oldest `time` request kept (a request of its own) and check it: `kept` is
    its input set and the digests its copy had when it was made (`kept_set`)."""
    captured, _ = ask_candidate(state, protocol.Captured(), "timing", fetch=())
    check_timed_output(state, captured, kept[0], what=what, committed=kept[1])


def check_timed_output(
    state: JudgmentState, output: protocol.Answer, set_index: int, what: str = "", committed: list[Any] | None = None
) -> None:
    """A timed call's output must be as right as the checked ones (H03: honest only while checked). `committed`:
    the digests of a kept copy when it was made, which the copy the reference's worker is sent must still have."""
    phase = f"timing ({what or f'timed call {state.timed.checks}'})"
    state.timed.checks += 1
    problem = check_structure(
        output, state.calls.signature, state.build.device or "cpu", exact=not state.calls.task_check
    )
    if problem is None:
        assert isinstance(output, protocol.Described)  # (an answer that describes no output is malformed)
        problem = check_received(output, unreadable="not sent")
    if problem is None:
        size = expected_bytes(state.calls.signature)
        worker = state.workers["candidate"]
        candidate_step(lambda: worker.described(output, ["captured"], 2 * size + (1 << 20)), "timing")
    if problem is not None:
        raise CandidateFailed(Failure(kind=problem.kind, phase="timing", summary=f"{phase}: {problem.summary}"))  # type: ignore[arg-type]
    if state.calls.draws_random:  # no common random state inside a timed region: the structure is all to check
        return
    assert isinstance(output, protocol.Described)  # (an answer that describes no output has its problem above)
    results = compare(state, f"pool{set_index}", output, "timed")
    if committed is not None and state.calls.last_digests != committed:
        raise CandidateFailed(Failure(kind="integrity_violation", phase="timing", summary=f"{phase}: {MENDED}"))
    if state.calls.task_check:  # the task's own check decides, as in the trials
        verdict = state.calls.last_task_check or {"passed": False, "message": "the task's check gave no answer"}
        if not verdict["passed"]:
            summary = f"{phase}: the task's own check: {verdict['message']}"
            raise CandidateFailed(Failure(kind="tolerance", phase="timing", summary=summary))
        return
    for result in results:
        if not result["passed"]:
            raise CandidateFailed(
                Failure(kind=result["failure_kind"], phase="timing", summary=f"{phase}: {result['summary']}")  # type: ignore[arg-type]
            )
