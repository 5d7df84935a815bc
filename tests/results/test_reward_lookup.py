"""`Record.reward(spec)`: a known spec's reward, printed readably; an unknown spec is a clear error."""

import pytest

from helpers import make_record
from kerneljudge.results.reward import REWARD_BINARY_V1, REWARD_V1, REWARD_V2, UnknownRewardSpec


def test_an_unknown_spec_raises_a_one_line_error_naming_the_known_ones():
    with pytest.raises(ValueError) as info:
        make_record().reward("kerneljudge.reward.v3")
    assert isinstance(info.value, UnknownRewardSpec)
    message = str(info.value)
    assert "\n" not in message and "'kerneljudge.reward.v3'" in message
    assert all(spec in message for spec in (REWARD_V2, REWARD_V1, REWARD_BINARY_V1))


def test_a_reward_prints_its_value_first_and_keeps_value():
    reward = make_record(status="FAIL").reward(REWARD_V2)
    assert reward.value == -1.0
    assert str(reward) == "-1 (not verified)"
    assert str(make_record(status="ERROR").reward(REWARD_V2)).startswith("None (")


def test_a_record_written_before_a_spec_existed_has_it_computed():
    record = make_record(status="PASS")
    record.rewards = [r for r in record.rewards if r.spec != REWARD_BINARY_V1]
    assert record.reward(REWARD_BINARY_V1).value == 1.0
