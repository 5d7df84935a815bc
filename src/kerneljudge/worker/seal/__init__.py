"""The seal: what keeps a candidate's code from mending a timed output between its sample and its check (H03, H21).

The parent names the call whose output it checks after the sample ran (judgment/stages/kept_call.py); the worker
commits to every output first, and copies the named one with only its own code running.

- `sample.py`: the seal between a timed sample and the copy of its checked output;
- `scope.py`: what the seal looks at besides the process's doors (operators, torch's modules, threads);
- `signal_handlers.py`: the C handlers of a worker's signals, and whether each lies in an installed library;
- `timed_outputs.py`: what is checked of a sample's outputs before the named one is copied (the commit reads it);
- `commit.py`: the commit: the digests of every call's output, sent before the parent names the call;
- `digest.py`: the commit's digest, a fingerprint a mended output cannot be made to match;
- `digest_graphs.py`: the digests on a CUDA device, replayed from CUDA graphs;
- `digest_kernels.py`: the digest fused into a few kernels on a CUDA device.
"""
