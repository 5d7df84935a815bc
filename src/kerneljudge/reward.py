"""Versioned reward specifications. Changing a formula means a new spec id (docs/reward.md)."""

from __future__ import annotations

import math

from kerneljudge.verdict import Record, Reward

REWARD_V1 = "kerneljudge.reward.v1"
REWARD_BINARY_V1 = "kerneljudge.reward.binary.v1"


NO_REWARD = {
    "ERROR": "invalid record (judge failure): no reward",
    "UNSUPPORTED": "a required capability is missing: no reward",
}


def reward_v1(status: str, verified: bool, speedup: float | None, cv: float | None) -> Reward:
    """-1 when not verified; else clip(log2 speedup, -2, 2) - min(0.5, 2 * max(0, cv - 0.05))."""
    if status in NO_REWARD:
        return Reward(spec=REWARD_V1, value=None, reason=NO_REWARD[status])
    if not verified:
        return Reward(spec=REWARD_V1, value=-1.0, reason="not verified")
    if speedup is None or speedup <= 0 or cv is None:
        return Reward(spec=REWARD_V1, value=None, reason="verified but not timed: no speed reward")
    speed = max(-2.0, min(2.0, math.log2(speedup)))
    instability = min(0.5, 2.0 * max(0.0, cv - 0.05))
    return Reward(
        spec=REWARD_V1,
        value=speed - instability,
        reason="verified and timed",
        components={"speed": speed, "instability": instability},
    )


def reward_binary(status: str, verified: bool) -> Reward:
    """1 when verified correct, 0 otherwise; none for an invalid or unsupported record."""
    if status in NO_REWARD:
        return Reward(spec=REWARD_BINARY_V1, value=None, reason=NO_REWARD[status])
    return Reward(
        spec=REWARD_BINARY_V1, value=1.0 if verified else 0.0, reason="verified" if verified else "not verified"
    )


def rewards_for(record: Record) -> list[Reward]:
    timing = record.timing
    cv = max(timing.candidate.cv, timing.reference.cv) if timing.candidate and timing.reference else None
    return [
        reward_v1(record.status, record.verified, timing.speedup, cv),
        reward_binary(record.status, record.verified),
    ]
