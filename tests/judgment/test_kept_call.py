"""The parent's half of the kept timed call (judgment/stages/kept_call.py): the sample drawn before the request and
never sent, the call drawn only once every output of that sample is committed, every frame checked for its
turn."""

import dataclasses
import random

import pytest

from kerneljudge import protocol
from kerneljudge.judgment.stages.kept_call import KeptCall
from kerneljudge.protocol.wire import timed_set


class Recording(random.Random):
    """A source of randomness that notes each draw's bound, in order."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.bounds: list[int] = []

    def randrange(self, *args, **kwargs):  # noqa: ANN002, ANN003
        self.bounds.append(args[0])
        return super().randrange(*args, **kwargs)


TIMED = protocol.Time(calls=2, samples=2, warmup=0, ask_keep=True)


def frame(header):
    """A frame a worker sends within a `time` request, as the parent decodes it (sandbox/talk.py)."""
    return protocol.decode_answer(TIMED, header, interim=True)


def said(sample):
    return frame({"type": "sampled", "sample": sample})


def committed(sample, calls):
    """A commit of `calls` outputs of one tensor each (worker/seal/commit.py)."""
    digests = [[[64, "torch.float32", c, 7]] for c in range(calls)]
    return frame({"type": "committed", "sample": sample, "digests": digests})


def run(keeper, samples, calls):
    """Each sample said over, the commit answered where asked: the answers (Keep's call, or "commit")."""
    answers = []
    for sample in range(samples):
        answer = keeper.answer(said(sample))
        if isinstance(answer, protocol.Commit):
            answers.append("commit")
            answer = keeper.answer(committed(sample, calls))
        answers.append(answer.call)
    return answers


def test_the_call_is_drawn_once_its_sample_is_committed_and_only_that_sample_keeps_one():
    source = Recording(3)
    keeper = KeptCall(source, samples=5, calls=7, sets=3, keeps=True)
    assert source.bounds == [5]  # the sample only: the call is not drawn yet
    for sample in range(5):
        answer = keeper.answer(said(sample))
        if sample != keeper.sample:
            assert answer == protocol.Keep(call=-1) and source.bounds == ([5, 7] if sample > keeper.sample else [5])
            continue
        assert answer == protocol.Commit(calls=7) and source.bounds == [5]  # the digests first, the call not drawn
        assert keeper.missing() == "never answered the parent's commit"
        answer = keeper.answer(committed(sample, 7))
        assert answer == protocol.Keep(call=keeper.call) and source.bounds == [5, 7]
    assert keeper.missing() is None and keeper.window_ms is not None and keeper.window_ms >= 0
    assert keeper.checked_set() == timed_set(keeper.sample, keeper.call, 3)
    assert keeper.checked_digests() == [[64, "torch.float32", keeper.call, 7]]


def test_every_sample_and_call_can_be_the_kept_one():
    seen = set()
    for seed in range(200):
        keeper = KeptCall(random.Random(seed), samples=3, calls=4, sets=2, keeps=True)
        run(keeper, 3, 4)
        seen.add((keeper.sample, keeper.call))
    assert seen == {(s, c) for s in range(3) for c in range(4)}


def test_a_side_that_keeps_nothing_commits_alike_and_is_answered_keep_none():
    source = Recording(1)
    keeper = KeptCall(source, samples=3, calls=2, sets=2, keeps=False)
    answers = run(keeper, 3, 2)
    assert answers.count("commit") == 1 and [a for a in answers if a != "commit"] == [-1] * 3
    assert source.bounds == [3] and keeper.checked_set() is None and keeper.missing() is None
    assert keeper.window_ms is not None


def test_the_last_call_recheck_names_its_fixed_call():
    keeper = KeptCall(random.Random(0), samples=1, calls=5, sets=3, keeps=True, call=4)
    assert run(keeper, 1, 5) == ["commit", 4]
    assert keeper.checked_set() == timed_set(0, 4, 3)


@pytest.mark.parametrize("digests", [[], [[[64, "torch.float32", 1, 2]]], [[[64, 1, 2]], [[64, 1, 2]]], ["x", "y"]])
def test_a_commit_not_of_every_call_commits_nothing(digests):
    keeper = KeptCall(random.Random(0), samples=1, calls=2, sets=2, keeps=True)
    assert keeper.answer(said(0)) == protocol.Commit(calls=2)
    assert keeper.answer(frame({"type": "committed", "sample": 0, "digests": digests})) == protocol.Keep(
        call=keeper.call
    )
    assert keeper.checked_digests() is None  # the candidate then fails (judgment/stages/timed_calls.kept_set)


@pytest.mark.parametrize(
    "header, says",
    [
        ({"type": "committed", "sample": 0, "digests": None}, "committed: field 'digests' is NoneType, not list"),
        ({"type": "committed", "sample": 0, "digests": "x"}, "committed: field 'digests' is str, not list"),
        ({"type": "sampled", "sample": True}, "sampled: field 'sample' is bool, not int"),  # no sample number
        ({"type": "sampled", "sample": "0"}, "sampled: field 'sample' is str, not int"),
        ({"type": "sampled"}, "sampled: missing field 'sample'"),
        ({"type": "sampled", "sample": 0, "call": 1}, "sampled: unknown field(s) 'call'"),
    ],
)
def test_a_frame_within_a_request_of_the_wrong_form_is_a_broken_protocol(header, says):
    with pytest.raises(protocol.ProtocolError) as raised:
        frame(header)
    assert str(raised.value) == says


@pytest.mark.parametrize(
    "frames",
    [
        [said(1)],  # a sample skipped
        [said(0), said(0)],  # one said twice
        [said(0), said(1), said(2)],  # one too many
        [committed(0, 2)],  # a commit not asked for
    ],
)
def test_a_sampled_out_of_turn_gets_no_answer(frames):
    keeper = KeptCall(random.Random(0), samples=2, calls=2, sets=2, keeps=True)
    keeper.sample = 1  # the second sample is committed (tested below)
    *first, last = frames
    for sent in first:
        assert keeper.answer(sent) is not None
    assert keeper.answer(last) is None


def test_a_frame_out_of_turn_around_a_commit_gets_no_answer():
    for frames in ([said(0), said(1)], [said(0), committed(1, 2)], [said(0), committed(0, 2), committed(0, 2)]):
        keeper = KeptCall(random.Random(0), samples=2, calls=2, sets=2, keeps=True)
        keeper.sample = 0
        *first, last = frames
        for sent in first:
            assert keeper.answer(sent) is not None
        assert keeper.answer(last) is None


def test_an_answer_before_every_sample_was_said_to_be_over_is_missing_samples():
    keeper = KeptCall(random.Random(0), samples=3, calls=2, sets=2, keeps=True)
    keeper.sample = 2
    keeper.answer(said(0))
    assert keeper.missing() == "said 1 of 3 samples were over before answering"


def test_a_worker_whose_sampled_is_out_of_turn_is_stopped():
    from helpers import TASKS
    from kerneljudge.sandbox.talk import WorkerProtocolError
    from kerneljudge.tasks.lint_reference import SEEDS, LintReference
    from kerneljudge.tasks.load import load_task

    worker = LintReference(load_task(TASKS / "tiny_bias_relu.py"), "cpu", 60.0)
    try:
        worker.load(SEEDS[0])
        worker.stage()
        timed = protocol.Time(calls=2, samples=3, warmup=0, staged=True, ask_keep=True)
        with pytest.raises(WorkerProtocolError, match="'sampled' out of turn"):
            worker.worker.request(timed, interim=lambda frame: None)
        assert worker.worker.dead and worker.worker.proc.poll() is not None  # killed
    finally:
        worker.close()


def test_an_open_seal_fails_the_candidate_and_is_a_finding():
    from kerneljudge.judgment.stages.kept_call import SEALED, kept_problem, sample_findings

    sound = protocol.Timed(times_ms=[], sealed_open=[])
    assert kept_problem(sound) is None and sample_findings(sound) == []
    opened = dataclasses.replace(sound, sealed_open=["sys.setprofile", "replaced torch.Tensor"])
    problem = kept_problem(opened)
    assert problem is not None and problem.kind == "integrity_violation" and problem.summary == SEALED
    (found,) = sample_findings(opened)
    assert found.code == "KJ-R026" and found.severity == "error" and "sys.setprofile" in found.summary
    problem = kept_problem(protocol.Timed(times_ms=[]))  # a worker that does not say what the seal found
    assert problem is not None and problem.kind == "integrity_violation"


def test_a_timed_output_in_a_later_calls_storage_fails_the_candidate_and_is_kj_r022():
    """The red team's `timing_cache` on an H100 (2026-12-06, judge 0.3.9, audit mode): its cached answers were one
    storage for calls of a sample that shared an input set, which its checked calls never were; the failure now
    carries KJ-R022."""
    from kerneljudge.judgment.stages.kept_call import OVERWRITTEN, kept_problem, sample_findings

    overwritten = protocol.Timed(times_ms=[], sealed_open=[], kept_overwritten=True)
    problem = kept_problem(overwritten)
    assert problem is not None and problem.kind == "integrity_violation" and problem.summary == OVERWRITTEN
    (found,) = sample_findings(overwritten)
    assert found.code == "KJ-R022" and found.severity == "error" and "later call" in found.summary
    assert sample_findings(protocol.Timed(times_ms=[], sealed_open=[], kept_overwritten=False)) == []


def test_the_reference_side_commits_as_many_outputs_as_the_candidates_sample_holds():
    keeper = KeptCall(random.Random(0), samples=1, calls=3, sets=2, keeps=False, commits=11)
    assert keeper.answer(said(0)) == protocol.Commit(calls=11)
    assert keeper.answer(committed(0, 3)) == protocol.Keep(call=-1) and keeper.committed == []  # not 11: refused
    keeper = KeptCall(random.Random(0), samples=1, calls=3, sets=2, keeps=False, commits=11)
    keeper.answer(said(0))
    assert keeper.answer(committed(0, 11)) == protocol.Keep(call=-1) and len(keeper.committed) == 11
    # A side that keeps an output commits every call of its own, whatever it is asked.
    keeping = KeptCall(random.Random(0), samples=1, calls=3, sets=2, keeps=True, commits=11)
    assert keeping.commits == 3 and keeping.answer(said(0)) == protocol.Commit(calls=3)
