"""What a failure of the trusted reference means: a task this machine cannot run (UNSUPPORTED, with the reason)
or a broken task (a judge error); and which judgments a batch judges again alone."""

import pytest

from helpers import TASKS, make_record, run_judge
from kerneljudge import protocol
from kerneljudge.checks.support import unsupported_reason
from kerneljudge.results.verdict import Capability, Failure
from kerneljudge.runs.backends.lane import short_of_memory
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task


def error(exc_type, message, phase="reference"):
    return protocol.Error(phase=phase, exc_type=exc_type, message=message)


@pytest.mark.parametrize(
    "response, reason",
    [
        (error("OutOfMemoryError", "CUDA out of memory. Tried to allocate 16.00 GiB."), "does not fit"),
        (error("ModuleNotFoundError", "No module named 'aiter'", phase="import"), "imports aiter"),
        (error("ModuleNotFoundError", "No module named 'einops'"), "imports einops"),  # inside a function
        (error("RuntimeError", "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul"), "cannot run"),
        (error("RuntimeError", "kerneljudge: this problem runs on 8 GPUs with a process group"), "cannot run"),
        (error("RuntimeError", "Torch not compiled with CUDA enabled"), "cannot run"),
        (error("NoOracle", "the reference runs, but neither in float64 nor in float32: x"), "no oracle"),
        (error("TypeError", "cannot send a value of type KVCache to a worker"), "objects"),
    ],
)
def test_a_reference_that_cannot_run_here_is_unsupported_with_the_reason(response, reason):
    assert reason in unsupported_reason(response, "cuda")


@pytest.mark.parametrize(
    "response",
    [
        error("ValueError", "num_channels (6) must be divisible by num_groups (8)"),
        error("NameError", "name 'height' is not defined"),
        error("RuntimeError", "the relationship between these shapes is wrong"),  # "hip" inside a word
    ],
)
def test_a_broken_task_is_not_hidden_behind_unsupported(response):
    assert unsupported_reason(response, "cuda") is None


def test_a_batch_judges_again_alone_what_ran_short_of_memory():
    oom = make_record(
        failure=Failure(
            kind="crash",
            phase="call",
            summary="the candidate worker died (killed by "
            "SIGKILL): torch.OutOfMemoryError: CUDA out of memory. Tried to allocate",
        )
    )
    assert short_of_memory(oom)
    unfit = make_record(failure=None)
    unfit.capabilities["task_runs_here"] = Capability(
        status="unavailable", required=True, detail="the reference does not fit the cuda's free memory (x)"
    )
    assert short_of_memory(unfit)
    no_handle = make_record(  # a worker starting beside lanes that hold the device's memory (an H200 sweep)
        failure=Failure(
            kind="judge_error",
            phase="judge",
            summary="the reference worker did not start: the reference worker died (killed by SIGKILL): RuntimeError: "
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        )
    )
    assert short_of_memory(no_handle)
    wrong = make_record(failure=Failure(kind="tolerance", phase="correctness", summary="3 of 9 elements outside"))
    assert not short_of_memory(wrong) and not short_of_memory(make_record(failure=None))


def test_an_oracle_short_of_memory_is_not_a_float32_oracle():
    """Out of memory in float64 says nothing of the task's ops: falling back to float32 would let the load on
    the device pick a weaker oracle. The judgment is short of memory (UNSUPPORTED here, judged again alone in
    a batch), never a pass against float32."""
    task = load_task(TASKS / "oracle_short_of_memory.py")
    record = run_judge(task, reference_as_candidate(task), mode="enforce")
    assert record.status == "UNSUPPORTED" and record.correctness.oracle_dtype != "float32"
    assert "does not fit" in record.capabilities["task_runs_here"].detail and short_of_memory(record)
