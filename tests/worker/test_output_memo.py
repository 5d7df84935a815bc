"""The trial outputs a group's reference keeps for the group's next judgments (worker/correctness/memo.py): what a
trial's key holds, what is never kept, and the bytes it may keep."""

from __future__ import annotations

import torch

from kerneljudge import protocol
from kerneljudge.worker.correctness.memo import Kept, OutputMemo


def kept(out, forwards=1) -> Kept:
    return Kept(out, {}, out.double(), {"kind": "standard"}, "float64", False, None, forwards)


def test_a_trial_is_found_again_after_the_same_load_and_the_same_forwards_only():
    memo = OutputMemo()
    memo.loaded(7, None, keep=1 << 20)
    trial = protocol.Trial(seed=3, call_seed=5)
    key = memo.key(trial)
    memo.keep(key, kept(torch.ones(4)), torch)
    memo.loaded(7, None, keep=1 << 20)  # the next judgment's load: the same seed and shape, forwards from 0
    assert memo.find(memo.key(trial)) is not None and memo.forwards == 1 and memo.hits == 1
    assert memo.find(memo.key(trial)) is None  # one forward later (a reference with state of its own): not the same
    memo.loaded(7, {"N": 64}, keep=1 << 20)  # a hidden shape's load
    assert memo.find(memo.key(trial)) is None
    memo.loaded(7, None, keep=1 << 20)
    for other in (
        protocol.Trial(seed=4, call_seed=5),
        protocol.Trial(seed=3, call_seed=6),
        protocol.Trial(seed=3, call_seed=5, oracle=False),
        protocol.Trial(seed=3, call_seed=5, on_device=True),
        protocol.Trial(seed=3, call_seed=5, variant={"kind": "scaled", "scale": 1000.0}),
    ):
        assert memo.find(memo.key(other)) is None, other


def test_training_mode_a_swap_and_a_single_judgments_reference_keep_nothing():
    memo = OutputMemo()
    memo.loaded(7, None, keep=1 << 20)
    assert memo.key(protocol.Trial(seed=3, train=True)) is None
    assert memo.key(protocol.Trial(seed=3, swap={"position": 0, "seed": 9})) is None
    memo.keep(memo.key(protocol.Trial(seed=3)), kept(torch.ones(4)), torch)
    memo.loaded(7, None, keep=0)  # a single judgment's reference: nothing kept, and what was is forgotten
    assert memo.key(protocol.Trial(seed=3)) is None and memo.kept == {} and memo.bytes == 0


def test_outputs_past_the_bytes_it_may_keep_are_not_kept():
    memo = OutputMemo()
    memo.loaded(7, None, keep=3 * 4 * 100)  # room for one trial of 100 floats and its float64 oracle, not two
    first, second = protocol.Trial(seed=1), protocol.Trial(seed=2)
    memo.keep(memo.key(first), kept(torch.ones(100)), torch)
    memo.keep(memo.key(second), kept(torch.ones(100)), torch)
    assert len(memo.kept) == 1 and memo.bytes == 1200
