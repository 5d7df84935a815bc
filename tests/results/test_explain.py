"""The explanation a model reads after its attempt: what failed, where, by how much, and what to change."""

from helpers import make_record
from kerneljudge.results.explain import LIMIT, explain
from kerneljudge.results.verdict import Correctness, Failure, Finding, TrialRecord

WORST = {
    "index": 0,
    "passed": False,
    "summary": "337 of 528 elements outside tolerance",
    "numel": 528,
    "max_abs_error": 2.1227850914001465,
    "mismatch_count": 337,
    "atol": 0.0001,
    "worst_index": [14, 29],
    "worst_candidate": 0.3819860816001892,
    "worst_expected": 2.5047712326049805,
}
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/judge/src/kerneljudge/worker/candidate.py", line 182, in op_call\n'
    "    out = self.model(*inputs)\n"
    '  File "/tmp/kerneljudge-candidate-p1/candidate.py", line 9, in helper\n'
    "    y = x.view(-1, 7)\n"
    '  File "/tmp/kerneljudge-candidate-p1/candidate.py", line 11, in forward\n'
    "    return x @ self.bias.reshape(1, -1)\n"
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x33 and 1x33)\n"
)


def failing(trial_kind="hidden", distribution=None, shape=None, **changes):
    trial = TrialRecord(
        index=2,
        kind=trial_kind,
        seed=123456789,
        passed=False,
        failure_kind="tolerance",
        summary="337 of 528 elements outside tolerance",
        outputs=[WORST],
        distribution=distribution,
        shape=shape,
    )
    passed = TrialRecord(index=0, kind="public", seed=987654321, passed=True, summary="ok")
    failure = Failure(kind="tolerance", phase="correctness (hidden trial 2)", summary="337 of 528 elements outside")
    return make_record(
        status="FAIL",
        failure=failure,
        correctness=Correctness(checked=True, passed=False, method="oracle", trials=[passed, trial]),
        **changes,
    )


def test_a_wrong_value_names_the_trial_the_index_and_both_values_but_never_the_seed():
    text = explain(failing(distribution={"kind": "scaled", "factor": 1000.0}))
    assert text.startswith("FAIL (tolerance) in correctness (hidden trial 2)")
    assert "hidden inputs of another distribution (scaled, factor=1000)" in text
    assert "largest error 2.123 at index (14, 29) (got 0.382, expected 2.505)" in text
    assert "337 of 528 elements outside tolerance (atol 0.0001)" in text
    assert "123456789" not in text and "987654321" not in text


def test_a_hidden_shape_is_named_with_its_sizes():
    text = explain(failing(trial_kind="shape", shape={"values": {"N": 4097, "M": 3}}))
    assert "a hidden shape (N=4097, M=3)" in text


def test_a_crash_points_at_the_candidates_innermost_line_not_the_judges():
    failure = Failure(
        kind="runtime_error",
        phase="trial 0",
        summary="RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x33 and 1x33)",
        exception="builtins.RuntimeError",
        traceback=TRACEBACK,
    )
    text = explain(make_record(status="FAIL", failure=failure, failure_kind="runtime_error"))
    assert "In your code, line 11, in forward: return x @ self.bias.reshape(1, -1)" in text
    assert "op_call" not in text and "/judge/" not in text


def test_findings_come_with_their_remediation_and_notes_are_left_out():
    findings = [
        Finding(
            code="KJ-R022",
            detector="replay",
            severity="error",
            summary="output shares storage",
            remediation="Compute a fresh output.",
        ),
        Finding(code="KJ-N001", detector="x", severity="info", summary="an informational note"),
    ]
    text = explain(make_record(status="SUSPICIOUS", findings=findings))
    assert text.startswith("SUSPICIOUS")
    assert "KJ-R022 [error] output shares storage. Fix: Compute a fresh output." in text
    assert "KJ-N001" not in text


def test_a_speedup_timed_on_the_cpu_is_said_to_be_no_gpu_speedup():
    text = explain(make_record(speedup=0.003))  # the record's device: "cpu"
    assert "0.00x the reference's speed, slower than it" in text
    assert text.splitlines()[0].endswith("; measured on the CPU (Triton's interpreter): not a GPU speedup.")
    assert "CPU" not in explain(make_record(speedup=0.003, device="cuda"))
    assert "CPU" not in explain(make_record())  # not timed: no timing to caveat


def test_a_pass_gives_the_speedup_and_a_slow_one_says_so():
    assert "2.00x faster than the reference (median 1 ms" in explain(make_record(speedup=2.0))
    assert "0.50x the reference's speed, slower than it" in explain(make_record(speedup=0.5))
    assert "not timed (timing disabled by configuration)" in explain(make_record())


def test_the_text_is_bounded_whatever_the_record_holds():
    findings = [
        Finding(code=f"KJ-S{index:03d}", detector="d", severity="error", summary="x" * 500, remediation="y" * 500)
        for index in range(20)
    ]
    text = explain(failing(findings=findings))
    assert len(text) <= LIMIT and text.endswith("[cut: the whole record has the rest]")
    assert len(explain(failing(), limit=200)) <= 200
