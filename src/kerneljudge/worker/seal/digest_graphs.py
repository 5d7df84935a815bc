"""The commit's digests (worker/seal/digest.py) on a CUDA device, replayed from CUDA graphs.

The tree over a tensor's words costs seven operators a level, and each is a kernel launch that costs the host
microseconds whatever its size: one commit of the red team's small `bias_relu` output took 1.6-1.7 ms on an H100
(2026-12-06, judge 0.3.11, benchmarks/kept_call_exchange.py) against 0.39 ms with 0.3.10's two linear sums, and the
parent's clock allows work in the commit window in proportion to that span (judgment/stages/untimed_work.py, KJ-R027).
Captured once per shape of words, a digest is one copy into the graph's input and one replay. The graph runs the
same integer operators on the same words, so its values are the eager operators' exactly: the reference's worker,
digesting the kept copy, finds the same digest whichever way either side took it.

The capture calls torch's own operators and nothing else. It does not use `torch.cuda.graph`, whose entry
synchronises the device, empties the caching allocator and may collect garbage: collection runs finalisers, a
candidate's among them, inside the sealed window (worker/seal/sample.py). A shape whose capture fails is digested by
the eager operators for the rest of the process. Graphs are kept for inputs up to GRAPH_BYTES, at most GRAPHS of
them: a graph holds its temporaries' memory for good, and a large piece's kernels run long enough that their launches
matter less.

No graph is captured where torch's caching allocator is off (`PYTORCH_NO_CUDA_MEMORY_CACHING`, as in a worker under
compute-sanitizer: judgment/sanitizer.SANITIZED_ENV). A capture fails there, and a failed capture leaves the default
CUDA generator in capture mode: every random draw after it raised "Offset increment outside graph capture
encountered unexpectedly", and the sanitized worker could not make a trial's inputs (an H100, 2026-12-07, judge
0.3.20: compute-sanitizer inconclusive on an honest Triton kernel)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

# A graph's private pool keeps the peak of its temporaries (some ten times its input: the words widened to int64, the
# weights, the leaves and their levels), so these bound what the graphs hold in a worker to well under 1 GiB.
GRAPH_BYTES = 8 << 20
GRAPHS = 8

_graphs: dict[tuple[Any, ...], tuple[Any, torch.Tensor, torch.Tensor]] = {}
_refused: set[tuple[Any, ...]] = set()


def capturable(environ: Any = os.environ) -> bool:
    """Whether this process may capture graphs: not with torch's caching allocator off (torch reads the variable as
    set unless it is empty or 0)."""
    return environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "") in ("", "0")


CAPTURABLE = capturable()


def replayed(key: Any, compute: Callable[[torch.Tensor], torch.Tensor], words: torch.Tensor) -> torch.Tensor:
    """compute(words), a tensor made from `words` by torch's operators alone, with no wait for the device: replayed
    from a graph captured for `key` and the words' shape, dtype and device where they lie on a CUDA device and are
    small enough, else run eagerly. A replay's answer is the graph's own output: read it before the next digest of
    that key and shape."""
    nbytes = words.numel() * words.element_size()
    if words.device.type != "cuda" or nbytes == 0 or nbytes > GRAPH_BYTES or not CAPTURABLE:
        return compute(words)
    full = (key, tuple(words.shape), words.dtype, words.device)
    found = _graphs.get(full)
    if found is None:
        if full in _refused or len(_graphs) >= GRAPHS:
            return compute(words)
        try:
            found = _graphs[full] = capture(compute, words)
        except RuntimeError:
            _refused.add(full)
            return compute(words)
    graph, static, out = found
    static.copy_(words)
    graph.replay()
    return out


def capture(compute: Callable[[torch.Tensor], torch.Tensor], words: torch.Tensor) -> tuple[Any, torch.Tensor, Any]:
    """A CUDA graph of compute over a contiguous buffer shaped like `words` (filled with them): (graph, its input,
    its output). The operators run once eagerly on a side stream first, as capture wants, then are captured there,
    in this thread's mode (another thread's CUDA work does not spoil it)."""
    device = words.device
    static = torch.empty(words.shape, dtype=words.dtype, device=device)
    static.copy_(words)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        compute(static)
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            out = compute(static)
        except BaseException:
            try:
                graph.capture_end()
            except RuntimeError:
                pass
            raise
        graph.capture_end()
    torch.cuda.current_stream(device).wait_stream(side)
    return graph, static, out
