"""compute-sanitizer on a GPU: a warp race and a read past the end caught with their source lines, an
uninitialised read recorded, an honest CUDA kernel clean; and the perturbed replays recorded.

Each candidate builds a torch extension (load_inline): the checked worker compiles it, and each of the four
sanitized workers again. Skipped without CUDA (the `gpu` marker) or without compute-sanitizer.
"""

import os
from pathlib import Path

import pytest

from helpers import CANDIDATES, EXAMPLES, TASKS, run_judge
from kerneljudge.judgment.sanitizer import sanitizer_path

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(sanitizer_path() is None, reason="compute-sanitizer is not on this machine"),
]

BUILD_TIMEOUT_S = 300.0  # a torch extension's compile, in the checked worker


def keep(record, name):
    directory = os.environ.get("KJ_RECORD_DIR")
    if directory:
        Path(directory, f"test-sanitizer-{name}.json").write_text(record.to_json())
    return record


def judged(task, candidate, name, **overrides):
    settings = {"device": "cuda", "mode": "enforce", "timeout_s": BUILD_TIMEOUT_S, **overrides}
    return keep(run_judge(TASKS / task, CANDIDATES / candidate, **settings), name)


def test_the_warp_race_is_caught_by_racecheck_with_its_lines():
    record = judged("rms_norm.py", "warp_race.py", "warp-race")
    assert record.status == "FAIL" and record.failure.kind == "race", (record.failure, record.correctness.sanitizer)
    assert record.failure.phase == "sanitizer"
    race = next(f for f in record.findings if f.code == "KJ-R060")
    assert race.severity == "error" and race.evidence["count"] >= 1 and race.evidence["hazards"] >= 1
    where = race.evidence["reports"][0]["where"]
    assert where[0]["name"] == "rms_norm_kernel", where
    assert where[0]["file"].endswith(".cu") and where[0]["line"], where  # line info through NVCC_APPEND_FLAGS
    tools = record.correctness.sanitizer["tools"]
    assert tools["racecheck"]["status"] == "reported"
    # The same kernel is otherwise sound: nothing from the other three tools.
    assert {tools[t]["status"] for t in ("memcheck", "initcheck", "synccheck")} == {"clean"}, tools
    # Its answers were right: every trial and replay passed before the tools ran.
    assert record.correctness.trials and all(t.passed for t in record.correctness.trials)
    assert "candidate_racecheck" in record.logs


def test_an_honest_cuda_kernel_is_clean_under_every_tool_and_its_replays_perturbed():
    record = judged("rms_norm.py", "cuda_rms_norm_synced.py", "rms-norm-synced")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    capability = record.capabilities["compute_sanitizer"]
    assert capability.status == "available" and "racecheck clean" in capability.detail, capability
    sanitized = record.correctness.sanitizer
    assert {t["status"] for t in sanitized["tools"].values()} == {"clean"}, sanitized
    assert sanitized["reason"] == "custom CUDA"
    # A derived shape takes no more memory than the public one: the smallest checked is one of them.
    assert sanitized["shape"] is not None or not any(t.kind == "shape" for t in record.correctness.trials)
    perturbed = [t["perturbation"] for t in record.correctness.replay["trials"] if "perturbation" in t]
    drawn = [p["kind"] for p in record.correctness.replay["perturbations"]]
    assert perturbed == drawn and len(drawn) == 2, record.correctness.replay  # practical: two kinds drawn


def test_a_read_past_the_end_is_a_memory_error():
    record = judged("tiny_bias_relu.py", "cuda_oob_read.py", "oob-read")
    assert record.status == "FAIL" and record.failure.kind == "memory_error", (
        record.failure,
        record.correctness.sanitizer,
    )
    oob = next(f for f in record.findings if f.code == "KJ-R061")
    report = oob.evidence["reports"][0]
    assert report["kind"] == "access" and "read" in report["headline"], report
    assert report["where"][0]["name"] == "bias_relu_oob_kernel" and report["where"][0]["line"], report


def test_an_uninitialised_read_is_recorded_and_never_fails_under_practical():
    record = judged("tiny_bias_relu.py", "cuda_uninit_read.py", "uninit-read", policy="practical")
    found = {f.code: f.severity for f in record.findings}
    assert found.get("KJ-R062") == "info", (found, record.correctness.sanitizer)
    assert record.status == "PASS" and record.verified, record.failure


def test_a_triton_candidate_is_not_sanitized_under_practical_unless_asked():
    reference, candidate = EXAMPLES / "softmax" / "reference.py", EXAMPLES / "softmax" / "candidate_triton.py"
    record = keep(run_judge(reference, candidate, device="cuda", mode="enforce"), "triton-not-sanitized")
    assert record.verified and record.correctness.sanitizer is None
    assert "sanitizer_triton" in record.capabilities["compute_sanitizer"].detail
