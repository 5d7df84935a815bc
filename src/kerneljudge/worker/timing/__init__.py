"""Timing inside a worker: the worker measures and reports per-call times; the parent decides (kerneljudge/timing).

- `timer.py`: timed samples of many calls, CUDA graphs of them, the L2 flush, the precursor;
- `graph.py`: a timed sample's calls as one CUDA graph, captured once and refilled before each replay;
- `pool.py`: the reference worker's timing pool: the timed input sets, their kept outputs, the compiled reference.
"""
