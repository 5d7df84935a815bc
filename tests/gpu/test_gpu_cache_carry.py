"""The compiler-cache carry on CUDA (sandbox/cache_carry.py): a Triton candidate's timing worker, given the
kernels its checked worker compiled, compiles none of its own (it writes nothing new in its Triton cache),
where without the carry it compiles them again; both judgments verified. Either way that worker, started
ahead, readied Triton as it started (worker/prepare.py), as the checked worker did beside torch's import."""

import pytest

from helpers import CANDIDATES, EXAMPLES, TASKS, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import judge

pytestmark = pytest.mark.gpu


def triton_entries(record, role):
    return [path for path in record.logs[role].workspace_changes["created"] if path.startswith("cache/triton/")]


def test_the_timing_worker_finds_the_checked_workers_kernels():
    task, candidate = EXAMPLES / "softmax" / "reference.py", EXAMPLES / "softmax" / "candidate_triton.py"
    config = JudgeConfig(device="cuda", mode="enforce", policy="practical")
    plain = judge(task, candidate, config)
    carried = judge(task, candidate, config.with_(timing_carry=True))
    for record in (plain, carried):
        validate_record(record)
        assert record.status == "PASS" and record.verified and record.timing.measured, record.failure
        assert triton_entries(record, "candidate")  # the checked worker compiled the kernels
    assert triton_entries(plain, "candidate_timing")  # compiled again
    assert carried.timing.carried_caches["files"] > 0 and carried.timing.carried_caches["dropped"] is None
    assert triton_entries(carried, "candidate_timing") == []  # found them all
    assert plain.timing.carried_caches is None
    for record in (plain, carried):  # its timing worker, started ahead, computed Triton's own key as it started
        assert record.stages_s["timing.candidate.hello:triton"] > 0, record.stages_s
        # and so did its checked worker, in a thread beside torch's import, before its hello
        assert record.stages_s["build.candidate.hello:triton"] > 0, record.stages_s


def test_a_cuda_extension_candidate_is_timed_and_verified_with_the_carry():
    """An inline CUDA extension (torch's build, which the carry leaves behind: its build file names its own
    workspace) is built again in the timing worker and timed; the driver's cache goes with the carry."""
    config = JudgeConfig(device="cuda", mode="enforce", policy="practical", sanitizer="off", timing_carry=True)
    record = judge(TASKS / "rms_norm.py", CANDIDATES / "cuda_rms_norm_synced.py", config)
    validate_record(record)
    assert record.status == "PASS" and record.verified and record.timing.measured, record.failure
    assert record.timing.carried_caches["dropped"] is None
