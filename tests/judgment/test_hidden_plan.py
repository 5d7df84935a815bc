"""The hidden plan (plan.py): drawn once from one source, shaped as the attack classes need, recorded, and
followed by the judgment."""

import random

from helpers import EXAMPLES, validate_record
from kerneljudge import JudgeConfig, judge
from kerneljudge.judgment.hidden_plan import draw, kernelbench_trial_seeds


def plan(seed=None, native=False, cuda=True, hidden=5, shapes=3):
    rng = random.Random(seed) if seed is not None else None
    return draw(42, 5, hidden, shapes, native, cuda, rng)


def test_one_source_gives_one_plan_and_the_systems_gives_another_each_time():
    assert plan(7).as_record() == plan(7).as_record()
    assert plan(7).as_record() != plan(8).as_record()
    assert [t.seed for t in plan().trials[5:]] != [t.seed for t in plan().trials[5:]]


def test_the_public_trials_are_kernelbenchs_and_the_hidden_ones_each_another_distribution():
    drawn = plan(3)
    public, hidden = drawn.trials[:5], drawn.trials[5:]
    assert [t.seed for t in public] == kernelbench_trial_seeds(42, 5)
    assert {t.kind for t in public} == {"public"} and {t.kind for t in hidden} == {"hidden"}
    assert all(t.distribution == {"kind": "standard"} for t in public)
    assert hidden[0].distribution == {"kind": "standard"}
    kinds = sorted(
        "scaled_up"
        if d["kind"] == "scaled" and d["factor"] > 1
        else "scaled_down"
        if d["kind"] == "scaled"
        else d["kind"]
        for d in (t.distribution for t in hidden[1:])
    )
    assert kinds == ["heavy_tailed", "scaled_down", "scaled_up", "shifted"]
    assert len({t.seed for t in hidden}) == 5 and len(drawn.shape_seeds) == 3


def test_replays_the_canary_and_the_traces_fall_where_the_checks_need_them():
    for seed in range(50):
        drawn = plan(seed)
        replayed = sorted(drawn.replay_at)
        assert replayed[0] == 0 and len(replayed) == 2 and 5 <= replayed[1] < 10  # a public and a hidden one
        assert drawn.perturbed_at == replayed[1]
        assert 6 <= drawn.canary_at < 10  # a hidden trial after another, whose storage it reuses
        assert len(drawn.trace_at) == 2 and all(5 <= i < 10 for i in drawn.trace_at)
    on_the_cpu = plan(1, cuda=False)
    assert on_the_cpu.perturbed_at is None and not on_the_cpu.trace_at  # nothing to trace or perturb there


def test_kernelbenchs_own_mode_has_its_public_trials_and_nothing_hidden():
    native = plan(1, native=True)
    assert [t.kind for t in native.trials] == ["public"] * 5
    assert not native.replay_at and native.canary_at is None and not native.trace_at and not native.shape_seeds


def test_shape_trials_beyond_those_drawn_up_front_still_get_seeds_of_their_own():
    drawn = plan(2, shapes=1)
    assert drawn.shape_seed(0) == drawn.shape_seeds[0]
    assert drawn.shape_seed(1) != drawn.shape_seed(0) or drawn.shape_seed(2) != drawn.shape_seed(0)


def test_a_judgment_records_its_plan_and_follows_it():
    config = JudgeConfig(device="cpu", timing=False, timeout_s=60.0, policy="practical", mode="enforce")
    softmax = EXAMPLES / "softmax"
    record = judge(softmax / "reference.py", softmax / "candidate_triton.py", config, rng=random.Random(11))
    validate_record(record)
    assert record.status == "PASS", record.failure
    expected = draw(42, 5, 5, 3, False, False, random.Random(11)).as_record()
    recorded = dict(record.correctness.plan)
    proposals = recorded.pop("size_proposals")  # drawn later, from the same source, once the task's sizes are known
    assert recorded == expected and proposals["values"]
    ran = [t for t in record.correctness.trials if t.kind != "shape"]
    assert [(t.kind, t.seed) for t in ran] == [(t["kind"], t["seed"]) for t in expected["trials"]]
    for trial, planned in zip(ran, expected["trials"], strict=True):  # as planned, and what the reference kept
        assert planned["distribution"].items() <= trial.distribution.items(), (planned, trial.distribution)
    shaped = [t.seed for t in record.correctness.trials if t.kind == "shape"]
    assert shaped and shaped == expected["shape_seeds"][: len(shaped)]
