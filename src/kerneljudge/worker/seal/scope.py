"""What the seal (worker/seal/sample.py) looks at besides the process's doors: the dispatcher's operators the copy
and the commit's digests run through, the names of torch's modules the worker's code reads after the seal, the
worker's own modules whose namespaces it compares whole, and the library threads it counts as the library's.

A name the worker's code reads between a sample's end and the named copy that is in none of these could be rebound
by a candidate's code to run in that window; tests/worker/test_sample_seal.py records the operators the copy and the
digests
dispatch and checks them against COPY_OPS."""

# The dispatcher's operators the copy and the commit's digests (worker/seal/digest.py) run through
# (tests/worker/test_sample_seal.py records them): a Python kernel registered over one of torch's (torch.library)
# would run
# in the window, and shows in its registrations.
COPY_OPS = (
    "aten::__lshift__.Scalar",
    "aten::__rshift__.Scalar",
    "aten::_local_scalar_dense",
    "aten::_to_copy",
    "aten::_unsafe_view",
    "aten::add.Tensor",
    "aten::alias",
    "aten::arange",
    "aten::arange.start",
    "aten::bitwise_and.Scalar",
    "aten::bitwise_or.Scalar",
    "aten::bitwise_or.Tensor",
    "aten::bitwise_xor.Scalar",
    "aten::bitwise_xor.Tensor",
    "aten::cat",
    "aten::clone",
    "aten::contiguous",
    "aten::copy_",
    "aten::detach",
    "aten::empty.memory_format",
    "aten::empty_strided",
    "aten::mul.Tensor",
    "aten::new_empty",
    "aten::new_full",
    "aten::reshape",
    "aten::select.int",
    "aten::slice.Tensor",
    "aten::stack",
    "aten::sum",
    "aten::sum.dim_IntList",
    "aten::to.dtype",
    "aten::view",
    "aten::view.dtype",
)
# The torch module's names the worker's code after the seal reads (the commit's digests, worker/seal/commit.py).
TORCH_NAMES = ("Tensor", "_C", "arange", "cat", "cuda", "int8", "int32", "int64", "stack", "uint8")
# torch.cuda's names the commit's graphs (worker/seal/digest_graphs.py) read; the graph class's own are all looked at.
CUDA_NAMES = ("CUDAGraph", "Stream", "current_stream", "stream")
# Threads of a library's own service class, whose code is the library's (checks/runtime.LIBRARY_THREADS).
SERVICES = frozenset({"tqdm._monitor.TMonitor"})
WORKER_MODULES = (
    "kerneljudge.worker.seal.sample",
    "kerneljudge.worker.seal.scope",
    "kerneljudge.worker.seal.commit",
    "kerneljudge.worker.seal.digest",
    "kerneljudge.worker.seal.digest_kernels",
    "kerneljudge.worker.seal.digest_graphs",
    "kerneljudge.worker.seal.signal_handlers",
    "kerneljudge.worker.timing.timer",
    "kerneljudge.worker.timing.graph",
    "kerneljudge.worker.seal.timed_outputs",
    "kerneljudge.protocol.wire",
    "kerneljudge.worker.evidence",
)
