"""The worker pair of a judgment: starting one, a request to either worker, where its round trip counts
(`stages_s`), a candidate step whose worker failure is the candidate's, and closing the pair with its logs.

The reference worker holds the candidate's channels (it writes the candidate's inputs and reads its
outputs), never the other way round (docs/process-model.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from kerneljudge import protocol
from kerneljudge.judgment.gate import OPEN_GATE
from kerneljudge.judgment.stages.failures import CandidateFailed, JudgeFailed
from kerneljudge.judgment.stages.state import Closing, JudgmentState
from kerneljudge.protocol.environment import PREPARE_TRITON_ENV
from kerneljudge.results.verdict import Failure, WorkerLog
from kerneljudge.sandbox.confine import SandboxPolicy, SandboxUnavailable
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels, WorkerFailure


def new_pair(
    state: JudgmentState, device: str, prepare_triton: bool = False, checked: bool = False
) -> dict[str, WorkerProcess]:
    """A reference and a candidate worker for this judgment: for the `checked` pair of a judgment in a group, the
    group's reference lent with a fresh candidate worker (judgment/stages/shared_reference.py); else a spare one
    where the judge keeps spares (judgment/stages/spare_pairs.py), given its sources now, or else one started
    here. `prepare_triton`: the candidate's worker readies Triton as it starts (`PREPARE_TRITON_ENV`), for a pair
    started ahead of its use; spares, started ahead too, always do off the CPU (a worker that finds itself on the
    CPU skips it)."""
    shared, kind = state.shared, (device, state.gpu, state.sandbox, state.limits)
    if checked and shared is not None and shared.kind == kind:
        state.pair_log.checked_from = "group"
        return shared.lend(state.candidate.text, prepare_triton=prepare_triton)
    start = partial(start_pair, device, state.gpu, state.sandbox, state.limits, prepare_triton=device != "cpu")
    pair = state.spares.take(kind, start) if state.spares else None
    came_from = "started" if pair is None else "spare"
    if pair is not None:
        pair["reference"].assign(state.task.text)
        pair["candidate"].assign(state.candidate.text)
    else:
        texts = (state.task.text, state.candidate.text)
        pair = start_pair(device, state.gpu, state.sandbox, state.limits, *texts, prepare_triton=prepare_triton)
    if checked:
        state.pair_log.checked_from = came_from
    else:
        state.pair_log.timing_from.append(came_from)
    return pair


def start_pair(
    device: str,
    gpu: str | None,
    policy: SandboxPolicy,
    limits: WorkerLimits,
    task_text: str | None = None,
    candidate_text: str | None = None,
    prepare_triton: bool = False,
) -> dict[str, WorkerProcess]:
    """Start a reference and a candidate worker (with no sources: a spare pair); the reference holds the
    candidate's channels (it writes the candidate's inputs and reads its outputs), never the other way round."""
    channels = WorkerChannels("candidate", limits.max_message_bytes)
    pair: dict[str, WorkerProcess] = {}
    ready = {PREPARE_TRITON_ENV: "1"} if prepare_triton else {}
    try:
        pair["reference"] = WorkerProcess("reference", device, task_text, limits, policy=policy, gpu=gpu, peer=channels)
        pair["candidate"] = WorkerProcess(
            "candidate", device, candidate_text, limits, policy, gpu, channels=channels, extra_env=ready
        )
    except SandboxUnavailable as exc:
        for worker in pair.values():
            worker.close()
        channels.close()
        raise JudgeFailed(f"a worker cannot be sandboxed as required: {exc}") from None
    return pair


def ask(
    state: JudgmentState,
    role: str,
    request: protocol.Request,
    values: Any = None,
    placed: Any = None,
    fetch: tuple[str, ...] = ("values", "init_inputs", "captured"),
    op: str | None = None,
    interim: Callable[[protocol.Interim], protocol.Request | None] | None = None,
) -> tuple[protocol.Answer, Any]:
    """A request to a worker whose failure is the judge's (the reference's, or a judge-side request); `op`
    names its round trip in `stages_s` where the request's own op would not say enough; `interim` answers
    the frames the worker sends within it (sandbox/talk.py)."""
    try:
        with counted(state, role, op or request.op):
            return state.workers[role].request(request, values, placed=placed, fetch=fetch, interim=interim)
    except WorkerFailure as exc:
        raise JudgeFailed(f"the {role} worker failed: {exc}") from None


def ask_candidate(
    state: JudgmentState, request: protocol.Request, phase: str, op: str | None = None, **kw: Any
) -> tuple[protocol.Answer, Any]:
    """A request to the candidate's worker (`kw`: values, placed, fetch, max_bytes, interim), its round trip
    counted as `op` (default the request's): its answer and the values fetched; its worker failing is the
    candidate's failure in `phase`."""
    with counted(state, "candidate", op or request.op):
        return candidate_step(lambda: state.workers["candidate"].request(request, **kw), phase=phase)


def add_seconds(state: JudgmentState, key: str, seconds: float) -> None:
    """Add `seconds` to `stages_s[key]`, to the microsecond (a part of a stage, summed over its occurrences)."""
    state.stages_s[key] = round(state.stages_s.get(key, 0.0) + seconds, 6)


def add_waiting(state: JudgmentState, seconds: float) -> None:
    """Count `seconds` spent at the lane gate in `stages_s["waiting"]` (which `clocked` leaves out of a stage)."""
    state.stages_s["waiting"] = round(state.stages_s.get("waiting", 0.0) + seconds, 3)


@contextmanager
def at_gate(state: JudgmentState, measuring: bool) -> Iterator[None]:
    """Hold the lane gate (gate.py) for the block: to measure (every other lane paused) or to work beside the
    other lanes; the wait goes to `stages_s["waiting"]`, which `clocked` leaves out of the stage's time."""
    if measuring and state.gate is not OPEN_GATE:
        state.progress("waiting for the other lanes to pause")
    waited = time.monotonic()
    with state.gate.measure(state.gpu) if measuring else state.gate.work():
        add_waiting(state, time.monotonic() - waited)
        yield


def let_others_measure(state: JudgmentState) -> None:
    """Between two steps of a stage that works: a lane waiting to measure goes first (gate.let_measure); the
    pause counts as waiting. This judgment's timing pair, if it is still starting, is stopped while the other lane
    measures: its interpreters importing torch would load the CPU under that measurement (an 18% shift of a speedup
    under a concurrent build on an H200, 2026-11-30, judge 0.1.0). A pair made ready ahead is greeted, or being, by
    a thread of its own (timing_ahead.py), whose waits for it stop it the same way."""
    booting = fresh(state.booting.values()) if state.ahead is None else []
    add_waiting(state, state.gate.let_measure(booting))


def fresh(workers: Iterable[Any]) -> list[Any]:
    """The workers asked nothing yet: no code of a task's or a candidate's has run in them, and no GPU kernel."""
    return [worker for worker in workers if not worker.asked]


@contextmanager
def starting(state: JudgmentState, workers: Iterable[Any]) -> Iterator[None]:
    """Wait in the block for workers to start (their hello) with the lane's hold lent to the other lanes' measuring:
    those of `workers` asked nothing yet are stopped while a lane measures (gate.LaneGate.starting). The time they
    stood stopped and the hold's wait to be taken again count as waiting."""
    with state.gate.starting(fresh(workers)) as paused:
        yield
    if state.stage == "ahead":  # the thread that readies the timing pair: the lane's own thread did not wait
        add_seconds(state, "ahead.waiting", paused.seconds)
    else:
        add_waiting(state, paused.seconds)


@contextmanager
def counted(state: JudgmentState, role: str, op: str) -> Iterator[None]:
    """Where a stage's time goes, request by request: `stages_s["correctness.candidate.call"]` is the round
    trip of the candidate's calls in that stage, its outputs written to the channel included, and
    `stages_s["correctness.candidate.call:write"]` that part of it as the worker clocked it (docs/record.md)."""
    began = time.monotonic()
    worker = state.workers.get(role)
    if worker is not None:
        worker.last_clock = {}
    try:
        yield
    finally:
        if state.stage is not None:  # to the microsecond: sums of many sub-millisecond round trips rounded to
            # the millisecond at each step lost them (a CPU judgment's `captured` fetches summed to 0.0)
            key = f"{state.stage}.{role}.{op}"
            add_seconds(state, key, time.monotonic() - began)
            for part, seconds in (worker.last_clock if worker is not None else {}).items():
                add_seconds(state, f"{key}:{part}", seconds)


@contextmanager
def clocked(state: JudgmentState, name: str) -> Iterator[None]:
    """Add the wall time of the block to the record's `stages_s[name]`, less what it spent waiting at the
    gate (counted in `stages_s["waiting"]`)."""
    began, waited = time.monotonic(), state.stages_s.get("waiting", 0.0)
    state.stage = name
    try:
        yield
    finally:
        state.stage = None
        spent = time.monotonic() - began - (state.stages_s.get("waiting", 0.0) - waited)
        state.stages_s[name] = round(state.stages_s.get(name, 0.0) + spent, 3)


def candidate_step(step: Any, phase: str) -> Any:
    """Run a step with the candidate's worker; its worker failing (a crash, a timeout) is the candidate's."""
    try:
        return step()
    except WorkerFailure as exc:
        raise CandidateFailed(Failure(kind=exc.kind, phase=phase, summary=str(exc))) from None  # type: ignore[arg-type]


def close_workers(
    state: JudgmentState, before_removal: dict[str, Callable[[Path], None]] | None = None
) -> dict[str, WorkerLog]:
    """Close the current pair; its logs, named by role and by which timing pair it was. `before_removal`: by
    role, what is done with a worker's workspace once that worker is gone (the compiler-cache carry)."""
    pair, state.workers = state.workers, {}
    return closed(state, pair, state.pair_log.started, before_removal or {})


def closed(
    state: JudgmentState,
    pair: dict[str, WorkerProcess],
    pairs: int,
    before_removal: dict[str, Callable[[Path], None]],
    ended: Callable[[], None] | None = None,
) -> dict[str, WorkerLog]:
    """Close `pair`, the judgment's pair number `pairs` (0: the checked pair); its logs and peaks by name.
    `ended` is called once both workers' processes are gone, before their logs are filed and their workspaces
    removed."""
    logs = {}
    suffix = "" if pairs == 0 else "_timing" if pairs == 1 else f"_timing{pairs}"
    for worker in pair.values():
        worker.ask_exit()
    for worker in pair.values():
        worker.end()
    if ended is not None:
        ended()
    for role, worker in pair.items():
        worker.close(before_removal.get(role))
        logs[role + suffix] = WorkerLog(**worker.logs())
        state.admission.memory_peaks[role + suffix] = worker.gpu_peak_bytes
    return logs


def close_beside(state: JudgmentState) -> None:
    """Close the current pair in a thread while the judgment goes on with the next (the fresh timing pair
    greeted, loaded and its pool staged): its exit, on CUDA a context's teardown, took 0.2-0.25 s of an H200's
    timing stage (docs/batch.md). The lane counts it as its work (the gate's `work_beside`: no other lane
    measures) until the pair's processes are gone; `closing_ended` waits for that before the measuring hold. Its
    logs and workspaces are filed after that, beside the judgment, and `join_closing` waits for all of it
    before the record."""
    pair, state.workers = state.workers, {}
    pairs = state.pair_log.started
    closing = state.closing = Closing(threading.Event())
    began = time.monotonic()

    def close(release: Callable[[], None]) -> None:
        def ended() -> None:  # nothing of the pair runs any more, on the GPU either: the other lanes may measure
            if not closing.ended.is_set():
                closing.ended_s = time.monotonic() - began
                release()
                closing.ended.set()

        try:
            closing.logs.update(closed(state, pair, pairs, {}, ended))  # asks both to exit at once
            for role, worker in pair.items():  # each one's own end: the word to exit until its launcher was gone
                if worker.gone_s is not None:
                    add_seconds(state, f"timing.checked_pair.close:{role}.gone", worker.gone_s)
        except Exception as exc:
            closing.failed.append(exc)
        finally:
            ended()
            closing.seconds = time.monotonic() - began

    closing.thread = work_beside(state, close, "kj-close-pair")


def work_beside(state: JudgmentState, work: Callable[[Callable[[], None]], None], name: str) -> threading.Thread:
    """Run `work` in a thread while the judgment goes on, counted as its lane's work until it ends (the gate's
    `work_beside`): no other lane measures meanwhile (gate.py). The hold is taken here, where the lane holds
    the gate to work, and released by the thread as it ends, or sooner where `work` calls what it is given
    (a pair's close, once its processes are gone)."""
    hold = ExitStack()
    hold.enter_context(state.gate.work_beside())

    def held() -> None:
        with hold:
            work(hold.close)

    thread = threading.Thread(target=held, name=name, daemon=True)
    thread.start()
    return thread


def closing_ended(state: JudgmentState) -> None:
    """Wait until the processes of a pair closed beside (`close_beside`) are gone: before the measuring hold. The
    wait counts in `stages_s["timing.checked_pair.close"]`. A close that failed (its processes perhaps not gone)
    is joined and its failure raised here, before any sample, as a close in line would raise it."""
    closing = state.closing
    if closing is None:
        return
    began = time.monotonic()
    closing.ended.wait()
    add_seconds(state, "timing.checked_pair.close", time.monotonic() - began)
    if closing.failed:
        join_closing(state)


def join_closing(state: JudgmentState) -> None:
    """Wait for a pair closed beside (`close_beside`) and file its logs; the wait counts in
    `stages_s["timing.checked_pair.close"]`, the close's own seconds in `...close:beside`, and the part until its
    processes were gone in `...close:ended`."""
    if state.closing is None:
        return
    closing, state.closing = state.closing, None
    began = time.monotonic()
    if closing.thread is not None:
        closing.thread.join()
    if closing.failed:
        raise closing.failed[0]
    state.closed_logs.update(closing.logs)
    add_seconds(state, "timing.checked_pair.close", time.monotonic() - began)
    add_seconds(state, "timing.checked_pair.close:beside", closing.seconds)
    add_seconds(state, "timing.checked_pair.close:ended", closing.ended_s)
