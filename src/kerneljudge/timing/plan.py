"""What a timing is asked to do: the method (the interleaved paired timer, or a published timer reproduced),
the launch regime on CUDA and its words in the record, and the plan's counts and bounds (timing/basic.py
runs it; docs/timing.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from kerneljudge.timing.stopping import StoppingRule

# Launch-latency regimes (CUDA). On an idle H200 one event pair around one tiny softmax read 15 us, and
# back-to-back calls 7-11 us each depending on the process (the host issuing calls is the bottleneck);
# behind a GPU-busy precursor the same call read 5.9-6.2 us in every process (docs/timing.md).
BUSY_PRECURSOR = "busy_precursor"  # a GPU sleep before the start event covers the host's issue of the calls
BACK_TO_BACK = "back_to_back"  # calls issued back to back between one event pair; host latency may show
HOST_CLOCK = "host_clock"  # the CPU: the host clock around the calls
SINGLE_CALL = "single_call"  # KernelBench: one event pair per call on an idle GPU
DO_BENCH = "do_bench"  # Triton's triton.testing.do_bench in the worker
CUDA_GRAPH = "cuda_graph"  # each sample's calls captured once in a CUDA graph and replayed, behind a precursor

INTERLEAVED, KERNELBENCH = "interleaved", "kernelbench"  # the methods; the third is DO_BENCH
REGIMES = (BUSY_PRECURSOR, BACK_TO_BACK, CUDA_GRAPH)


REGIME_TEXT = {
    BUSY_PRECURSOR: "CUDA events around each sample's calls, behind a GPU-busy precursor that covers the host's "
    "issue of the calls (device time; launch latency hidden)",
    BACK_TO_BACK: "CUDA events around each sample's calls issued back to back (host launch cost shows where "
    "the host is slower than the GPU)",
    CUDA_GRAPH: "CUDA events around one replay of a CUDA graph of each sample's calls, behind a GPU-busy precursor "
    "(device time; launch latency hidden; every replay on other inputs than the capture's)",
    HOST_CLOCK: "host clock around each sample's calls (CPU: not a GPU speedup)",
    SINGLE_CALL: "one CUDA event pair per call on an idle GPU (KernelBench's: includes launch latency)",
    DO_BENCH: "Triton's do_bench in each worker (its own repetitions and cache clearing)",
}


@dataclass(frozen=True)
class TimingPlan:
    blocks: int = 5  # the minimum; the stopping rule may take more on CUDA
    samples: int = 10
    warmup: int = 2
    target_sample_ms: float = 1.0
    method: str = INTERLEAVED
    regime: str = CUDA_GRAPH  # on CUDA; the CPU always uses the host clock
    native_trials: int = 100
    max_blocks: int = 40
    target_rse: float = 0.005
    budget_s: float = 60.0
    # Every side timed one call per sample: for a candidate whose checked calls returned outputs sharing the previous
    # one's storage (KJ-R022), whose earlier calls' outputs a later call of its sample would overwrite before the
    # kept one could be copied (judgment/stages/kept_call.py); its every sample's kept output is then its only call's,
    # and the
    # reference's samples are made alike, so that the two carry the same per-sample overhead.
    one_call: bool = False

    def rule(self, device: str) -> StoppingRule:
        # On the CPU the figure is not a GPU speedup: the minimum number of blocks is enough.
        most = max(self.blocks, self.max_blocks) if device == "cuda" else self.blocks
        return StoppingRule(target_rse=self.target_rse, min_blocks=self.blocks, max_blocks=most, budget_s=self.budget_s)
