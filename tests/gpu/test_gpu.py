"""The judge on a CUDA GPU: honest examples verified, wrong ones typed, faults survived.

Run with scripts/gpu_suite.sh on a GPU machine; records go to $KJ_RECORD_DIR when set.
"""

import os
from pathlib import Path

import pytest

from helpers import CANDIDATES, EXAMPLES, TASKS, run_judge
from kerneljudge.redteam import FIXTURES_DIR

pytestmark = pytest.mark.gpu

EXAMPLE_NAMES = ["softmax", "elementwise", "matmul"]


def keep(record, name):
    directory = os.environ.get("KJ_RECORD_DIR")
    if directory:
        Path(directory, f"test-{name}.json").write_text(record.to_json())
    return record


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_honest_triton_example_is_verified_on_cuda(example):
    record = keep(
        run_judge(
            EXAMPLES / example / "reference.py", EXAMPLES / example / "candidate_triton.py", device="cuda", timing=True
        ),
        f"{example}-honest",
    )
    assert record.status == "PASS" and record.verified, record.failure
    assert record.device == "cuda" and record.capabilities["cuda_runtime"].status == "available"
    assert record.timing.measured and record.timing.device == "cuda" and "CUDA events" in record.timing.regime
    assert record.timing.speedup > 0
    assert record.environment["gpu_name"]


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_wrong_triton_example_fails_on_cuda(example):
    record = keep(
        run_judge(EXAMPLES / example / "reference.py", EXAMPLES / example / "candidate_wrong.py", device="cuda"),
        f"{example}-wrong",
    )
    assert record.status == "FAIL" and record.failure.kind == "tolerance", record.failure


@pytest.mark.parametrize("fixture", ["patch_allclose.py", "patch_judge.py", "frame_walk.py"])
def test_tampering_fails_on_cuda(fixture):
    record = run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / fixture, device="cuda")
    assert record.status == "FAIL", record.failure


def test_off_mode_on_cuda():
    record = keep(
        run_judge(
            EXAMPLES / "softmax" / "reference.py",
            EXAMPLES / "softmax" / "candidate_triton.py",
            device="cuda",
            mode="off",
            hidden_trials=0,
            timing=True,
        ),
        "softmax-off",
    )
    assert record.status == "PASS" and record.timing.method == "kernelbench"
    assert record.timing.candidate.count == 100


def test_gpu_faults_are_typed_and_the_gpu_stays_usable():
    task = TASKS / "tiny_bias_relu.py"
    illegal = keep(run_judge(task, CANDIDATES / "gpu_illegal_access.py", device="cuda"), "fault-illegal-access")
    assert illegal.status == "FAIL" and illegal.failure.kind in ("runtime_error", "crash"), illegal.failure
    hang = keep(run_judge(task, CANDIDATES / "gpu_hang_kernel.py", device="cuda", timeout_s=20.0), "fault-hang")
    assert hang.status == "FAIL" and hang.failure.kind == "timeout", hang.failure
    crash = run_judge(task, CANDIDATES / "segfault.py", device="cuda")
    assert crash.status == "FAIL" and crash.failure.kind == "crash"
    after = keep(run_judge(task, CANDIDATES / "honest_torch.py", device="cuda"), "after-faults")
    assert after.status == "PASS" and after.verified


def test_side_stream_escape_is_caught_and_a_synchronised_side_stream_is_not():
    task = TASKS / "tiny_bias_relu.py"
    escape = keep(run_judge(task, CANDIDATES / "gpu_side_stream_escape.py", device="cuda"), "side-stream-escape")
    assert escape.status == "FAIL" and "KJ-R020" in {f.code for f in escape.findings}, escape.failure
    # The trace sees it too: the side-stream kernel ended after the call's stream was synchronised.
    assert "KJ-R024" in {f.code for f in escape.findings}, escape.kernel_trace
    synced = keep(run_judge(task, CANDIDATES / "gpu_side_stream_synced.py", device="cuda"), "side-stream-synced")
    assert synced.status == "PASS" and synced.verified, (synced.failure, [f.code for f in synced.findings])
    assert synced.kernel_trace["side_streams"] and not synced.kernel_trace["escaped"]


