"""Spare worker pairs on CUDA (judgment/stages/spare_pairs.py): a spare that started CUDA inside every sandbox layer
before the judgment came serves it, timing included, and the judgment's verdict is the same as with a pair of its
own."""

import pytest

from helpers import EXAMPLES, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages.spare_pairs import SparePairs

pytestmark = pytest.mark.gpu


def test_a_cuda_judgment_with_timing_takes_spares_and_is_verified_as_without():
    task, candidate = EXAMPLES / "softmax" / "reference.py", EXAMPLES / "softmax" / "candidate_triton.py"
    config = JudgeConfig(device="cuda", mode="enforce", policy="practical")
    own = judge(task, candidate, config)
    with SparePairs() as spares:
        judge(task, candidate, config.with_(timing=False), spares=spares)  # starts the first spare
        spares.waiting(timeout_s=300)
        record = judge(task, candidate, config, spares=spares)
        taken = spares.taken
    validate_record(record)
    assert taken == 2  # the checked pair and the timing pair, each a spare started ahead
    for r in (own, record):
        assert r.status == "PASS" and r.verified and r.timing.measured, r.failure
        assert r.capabilities["os_sandbox"].status == "available", r.capabilities["os_sandbox"]
    assert record.stages_s["build.reference.hello"] < own.stages_s["build.reference.hello"]
    for role in ("candidate", "candidate_timing"):
        layers = record.logs[role].sandbox_layers
        assert layers["allowlist_root"]["status"] == "in_force", layers["allowlist_root"]
