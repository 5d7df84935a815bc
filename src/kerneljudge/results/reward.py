"""Versioned reward specifications. Changing a formula means a new spec id (docs/reward.md)."""

from __future__ import annotations

import math

from kerneljudge.results.verdict import Record, Reward

REWARD_V2 = "kerneljudge.reward.v2"
REWARD_V1 = "kerneljudge.reward.v1"
REWARD_BINARY_V1 = "kerneljudge.reward.binary.v1"
REWARD_SPECS = (REWARD_V2, REWARD_V1, REWARD_BINARY_V1)  # every spec a record carries, in `rewards_for`'s order


class UnknownRewardSpec(ValueError):
    """A reward spec id this judge does not know (`Record.reward`); the message names the known ones."""

    def __init__(self, spec: str) -> None:
        super().__init__(f"unknown reward spec {spec!r}; known: {', '.join(REWARD_SPECS)}")


# v2's bounds: a verified kernel's worst (SPEED_FLOOR - INSTABILITY_CAP = -0.75) stays above a wrong one's -1.
SPEED_FLOOR, SPEED_CEILING, INSTABILITY_CAP = -0.5, 2.0, 0.25


NO_REWARD = {
    "ERROR": "invalid record (judge failure): no reward",
    "UNSUPPORTED": "a required capability is missing: no reward",
}


def reward_v1(status: str, verified: bool, speedup: float | None, cv: float | None) -> Reward:
    """-1 when not verified; else clip(log2 speedup, -2, 2) - min(0.5, 2 * max(0, cv - 0.05)). Kept as it was
    for stored trajectories; its faults (a slow verified kernel below a wrong one, a CPU timing read as a
    speedup) are why v2 exists (docs/reward.md)."""
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


def reward_v2(status: str, verified: bool, speedup: float | None, cv: float | None, device: str | None) -> Reward:
    """Ordered so that no verified kernel scores below a wrong one, and a GPU speedup only from a GPU:
    -1 when not verified; 0 when verified but not timed on a GPU; else
    clip(log2 speedup, -0.5, 2) - min(0.25, 2 * max(0, cv - 0.05))."""
    if status in NO_REWARD:
        return Reward(spec=REWARD_V2, value=None, reason=NO_REWARD[status])
    if not verified:
        return Reward(spec=REWARD_V2, value=-1.0, reason="not verified")
    if speedup is None or speedup <= 0 or cv is None:
        return Reward(spec=REWARD_V2, value=0.0, reason="verified, not timed: correctness only")
    if device != "cuda":
        return Reward(spec=REWARD_V2, value=0.0, reason=f"verified; timed on {device}, not a GPU: correctness only")
    speed = max(SPEED_FLOOR, min(SPEED_CEILING, math.log2(speedup)))
    instability = min(INSTABILITY_CAP, 2.0 * max(0.0, cv - 0.05))
    return Reward(
        spec=REWARD_V2,
        value=speed - instability,
        reason="verified and timed on the GPU",
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
        reward_v2(record.status, record.verified, timing.speedup, cv, timing.device or record.device),
        reward_v1(record.status, record.verified, timing.speedup, cv),
        reward_binary(record.status, record.verified),
    ]
