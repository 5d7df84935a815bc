"""Kernel traces: the worker's profiler plumbing (CPU) and the parent's reading of synthetic CUDA traces."""

import pytest
import torch

from kerneljudge.checks.trace import MalformedTrace, analyse, kernel_base, read_call
from kerneljudge.preflight.scan import scan
from kerneljudge.worker.trace import KernelTrace


def ranges(call=(100.0, 10.0), sync=(110.0, 40.0), marker=(90.0, 5.0)):
    out = [{"cat": "user_annotation", "name": "kj::call", "ts": call[0], "dur": call[1]}]
    out.append({"cat": "user_annotation", "name": "kj::sync", "ts": sync[0], "dur": sync[1]})
    if marker:
        out.append({"cat": "user_annotation", "name": "kj::marker", "ts": marker[0], "dur": marker[1]})
        out += launch(90.0, 1) + kernel(
            "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", 95, 1, 1
        )
    return out


def launch(ts, correlation, name="cudaLaunchKernel"):
    return [{"cat": "cuda_runtime", "name": name, "ts": ts, "dur": 2.0, "correlation": correlation}]


def kernel(name, ts, dur, correlation, stream=7):
    return [{"cat": "kernel", "name": name, "ts": ts, "dur": dur, "stream": stream, "correlation": correlation}]


def judge_events(events, declared=("bias_relu_kernel",), policy="strict"):
    call = read_call({"events": events}, "trial 7")
    return analyse([call], set(declared), policy)


def codes(found):
    return {f.code: f.severity for f in found}


def test_honest_triton_call_is_clean_and_its_kernel_is_attributed():
    events = ranges() + launch(102, 2, "cuLaunchKernel") + kernel("bias_relu_kernel", 112, 20, 2)
    summary, found = judge_events(events)
    assert found == []
    assert summary["declared_share"] == 1.0
    assert summary["kernels"][0] == {"name": "bias_relu_kernel", "kind": "declared", "launches": 1, "device_us": 20.0}
    assert summary["side_streams"] == []


def test_the_judges_marker_and_evidence_kernels_are_not_the_candidates():
    evidence = launch(200, 9) + kernel("void at::native::elementwise_kernel<direct_copy_kernel_cuda>", 205, 3, 9)
    summary, _ = judge_events(ranges() + launch(102, 2) + kernel("bias_relu_kernel", 112, 20, 2) + evidence)
    assert [k["name"] for k in summary["kernels"]] == ["bias_relu_kernel"]


def test_a_side_stream_kernel_that_ends_after_the_return_is_an_escape():
    events = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 112, 500, 2, stream=13)
    summary, found = judge_events(events)
    assert codes(found) == {"KJ-R024": "error"}
    assert summary["escaped"][0]["name"] == "bias_relu_kernel" and summary["side_streams"] == ["13"]


def test_a_side_stream_joined_before_return_is_fine():
    events = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 112, 30, 2, stream=13)
    assert judge_events(events)[1] == []


def tail(start_us, stream=7):
    """The worker's marker on the call's stream after the call returned: launched at 111, run at `start_us`."""
    annotation = [{"cat": "user_annotation", "name": "kj::tail", "ts": 111.0, "dur": 3.0}]
    fill = "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>"
    return annotation + launch(111.0, 50) + kernel(fill, start_us, 1, 50, stream=stream)


def test_a_short_side_stream_kernel_the_call_never_joined_is_an_escape_however_short():
    """Issue 19: 20 us on a side stream, done long before the wait for the call's stream returned (the
    return-time rule sees nothing), but still running when the call's stream reached the worker's tail."""
    events = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 104, 20, 2, stream=13) + tail(113.0)
    summary, found = judge_events(events)
    assert codes(found) == {"KJ-R024": "error"}
    assert summary["escaped"] == [{"call": "trial 7", "name": "bias_relu_kernel", "ended_after_tail_us": 11.0}]
    assert [k["name"] for k in summary["kernels"]] == ["bias_relu_kernel"]  # the tail is the judge's, not counted


def test_a_side_stream_kernel_joined_before_the_call_returned_ends_before_the_tail_runs():
    events = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 104, 20, 2, stream=13) + tail(125.0)
    summary, found = judge_events(events)
    assert found == [] and summary["side_streams"] == ["13"]


def test_a_failed_capture_for_unjoined_work_is_an_escape_and_other_failures_are_not():
    from kerneljudge.checks.trace import unjoined_capture

    found = unjoined_capture("the candidate side: CUDA error: capturing stream has unjoined work")
    assert found is not None and found.code == "KJ-R024" and found.severity == "error"
    assert found.evidence["source"] == "graph_capture"
    assert unjoined_capture("the candidate side: operation not permitted when stream is capturing") is None


