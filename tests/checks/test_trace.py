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
    """A short escape: 20 us on a side stream, done long before the wait for the call's stream returned (the
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


# ---- kernels judged by origin (checks/kernel_names.py): realistic demangled and mangled names

ANONYMOUS_KERNELS = [
    "void (anonymous namespace)::bias_relu_kernel<float>(float const*, float const*, float*, int, int)",
    "void fused::(anonymous namespace)::bias_relu_kernel<__half, 256>(__half const*, __half const*, __half*, long)",
    "void (anonymous namespace)::bias_relu_kernel(float*, float const*, void (*)(float*), int)",
    "_ZN12_GLOBAL__N_116bias_relu_kernelIfEEvPKfS2_Pfii",
    "_ZN46_GLOBAL__N__9f1e0c7a_18_inline_ext_cu_5c1a2f3b16bias_relu_kernelEPfPKfi",
]
TORCH_MOVEMENT_KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, "
    "4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, "
    "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1>)",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<float, unsigned int, 2, 128, 1>"
    "(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
    "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
]
TORCH_COMPUTE_KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "void at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::"
    "{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float, bool)#1}",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
    "sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "float, 4, 4>)",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
]


def kind(name, declared=("bias_relu_kernel",), by_name=True, category="kernel"):
    from kerneljudge.checks.trace import Activity, kind_of

    return kind_of(Activity(category, name, 0.0, 1.0, 7, 1), set(declared), by_name)


@pytest.mark.parametrize("name", ANONYMOUS_KERNELS)
def test_a_declared_kernel_in_an_anonymous_namespace_is_the_candidates(name):
    assert kernel_base(name) == "bias_relu_kernel"
    assert kind(name) == "declared"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("void ns::Op::operator<<(int)", "operator<<"),
        ("void ns::less_k<(int)3>(void (*)(int), float*)", "less_k"),
        ("unsigned int ns::k2(int)", "k2"),
        ("std::pair<int, int> ns::k3<std::vector<int> >(int)", "k3"),
        ("void apply<float>(float)::{lambda()#1}::operator()() const", "operator()"),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_"
            "128x128_16x4_nn_align4::Params)",
            "Kernel2",
        ),  # fmt: skip
        ("_Z6relu_kPfi", "relu_k"),
        ("_Z1kIfEvPT_", "k"),
        ("triton_poi_fused_add_relu_0", "triton_poi_fused_add_relu_0"),
    ],
)
def test_kernel_names_are_read_past_templates_operators_lambdas_and_return_types(name, base):
    assert kernel_base(name) == base


@pytest.mark.parametrize("name", TORCH_MOVEMENT_KERNELS)
def test_torchs_own_copy_and_fill_kernels_are_data_movement(name):
    assert kind(name) == "movement"
    assert kind(name, by_name=False) == "other"  # the source defines names in torch's namespaces: no credit


@pytest.mark.parametrize("name", TORCH_COMPUTE_KERNELS)
def test_torch_and_library_compute_is_other_work_even_with_fill_in_its_name(name):
    assert kind(name) == "other"


@pytest.mark.parametrize(
    "name",
    [
        "copy_kernel",  # a Triton kernel the preflight did not see, named like data movement
        "fill_rows_kernel",
        "void memcpy_like_gemm<float>(float const*, float*, int)",
        "void mylib::fill(float*, int)",
    ],
)
def test_a_kernel_named_like_movement_outside_torch_is_not_movement(name):
    assert kind(name) == "other"
    assert kind(name, declared=(kernel_base(name),)) == "declared"


def test_a_declared_name_that_is_also_torchs_gets_none_of_torchs_work():
    """A decoy kernel named `vectorized_elementwise_kernel`: torch's elementwise compute of that name stays torch's,
    and a copy kernel in whose name a declared name appears is no movement."""
    add = TORCH_COMPUTE_KERNELS[0]
    assert kind(add, declared=("vectorized_elementwise_kernel",)) == "other"
    assert kind(TORCH_MOVEMENT_KERNELS[0], declared=("vectorized_elementwise_kernel",)) == "other"
    assert kind(TORCH_MOVEMENT_KERNELS[0], declared=("FillFunctor",)) == "other"
    assert kind("Memcpy DtoD (Device -> Device)", category="gpu_memcpy") == "movement"
    assert kind("Memset (Device)", category="gpu_memset") == "movement"


def test_a_source_that_defines_names_in_torchs_namespaces_is_noticed():
    from kerneljudge.checks.kernel_names import claims_torch_namespaces

    assert claims_torch_namespaces('src = """namespace at { namespace native {\n__global__ void k() {} } }"""')
    assert claims_torch_namespaces("cuda = 'namespace at::native { struct FillFunctor {}; }'")
    assert not claims_torch_namespaces("auto s = at::cuda::getCurrentCUDAStream(); namespace mykern { }")


def test_a_decoy_named_like_torchs_kernel_beside_torch_compute_is_caught_under_strict():
    add = TORCH_COMPUTE_KERNELS[0]
    events = ranges() + launch(101, 2) + kernel("vectorized_elementwise_kernel", 111, 1, 2)
    events += launch(103, 3) + kernel(add, 112, 9, 3)
    summary, found = judge_events(events, declared=("vectorized_elementwise_kernel",))
    assert codes(found) == {"KJ-R041": "error"} and summary["declared_share"] == 0.1


# ---- the tail check on the stream the call was made on (KJ-R024, KJ-R028)


def test_the_tail_is_judged_wherever_it_ran_and_a_tail_on_another_stream_is_a_moved_stream():
    """A call that makes another stream current and leaves it so: the worker's tail ran on stream 13, not the
    marker's 7. A kernel on stream 21 still running when the tail ran is an escape all the same, and the move
    itself is KJ-R028."""
    events = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 104, 20, 2, stream=21) + tail(113.0, stream=13)
    summary, found = judge_events(events)
    assert codes(found) == {"KJ-R024": "error", "KJ-R028": "error"}
    assert summary["escaped"] == [{"call": "trial 7", "name": "bias_relu_kernel", "ended_after_tail_us": 11.0}]
    assert summary["streams_moved"] == [{"call": "trial 7", "before": "7", "tail": "13"}]
    joined = ranges() + launch(102, 2) + kernel("bias_relu_kernel", 104, 20, 2, stream=13) + tail(125.0)
    assert judge_events(joined)[1] == []
