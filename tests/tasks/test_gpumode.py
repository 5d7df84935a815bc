"""The GPU MODE format: a problem folder (task.yml, reference.py, task.py, a shared utils.py) and a submission
that defines custom_kernel are judged as a KernelBench task and candidate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from helpers import run_judge
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import TaskError
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.lane import short_of_memory
from kerneljudge.runs.batch import read_manifest, run_batch
from kerneljudge.sources.candidate import load_candidate
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_task

PROBLEM = Path(__file__).parents[1] / "fixtures" / "gpumode" / "rowscale"
PREFIX = Path(__file__).parents[1] / "fixtures" / "gpumode" / "prefixstats"


def test_a_problem_folder_reduces_to_a_kernelbench_task_whose_trials_draw_their_own_seed():
    task = load_task(PROBLEM)
    assert task.name == "rowscale" and task.path == str(PROBLEM)
    assert "from task import" not in task.text and "from utils import" not in task.text
    namespace: dict = {}
    exec(compile(task.text, "rowscale", "exec"), namespace)  # trusted fixture
    torch.manual_seed(1)
    x, y = namespace["get_inputs"]()
    assert x.shape == (7, 300) and y.shape == (7, 300)  # task.yml's first test
    torch.manual_seed(2)
    assert not torch.equal(namespace["get_inputs"]()[0], x)  # the judge's seed, not the spec's fixed one
    out = namespace["Model"]()(x, y)
    assert out is y and torch.allclose(out, x / x.abs().amax(-1, keepdim=True))


def test_a_submission_becomes_a_candidate_and_anything_else_is_left_alone():
    task = load_task(PROBLEM)
    submission = load_candidate(PROBLEM / "submission.py")
    adapted = gpumode.adapt_candidate(task, submission)
    assert "class ModelNew" in adapted.text and "def custom_kernel" in adapted.text
    assert "input_t = TypeVar" in adapted.text and "def close" not in adapted.text  # only the helpers it imports
    assert adapted.name == "submission" and adapted.sha256 != submission.sha256
    already = load_candidate(Path(__file__).parents[2] / "examples" / "softmax" / "candidate_triton.py")
    assert gpumode.adapt_candidate(task, already) is already
    kernelbench = load_task(Path(__file__).parents[2] / "examples" / "softmax" / "reference.py")
    assert gpumode.adapt_candidate(kernelbench, submission) is submission


def test_an_honest_submission_passes_and_a_wrong_one_fails():
    record = run_judge(PROBLEM, PROBLEM / "submission.py", mode="audit")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    assert "KJ-R023" not in {f.code for f in record.findings}  # it writes its output input, as the reference does
    # Its output buffer (torch.empty among the inputs) is filled alike in both workers: never shipped.
    assert record.correctness.inputs == {"made": "each worker"}, record.correctness.inputs
    shaped = sorted(str(t.shape) for t in record.correctness.trials if t.kind == "shape")
    assert shaped == sorted(  # the other test and the benchmark, each a hidden shape: every one is checked
        str({"_KJ_SPEC": spec})
        for spec in ([["rows", 1], ["cols", 127], ["seed", 5236]], [["rows", 4096], ["cols", 4096], ["seed", 31232]])
    )
    wrong = run_judge(PROBLEM, PROBLEM / "submission_wrong.py", mode="audit")
    assert wrong.status == "FAIL" and wrong.failure_kind == "tolerance", wrong.failure


def test_a_submission_for_the_first_test_only_fails_at_the_other():
    record = run_judge(PROBLEM, PROBLEM / "submission_fixed.py", mode="audit")
    assert record.status == "FAIL" and record.failure.phase.startswith("shape trial 10"), record.failure
    assert record.failure_kind == "runtime_error" and "'[7, 300]' is invalid" in record.failure.summary


def test_a_batch_keys_submissions_as_judged_and_resumes(tmp_path):
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"task": str(PROBLEM), "candidate": str(PROBLEM / "submission.py")}) + "\n")
    config = JudgeConfig(device="cpu", mode="audit", policy="practical", timing=False, timeout_s=60.0)
    first = run_batch(read_manifest(manifest), config, tmp_path / "results.db", progress=False)
    assert first.judged == 1 and first.passed == 1, first
    again = run_batch(read_manifest(manifest), config, tmp_path / "results.db", progress=False)
    assert again.skipped == 1 and again.judged == 0  # the key computed before judging is the record's
    with Store(tmp_path / "results.db") as store:
        [record] = list(store)
    assert record.status == "PASS" and record.candidate.name == "submission"


def test_a_broken_problem_is_one_line(tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(PROBLEM, folder)
    (folder / "task.yml").write_text("tests: [\n")
    with pytest.raises(TaskError, match=r"task.yml: not YAML"):
        load_task(folder)
    (folder / "task.yml").write_text("files: []\n")
    with pytest.raises(TaskError, match="needs a `tests` list"):
        load_task(folder)
    (folder / "task.yml").write_text("tests:\n  - {rows: 2, cols: 3, seed: 1}\n")
    (folder / "reference.py").write_text("import utils\n" + (PROBLEM / "reference.py").read_text())
    with pytest.raises(TaskError, match="imports a helper module whole"):
        load_task(folder)


def test_the_problems_own_check_decides_at_every_test_and_benchmark_shape():
    """A float64 output written into a preallocated input, a 0-dim total beside it, a helper imported under an
    alias and custom_kernel bound by assignment: verified, each trial with the problem's check's verdict."""
    record = run_judge(PREFIX, PREFIX / "submission.py", mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    sizes = sorted(dict(t.shape["_KJ_SPEC"])["size"] for t in record.correctness.trials if t.kind == "shape")
    assert sizes == [1023, 6000, 20000]  # the other test and both benchmarks
    assert all(t.task_check == {"passed": True, "message": ""} for t in record.correctness.trials)
    assert record.correctness.tolerance["float64"]["name"] == "float64"  # the oracle compared too


def test_an_answer_the_problems_check_accepts_passes_and_the_oracle_disagreement_is_recorded():
    """float32 where the reference gives float64: the problem's check compares values only, as GPU MODE's
    prefix sum does; the oracle cannot compare, and says so in a finding."""
    record = run_judge(PREFIX, PREFIX / "submission_f32.py", mode="enforce")
    assert record.status == "PASS" and record.verified, record.failure
    [note] = [f for f in record.findings if f.code == "KJ-C002"]
    assert note.severity == "info" and "not compared with the oracle" in note.evidence["oracle"]
    assert record.correctness.trials[0].outputs[0]["passed"] is None


def test_a_kernel_right_only_at_the_test_sizes_fails_at_a_benchmark_size():
    record = run_judge(PREFIX, PREFIX / "submission_small_only.py", mode="enforce")
    assert record.status == "FAIL" and record.failure_kind == "tolerance", record.failure
    assert "('size', 6000)" in record.failure.phase or "('size', 20000)" in record.failure.phase  # a benchmark
    assert record.failure.summary.startswith("the task's own check:")


def test_timing_at_the_benchmark_shapes_reports_their_geometric_mean():
    record = run_judge(
        PREFIX, PREFIX / "submission.py", mode="audit", timing=True, timing_budget_s=2.0, timing_max_blocks=5
    )
    timing = record.timing
    assert timing.measured and len(timing.shapes) == 2, timing.reason
    assert [dict(s["shape"]["_KJ_SPEC"])["size"] for s in timing.shapes] == [6000, 20000]
    product = timing.shapes[0]["speedup"] * timing.shapes[1]["speedup"]
    assert timing.speedup == pytest.approx(product**0.5)
    assert timing.timed_busy_s > 0 and 0 < timing.busy_fraction < 1  # both shapes' timed calls, summed


QR_INTO = Path(__file__).parents[1] / "fixtures" / "gpumode" / "qrinto"
HALF_MIX = Path(__file__).parents[1] / "fixtures" / "gpumode" / "halfmix"


def test_a_named_tuple_reaches_the_problems_check_as_a_tuple_and_the_output_buffer_among_the_inputs_is_writable():
    """linalg's QR check requires a tuple (torch returns a named one); pmpp_v2's conv2d hands the output's
    buffer among the inputs, and GPU MODE's harness passes copies: writing into it is no violation."""
    record = run_judge(QR_INTO, QR_INTO / "submission.py", mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, [f.code for f in record.findings])
    assert all(t.task_check == {"passed": True, "message": ""} for t in record.correctness.trials)
    written = [f for f in record.findings if f.code in ("KJ-R021", "KJ-R023")]
    assert written and all(f.severity == "info" for f in written)  # seen, and recorded