def test_a_declared_kernel_that_never_ran_is_a_decoy_under_strict_and_info_under_practical():
    torch_work = launch(101, 2) + kernel(
        "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", 111, 5, 2
    )
    torch_work += launch(103, 3) + kernel(
        "void at::native::vectorized_elementwise_kernel<4, clamp_min_kernel>", 117, 5, 3
    )
    assert codes(judge_events(ranges() + torch_work)[1]) == {"KJ-R040": "error", "KJ-R041": "error"}
    assert codes(judge_events(ranges() + torch_work, policy="practical")[1]) == {"KJ-R040": "info", "KJ-R041": "info"}


def test_a_trivial_launch_beside_torch_compute_is_caught_by_the_work_share():
    events = ranges() + launch(101, 2) + kernel("bias_relu_kernel", 111, 1, 2)
    events += launch(103, 3) + kernel(
        "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", 112, 9, 3
    )
    summary, found = judge_events(events)
    assert codes(found) == {"KJ-R041": "error"}
    assert summary["declared_share"] == 0.1


def test_allocation_and_copies_around_a_kernel_are_allowed_under_strict():
    events = (
        ranges()
        + launch(101, 2)
        + kernel("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", 111, 8, 2)
    )
    events += launch(103, 3) + kernel("bias_relu_kernel", 119, 2, 3)
    events += [{"cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 121, "dur": 5, "stream": 7, "correlation": 4}]
    events += launch(104, 4, "cudaMemcpyAsync")
    summary, found = judge_events(events)
    assert found == [] and summary["device_us"]["movement"] == 13.0


def test_graph_replays_are_recorded():
    events = ranges() + launch(102, 2, "cudaGraphLaunch") + kernel("bias_relu_kernel", 112, 20, 2)
    summary, found = judge_events(events)
    assert codes(found) == {"KJ-R025": "info"} and summary["graph_launches"] == 1


@pytest.mark.parametrize(
    "report",
    [
        None,
        {"error": "the profiler did not start"},
        {"events": "x"},
        {"events": [{"cat": "kernel", "ts": "a"}]},
        {"events": []},
    ],
)
def test_a_missing_or_malformed_trace_is_never_read_as_clean(report):
    with pytest.raises(MalformedTrace):
        read_call(report, "trial 6")


def test_kernel_names_reduce_to_the_function_name():
    assert kernel_base("bias_relu_kernel") == "bias_relu_kernel"
    assert kernel_base("void relu_k<float>(float const*, float*, int)") == "relu_k"
    assert kernel_base("ns::inner::add_k(float*)") == "add_k"


def test_cuda_kernels_in_inline_sources_are_declared():
    source = (
        "from torch.utils.cpp_extension import load_inline\n"
        'src = "__global__ void __launch_bounds__(256) relu_k(float* y) {}"\n'
    )
    names = [(d["name"], d["kind"]) for d in scan(source).declared_kernels]
    assert names == [("relu_k", "cuda")]


def test_the_worker_profiler_records_the_named_ranges_on_the_cpu():
    tracer = KernelTrace(torch)
    with tracer.active():
        with tracer.range("call"):
            torch.randn(64).relu()
        with tracer.range("sync"):
            pass
    report = tracer.report()
    assert [e["name"] for e in report["events"]] == ["kj::call", "kj::sync"]
    call = read_call(report, "trial 5")
    assert call.candidate == [] and call.return_us > 0


def test_timed_calls_far_below_the_traced_device_time_are_flagged():
    from kerneljudge.checks.trace import timed_versus_traced

    summary = {"calls_traced": ["hidden 2", "hidden 4"], "device_us": {"declared": 180.0, "movement": 20.0, "other": 0}}
    evidence, found = timed_versus_traced(summary, 0.08)  # 80 us timed against 100 us traced per call: a warm L2
    assert evidence == {"traced_device_us_per_call": 100.0, "timed_us_per_call": 80.0, "timed_fraction": 0.8}
    assert found == []
    evidence, found = timed_versus_traced(summary, 0.002)  # 2 us: a cached answer launches nothing
    assert [(f.code, f.severity) for f in found] == [("KJ-R051", "warning")] and evidence["timed_fraction"] == 0.02
    tiny = {"calls_traced": ["hidden 2"], "device_us": {"declared": 2.5, "movement": 0.0, "other": 0.0}}
    assert timed_versus_traced(tiny, 0.0005)[1] == []  # under the 2 us floor: event noise, not evidence
    assert timed_versus_traced(None, 0.002) == (None, []) and timed_versus_traced(summary, None) == (None, [])
