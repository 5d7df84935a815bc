"""The timing pair made ready ahead on CUDA (judgment/stages/timing_ahead.py): a Triton candidate's timing worker is
loaded,
its pool staged and each side's first call (where Triton compiles) made while correctness runs, both pairs on
the GPU at once where the task's footprint says they fit; the timing stage then holds none of it. In a batch
lane the gate reserves both pairs' memory."""

import pytest

from helpers import EXAMPLES, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import LaneGate
from kerneljudge.judgment.pipeline import judge

pytestmark = pytest.mark.gpu


def test_a_triton_candidate_is_timed_on_a_pair_made_ready_while_correctness_ran():
    task, candidate = EXAMPLES / "softmax" / "reference.py", EXAMPLES / "softmax" / "candidate_triton.py"
    config = JudgeConfig(device="cuda", mode="enforce", policy="practical", timing_ahead=True)
    record = judge(task, candidate, config)
    validate_record(record)
    assert record.status == "PASS" and record.verified and record.timing.measured, record.failure
    assert record.timing.ahead["staged"] and record.timing.ahead["warmed"] == ["candidate", "reference"]
    stages = record.stages_s
    assert stages["ahead.candidate.warm"] > 0 and stages["ahead.reference.stage"] > 0, stages
    assert not [key for key in stages if key.startswith("timing.") and key.endswith((".stage", ".warm", ".load"))]
    assert stages["timing.ahead"] < stages["ahead"]  # it ran beside correctness: the stage waited less than it took

    gate = LaneGate(lanes=[None])
    gated = judge(task, candidate, config, gate=gate)
    assert gated.status == "PASS" and gated.verified and gated.timing.ahead["staged"], gated.failure
    [(_, reserved, _)] = gate.waits
    plain = LaneGate(lanes=[None])
    judge(task, candidate, config.with_(timing_ahead=False), gate=plain)
    [(_, alone, _)] = plain.waits
    assert reserved > alone > 0  # both pairs side by side, against the larger of the two
