"""The worker side: only code that runs in a sandboxed worker process, never in the trusted parent.

A worker serves one role for one judgment: the reference, which runs the trusted task, or the candidate, which
imports the untrusted candidate. It imports from kerneljudge only worker/, protocol/ (what both sides share) and a
few pure checks (tests/architecture/test_layering.py pins them); nothing outside worker/ imports it.

- `main.py`: the entry point, ``python -m kerneljudge.worker.main``, with its pipes and channels;
- `base.py`: what both kinds share: the request loop, the device, seeds, building a model, timing;
- `reference.py`: the reference worker: the trusted task, its inputs and outputs, the float64 oracle, comparisons;
- `candidate.py`: the candidate worker: imports the untrusted candidate and runs it on the inputs it is sent;
- `evidence.py`: runtime observations gathered around imports and calls (the parent turns them into findings);
- `trace.py`: a kernel trace of one candidate call, gathered with torch.profiler (CUPTI);
- `footprint.py`: what a task's trial will hold on the device, told on the meta device before any trial runs;
- `prepare.py`: a candidate's worker readied as it starts: Triton's installation key, torch's own wrappers;
- `device_crossing.py`: a device tensor carried between two workers by file descriptor (not yet on the path);
- `correctness/`: the reference worker's trials, oracle, comparisons, input contracts, shape families, replays;
- `timing/`: timing inside a worker: timed samples, CUDA graphs of them, the timing pool;
- `seal/`: the seal between a timed sample and the copy of its checked output, and the commit's digests.
"""
