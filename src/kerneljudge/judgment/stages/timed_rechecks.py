"""The candidate's calls checked after the measurement (H03: a candidate honest while checked, or until some call):
in a CUDA graph regime, plain calls on its graph buffers after the replays (the graph recheck); outside graphs,
the last calls of two requests (the last-call recheck). Each output is checked like a timed call's
(judgment/stages/timed_calls.py).
"""

from __future__ import annotations

from kerneljudge import protocol
from kerneljudge.judgment.stages.failures import CandidateFailed, error_failure
from kerneljudge.judgment.stages.kept_call import KeptCall
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.timed_calls import check_captured, check_timed_output, kept_set
from kerneljudge.judgment.stages.workers import ask_candidate


def recheck_graph(state: JudgmentState, calls: int, sets: int) -> None:
    """Plain calls on two of the candidate's graph buffers after its replays, each checked like a timed call.

    A replayed graph runs what was captured, so a candidate that switches to a shortcut once timing
    starts (H03), or serves answers from a cache keyed on storage (H01), may never show it in a replay.
    Its Python still runs in these calls, on buffers that hold other contents than its last calls saw
    (`op_recheck`): the last answer cannot be right for both, and a storage-keyed cache for either.
    """
    buffers = state.source.sample(range(sets), min(2, sets))
    for buffer in buffers:
        recheck = protocol.Recheck(calls=calls, buffer=buffer)
        rechecked, _ = ask_candidate(state, recheck, "timing", fetch=())
        if isinstance(rechecked, protocol.Error):
            raise CandidateFailed(error_failure(rechecked, "timing"))
        what = f"plain call on graph buffer {buffer} after the replays"
        check_timed_output(state, rechecked, buffer, what=what)


def recheck_last(state: JudgmentState, calls: int, sets: int) -> None:
    """After the measurement, outside a CUDA graph (whose recheck is `recheck_graph`): two more requests of the
    candidate's calls, the last call of each checked like a timed call, the two on different input sets.

    Each measured request checks one call drawn at random; a candidate honest for its first N calls and then
    answering with one kept answer (H03 by count: a new model is built at every timing shape) passes a check
    whenever the drawn call falls before its switch or on the set its kept answer belongs to (a third of the
    time with three sets): the red team's `timing_switch` PASSed verified once on the 2-core CI machine
    (2026-12-04). These calls come after every call the measurement made, and one kept answer cannot be right
    for two sets.
    """
    for count in (calls, calls + 1):  # last calls at consecutive positions: two different sets (wire.timed_set)
        keeper = KeptCall(state.source, 1, count, sets, keeps=True, call=count - 1)
        request = protocol.Time(calls=count, samples=1, warmup=0, staged=True, ask_keep=True)
        timed, _ = ask_candidate(state, request, "timing", op="recheck", fetch=(), interim=keeper.answer)
        if isinstance(timed, protocol.Error):
            raise CandidateFailed(error_failure(timed, "timing"))
        checked = kept_set(state, keeper, timed)
        check_captured(state, checked, what=f"the last call of a request after the measurement, input set {checked}")