def test_a_long_honest_call_timed_without_a_graph_is_no_side_stream_escape():
    """Milliseconds a sample, timed behind the busy precursor with every sample drained (as a side whose graph
    capture fails is): on an H100, KernelBench's 46_Average_Pooling_3D, the reference against itself, read as
    KJ-R024 (0.04 ms past the drain's slack in 28 of 50 8.6 ms samples, 2026-12-05)."""
    record = keep(
        run_judge(
            TASKS / "long_matmul.py",
            CANDIDATES / "long_matmul_same.py",
            device="cuda",
            timing=True,
            timing_regime="busy_precursor",
        ),
        "long-honest-drained",
    )
    assert record.verified and record.timing.measured, (record.failure, [f.code for f in record.findings])
    assert "KJ-R024" not in {f.code for f in record.findings}, record.findings
    assert 0.9 <= record.timing.speedup <= 1.1, record.timing


@pytest.mark.parametrize(
    "fixture, code",
    [
        ("cache_by_content.py", "KJ-R022"),
        ("mutate_inputs.py", "KJ-R023"),
        ("patch_timer.py", "KJ-R001"),
        ("flag_flip.py", "KJ-R002"),
    ],
)
def test_runtime_evidence_on_cuda(fixture, code):
    record = run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / fixture, device="cuda")
    assert record.status in ("FAIL", "SUSPICIOUS") and code in {f.code for f in record.findings}, record.failure


def test_honest_triton_candidates_raise_no_runtime_findings_on_cuda():
    for example in EXAMPLE_NAMES:
        record = run_judge(
            EXAMPLES / example / "reference.py",
            EXAMPLES / example / "candidate_triton.py",
            device="cuda",
            policy="strict",
        )
        assert record.status == "PASS", (example, record.failure, [f.code for f in record.findings])
        assert not [f for f in record.findings if f.severity != "info"]


def test_kernel_trace_attributes_the_work_to_the_declared_triton_kernels():
    record = keep(
        run_judge(
            EXAMPLES / "softmax" / "reference.py",
            EXAMPLES / "softmax" / "candidate_triton.py",
            device="cuda",
            policy="strict",
        ),
        "trace-softmax-strict",
    )
    trace = record.kernel_trace
    capability = record.capabilities["profiler_trace"]
    assert capability.status == "available" and capability.required
    assert len(trace["calls_traced"]) == 2 and trace["declared_share"] == 1.0, trace
    assert {k["name"] for k in trace["kernels"] if k["kind"] == "declared"} <= set(trace["declared_kernels"])
    assert record.status == "PASS" and record.verified


@pytest.mark.parametrize(
    "fixture, policy, code, severity, status",
    [
        ("decoy_kernel.py", "strict", "KJ-R040", "error", "FAIL"),
        ("decoy_trivial_launch.py", "strict", "KJ-R041", "error", "FAIL"),
        ("torch_fallback.py", "strict", "KJ-R041", "error", "FAIL"),
        ("honest_torch.py", "practical", "KJ-R041", "info", "PASS"),
    ],
)
def test_kernel_trace_sees_decoys_and_fallbacks(fixture, policy, code, severity, status):
    record = keep(
        run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / fixture, device="cuda", policy=policy),
        f"trace-{fixture.removesuffix('.py')}-{policy}",
    )
    found = {f.code: f.severity for f in record.findings}
    assert found.get(code) == severity and record.status == status, (found, record.kernel_trace)


