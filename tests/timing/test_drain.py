"""The device-wide bracket of a timed sample (timing/drain.py), on drains as a worker reports them."""

import pytest

from kerneljudge.timing.drain import DRAIN_SLACK_MS, MATERIAL_SHARE, covered, drain_finding, is_number, left_behind

FLOOR_MS = 0.012  # an idle device's drain: the host's wait and the next record


def test_an_honest_sample_drains_as_an_idle_device_does_and_keeps_its_time():
    drains = [FLOOR_MS + 0.003, FLOOR_MS + 0.02, FLOOR_MS, FLOOR_MS + 0.01]
    left = left_behind(drains, FLOOR_MS)
    assert left == [0.0] * 4
    assert covered([0.5] * 4, 100, left) == [0.5] * 4
    assert drain_finding(left, [50.0] * 4) is None


def test_work_left_on_a_side_stream_is_added_to_each_sample_and_is_an_escape():
    """The side-stream escape seen on an H200 (judge 0.1.0): 100 calls a sample, each leaving a 70 us kernel on a side
    stream, the events reading 0.3 us a call. The drain after each sample waits for the 7 ms of side-stream work."""
    drains = [FLOOR_MS + 7.0 - 0.03] * 8
    left = left_behind(drains, FLOOR_MS)
    per_call = covered([0.0003] * 8, 100, left)
    assert per_call == pytest.approx([0.0003 + (7.0 - 0.03 - DRAIN_SLACK_MS) / 100] * 8)
    assert all(t > 0.069 for t in per_call)  # no less than the side stream's work
    found = drain_finding(left, [0.0003 * 100] * 8)
    assert found is not None and found.code == "KJ-R024" and found.severity == "error"
    assert found.evidence["source"] == "timing_drain" and found.evidence["samples_with_work_left"] == 8


def test_a_slow_wake_up_now_and_then_costs_that_sample_only_and_is_no_escape():
    drains = [FLOOR_MS] * 7 + [FLOOR_MS + 1.5]  # the host descheduled once, after the wait
    left = left_behind(drains, FLOOR_MS)
    assert sum(x > 0 for x in left) == 1 and drain_finding(left, [1.0] * 8) is None


def test_a_long_honest_sample_that_drains_a_little_late_keeps_the_time_it_left_and_is_no_escape():
    """KernelBench's 46_Average_Pooling_3D, the reference against itself on an H100 (2026-12-05, timed without a
    graph after the capture ran short of memory): 8.6 ms samples whose drains read 0.04 ms beyond the idle floor
    and the slack in 28 of 50 samples, which read as KJ-R024 before a sample's left work had to be a material
    share of what its events timed. The time left is still added to each sample."""
    drains = [FLOOR_MS + DRAIN_SLACK_MS + 0.043] * 28 + [FLOOR_MS] * 22
    left = left_behind(drains, FLOOR_MS)
    assert sum(x > 0 for x in left) == 28
    assert drain_finding(left, [8.65] * 50) is None
    assert covered([8.65] * 50, 1, left)[0] == pytest.approx(8.65 + 0.043)


@pytest.mark.parametrize("share", [0.5, 0.1])
def test_a_side_stream_escape_of_part_of_the_work_is_still_an_escape(share):
    """The variant of that side-stream escape that keeps part of its work on the timed stream: a 7 ms forward that
    leaves `share` of it on a side stream; its events time the rest."""
    timed = 7.0 * (1 - share)
    drains = [FLOOR_MS + DRAIN_SLACK_MS + 7.0 * share] * 10
    found = drain_finding(left_behind(drains, FLOOR_MS), [timed] * 10)
    assert found is not None and found.code == "KJ-R024"
    assert 7.0 * share > MATERIAL_SHARE * timed


def test_a_drain_figure_must_be_a_finite_non_negative_number():
    assert is_number(0.0) and is_number(3) and not is_number(-1.0) and not is_number(float("nan"))
    assert not is_number(True) and not is_number("0.1") and not is_number(None)
