"""A timed sample's calls as one CUDA graph, for the worker's timer (worker/timing/timer.py): captured once per model
and number of calls, on copies of the timing pool's input sets, and refilled with each sample's sets before its replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerneljudge.protocol import wire


class GraphTimer:
    """The CUDA graphs of a worker's timed samples, and the graph buffers' refills."""

    torch: Any
    staged: list[Any]  # the timing pool, staged once (worker/timing/timer.py)
    graphs: dict[tuple[bool, int], Any]
    synchronize: Callable[[], None]  # the worker's (worker/base.py)

    def graph_for(self, model: Any, compiled: bool, pool: list[Any], calls: int) -> tuple[Any, Any, list[Any]]:
        """A CUDA graph of one sample's `calls` calls, captured once per (model, calls), with every call's output.

        The graph reads copies of the pool's sets (`static`, call i the copy of set i mod len(pool)); before
        each replay `load_static` writes that sample's sets into them. The warm-up and the capture see set 0
        in place, every replay other contents, so a graph that replays stale work (an output computed at
        capture time) returns wrong outputs. Every call's output is held, so that the parent can name the
        one it checks after a replay (`op_time`), and none is told apart while the candidate's code runs.
        """
        key = (compiled, calls)
        if key in self.graphs:
            return self.graphs[key]
        torch = self.torch
        if not self.staged:
            raise RuntimeError("a CUDA graph needs the staged timing pool")
        for position in range(len(pool[0])):
            leaves = [inputs[position] for inputs in pool]
            if not isinstance(leaves[0], torch.Tensor) and any(leaf != leaves[0] for leaf in leaves):
                raise RuntimeError("the input sets differ in a value that is not a tensor; a graph would fix it")
        static = [[wire.placed(t) if isinstance(t, torch.Tensor) else t for t in inputs] for inputs in pool]
        side = torch.cuda.Stream()  # warm up off the default stream, as graph capture wants
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*static[0])
        torch.cuda.current_stream().wait_stream(side)
        self.synchronize()
        graph = torch.cuda.CUDAGraph()
        outputs: list[Any] = []
        with torch.cuda.graph(graph):
            for i in range(calls):
                outputs.append(model(*static[i % len(static)]))
        self.synchronize()
        self.graphs[key] = (graph, static, outputs)
        return self.graphs[key]

    def load_static(self, static: list[Any], pool: list[Any], sample: int) -> None:
        """Copy sample `sample`'s input sets into the graph's buffers: buffer m holds the set that calls
        m, m + len(pool), ... of that sample use (`wire.timed_set`)."""
        self.fill_static(static, [pool[wire.timed_set(sample, m, len(pool))] for m in range(len(static))])

    def fill_static(self, static: list[Any], sources: list[Any]) -> None:
        """Copy input set `sources[m]` into the graph's buffer m, tensor by tensor."""
        for buffers, source in zip(static, sources, strict=True):
            for buffer, value in zip(buffers, source, strict=True):
                if isinstance(buffer, self.torch.Tensor):
                    buffer.copy_(value)