def test_calibration_controls_aa_never_wins_and_double_work_measures_half():
    reference = EXAMPLES / "softmax" / "reference.py"
    aa = keep(
        run_judge(reference, CANDIDATES / "aa_softmax.py", device="cuda", timing=True, policy="practical"), "control-aa"
    )
    # No win at the 2% margin. The interval is a within-pair one, so it need not contain 1.0: on an H200 this
    # 4.6 us softmax against itself read 0.96x-1.03x across fresh pairs behind the busy precursor alone, and
    # 1.0005x [1.0003, 1.0010] with CUDA graphs, the default (docs/timing.md).
    low, high = aa.timing.speedup_interval
    assert aa.verified and low <= 1.02 and 0.95 <= aa.timing.speedup <= 1.05, aa.timing
    twice = keep(
        run_judge(reference, CANDIDATES / "softmax_twice.py", device="cuda", timing=True, policy="practical"),
        "control-twice",
    )
    assert twice.verified and abs(twice.timing.speedup - 0.5) <= 0.025, twice.timing


def test_timing_regime_clocks_l2_reset_and_the_compile_baseline_on_cuda():
    reference = EXAMPLES / "softmax" / "reference.py"
    candidate = EXAMPLES / "softmax" / "candidate_triton.py"
    record = keep(run_judge(reference, candidate, device="cuda", timing=True, timing_compile=True), "timing-compile")
    t = record.timing
    assert record.verified and t.launch_regime == "cuda_graph" and t.graph_fallback is None, t
    # Two plain calls after the replays for each graph of the candidate's (one per calls-per-sample count its
    # calibration captured: three on the H200, 2026-12-04), each checked like a timed call.
    assert t.graph_rechecks >= 2 and t.graph_rechecks % 2 == 0, t
    assert t.timed_outputs_checked > t.graph_rechecks, t
    assert t.precursor_ms["candidate"] > 0 and t.precursor_ms["reference"] > 0
    assert t.persisting_l2_reset == {"candidate": True, "reference": True, "compiled": True}
    assert t.clocks["monitor"] == "nvml" and t.clocks["sm_mhz_max"] > 0, t.clocks
    assert t.compile_error is None and t.compiled.count == t.reference.count and t.speedup_vs_compile > 0, t
    low, high = t.speedup_vs_compile_interval
    assert low <= t.speedup_vs_compile <= high
    do_bench = keep(run_judge(reference, candidate, device="cuda", timing=True, timing_method="do_bench"), "do-bench")
    assert do_bench.timing.method == "do_bench" and do_bench.timing.speedup > 0, do_bench.timing


def test_cuda_graph_regime_checks_replays_and_falls_back_when_capture_fails():
    # The regime itself (the default) times the honest examples and the controls above.
    reference = EXAMPLES / "softmax" / "reference.py"
    stale = keep(
        run_judge(reference, CANDIDATES / "graph_stale_capture.py", device="cuda", timing=True),
        "graph-stale",
    )
    assert stale.status == "FAIL" and stale.failure.phase == "timing", stale.failure
    # Honest for its first 16 calls, then its last answer: a graph captured later replays stale answers,
    # one captured earlier replays honest work, and the plain calls after the replays see the switch.
    switch = keep(
        run_judge(TASKS / "tiny_bias_relu.py", FIXTURES_DIR / "timing_switch.py", device="cuda", timing=True),
        "graph-switch",
    )
    assert switch.status == "FAIL" and switch.failure.phase == "timing", switch.failure
    fallback = keep(
        run_judge(
            reference,
            CANDIDATES / "graph_uncapturable.py",
            device="cuda",
            timing=True,
            timing_regime="cuda_graph",
            policy="practical",
        ),
        "graph-fallback",
    )
    t = fallback.timing
    assert fallback.verified and t.launch_regime == "busy_precursor" and "candidate side" in t.graph_fallback, t
    # It synchronises on every call, so its samples are host-bound: the regime says so, the speedup is low.
    assert "candidate_timing2" in fallback.logs and t.host_bound_samples["candidate"] > 0 and t.speedup > 0, t
