"""A candidate that tampers with torch, comparisons, the judge or the channel cannot change its verdict."""

import pytest

from helpers import CANDIDATES, run_judge


@pytest.mark.parametrize(
    "fixture",
    [
        "patch_allclose.py",  # torch.allclose / assert_close / __eq__ forced true
        "patch_torch.py",  # torch functions and flags patched in its own process
        "patch_judge.py",  # the judge's own comparison and status functions patched
        "frame_walk.py",  # frames and gc searched for the expected output
        "forge_channel.py",  # a forged 'PASS' frame written into the result channel
    ],
)
def test_tampering_wrong_candidate_still_fails(tiny_task, fixture):
    record = run_judge(tiny_task, CANDIDATES / fixture, timeout_s=20.0)
    assert record.status == "FAIL", (record.status, record.failure)
    assert not record.verified
    assert record.reward("kerneljudge.reward.binary.v1").value == 0.0


def test_tampering_in_off_mode_still_fails(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "patch_allclose.py", mode="off", hidden_trials=0)
    assert record.status == "FAIL" and record.failure.kind == "tolerance"