def test_a_reference_without_an_oracle_is_judged_by_the_problems_own_check():
    """amd/moe's reference mixes float32 and float16 inside: it runs in neither float64 nor float32."""
    record = run_judge(HALF_MIX, HALF_MIX / "submission.py", mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, record.capabilities.get("task_runs_here"))
    assert record.correctness.oracle_dtype is None
    assert "the reference has none" in record.correctness.trials[0].outputs[0]["summary"]
    wrong = run_judge(HALF_MIX, HALF_MIX / "submission_wrong.py", mode="enforce")
    assert wrong.status == "FAIL" and wrong.failure.summary.startswith("the task's own check: max difference")


def test_a_problems_check_short_of_memory_is_the_judges_shortage_not_the_candidates_failure(tmp_path):
    """On an H200 with twelve lanes, linalg's qr_v2 check raised CUDA's OutOfMemoryError at its sixth test and
    an honest submission FAILed. The check runs on the trusted side: its shortage is the batch's to judge
    again alone, never the candidate's tolerance failure."""
    shutil.copytree(PROBLEM.parent, tmp_path / "gpumode")
    folder = tmp_path / "gpumode" / "rowscale"
    reference = (folder / "reference.py").read_text()
    calls = "CALLS = []\n\n\ndef check_implementation(data, output):\n    CALLS.append(1)\n"
    short = '    if len(CALLS) == 2:\n        raise torch.OutOfMemoryError("CUDA out of memory")\n'
    (folder / "reference.py").write_text(reference.replace("def check_implementation(data, output):\n", calls + short))
    record = run_judge(folder, folder / "submission.py", mode="enforce")
    assert record.status == "ERROR" and record.failure.kind == "judge_error", record.failure
    assert "CUDA out of memory" in record.failure.summary and short_of_memory(record)
