"""The parent's half of the kept timed call (stages/kept_call.py): the sample drawn before the request and
never sent, the call drawn only once that sample is over, every `sampled` checked for its turn."""

import random

import pytest

from kerneljudge import protocol
from kerneljudge.stages.kept_call import KeptCall
from kerneljudge.worker.wire import timed_set


class Recording(random.Random):
    """A source of randomness that notes each draw's bound, in order."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.bounds: list[int] = []

    def randrange(self, *args, **kwargs):  # noqa: ANN002, ANN003
        self.bounds.append(args[0])
        return super().randrange(*args, **kwargs)


def said(sample):
    return {"type": "sampled", "sample": sample}


def test_the_call_is_drawn_when_its_sample_is_over_and_only_that_sample_keeps_one():
    source = Recording(3)
    keeper = KeptCall(source, samples=5, calls=7, sets=3, keeps=True)
    assert source.bounds == [5]  # the sample only: the call is not drawn yet
    answers = []
    for sample in range(5):
        answers.append(keeper.answer(said(sample)).call)
        assert source.bounds == ([5, 7] if sample >= keeper.sample else [5])
    assert [a for a in answers if a >= 0] == [keeper.call] and answers.index(keeper.call) == keeper.sample
    assert keeper.missing() is None
    assert keeper.checked_set() == timed_set(keeper.sample, keeper.call, 3)


def test_every_sample_and_call_can_be_the_kept_one():
    seen = set()
    for seed in range(200):
        keeper = KeptCall(random.Random(seed), samples=3, calls=4, sets=2, keeps=True)
        for sample in range(3):
            keeper.answer(said(sample))
        seen.add((keeper.sample, keeper.call))
    assert seen == {(s, c) for s in range(3) for c in range(4)}


def test_a_side_that_keeps_nothing_is_answered_keep_none_and_draws_nothing():
    source = Recording(1)
    keeper = KeptCall(source, samples=3, calls=2, sets=2, keeps=False)
    assert [keeper.answer(said(s)) for s in range(3)] == [protocol.Keep(call=-1)] * 3
    assert source.bounds == [] and keeper.checked_set() is None and keeper.missing() is None


def test_the_last_call_recheck_names_its_fixed_call():
    keeper = KeptCall(random.Random(0), samples=1, calls=5, sets=3, keeps=True, call=4)
    assert keeper.answer(said(0)) == protocol.Keep(call=4)
    assert keeper.checked_set() == timed_set(0, 4, 3)


@pytest.mark.parametrize(
    "frames",
    [
        [said(1)],  # a sample skipped
        [said(0), said(0)],  # one said twice
        [said(0), said(1), said(2)],  # one too many
        [said(True)],  # a bool is no sample number
        [said("0")],
        [{"type": "sampled"}],
    ],
)
def test_a_sampled_out_of_turn_gets_no_answer(frames):
    keeper = KeptCall(random.Random(0), samples=2, calls=2, sets=2, keeps=True)
    *first, last = frames
    for frame in first:
        assert keeper.answer(frame) is not None
    assert keeper.answer(last) is None


def test_an_answer_before_every_sample_was_said_to_be_over_is_missing_samples():
    keeper = KeptCall(random.Random(0), samples=3, calls=2, sets=2, keeps=True)
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


def test_an_open_seal_or_a_missing_digest_fails_the_candidate_and_the_seal_is_a_finding():
    from kerneljudge.stages.kept_call import SEALED, kept_problem, seal_findings

    sound = {"sealed_open": [], "kept_digests": [[[64, "torch.float32", 5, 7]]]}
    assert kept_problem(sound) is None and seal_findings(sound) == []
    assert kept_problem({**sound, "kept_digests": []}) is None  # a sample the parent did not name
    opened = {**sound, "sealed_open": ["sys.setprofile", "replaced torch.Tensor"]}
    problem = kept_problem(opened)
    assert problem is not None and problem.kind == "integrity_violation" and problem.summary == SEALED
    (found,) = seal_findings(opened)
    assert found.code == "KJ-R026" and found.severity == "error" and "sys.setprofile" in found.summary
    for broken in ({"kept_digests": sound["kept_digests"]}, {**sound, "kept_digests": [[[64, 5, 7]]]}):
        problem = kept_problem(broken)  # a worker that does not say what the seal found, or how its copy read
        assert problem is not None and problem.kind == "integrity_violation"
