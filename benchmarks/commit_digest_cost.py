"""What the commit's digests cost against the work they cover (docs/timing.md, "What the commit window still holds").

KJ-R027 sets a candidate's commit against the reference's, with room of about one reference commit: where digesting
an output costs more than making it, that room holds a share of a call's work. This times, in one process on one
device, the commit's digests of `calls` outputs of each size (worker/sample_commit.commit_digests, as a commit takes
them: stacked where small, on a CUDA device replayed from graphs up to digest_graphs.GRAPH_BYTES) against a
memory-bound kernel making the same outputs (torch's relu of x + bias, the red team's `bias_relu`), each the median
of `--repeats` after one unmeasured run, and prints their ratio: above one, the digest costs more than the work.
On a CUDA device the commit's digests run worker/seal/digest_kernels.py's fused kernels; the operators' column times the
same digests with those refused (the tree's operators, as before 0.3.14), and the first line says how long the
kernels took to build (NVRTC, once a process: `commit_digest.warm`).

    python benchmarks/commit_digest_cost.py [--device auto|cpu|cuda] [--sizes-kib 4 64 1024 4096 16384]
                                            [--calls 1 16] [--repeats 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

from kerneljudge.worker.seal import commit as sample_commit
from kerneljudge.worker.seal import digest as commit_digest
from kerneljudge.worker.seal import digest_graphs

COLUMNS = (
    ("output KiB", "kib"),
    ("outputs", "calls"),
    ("kernel ms", "kernel_ms"),
    ("operators ms", "operators_ms"),
    ("digests ms", "digest_ms"),
    ("digests / kernel", "ratio"),
    ("digests GB/s", "digest_gb_s"),
)


def median_ms(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    """The median wall milliseconds of `run`, the device waited for after each, one unmeasured run first."""
    seen = []
    for attempt in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        began = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if attempt:
            seen.append((time.perf_counter() - began) * 1e3)
    return statistics.median(seen)


def by_operators(run: Callable[[], object]) -> Callable[[], object]:
    """`run` with the fused kernels refused (commit_digest's operators digest), on graphs captured afresh."""

    def refused() -> object:
        commit_digest._fused_refused.add("benchmark")
        try:
            return run()
        finally:
            commit_digest._fused_refused.discard("benchmark")

    return refused


def measure(device: torch.device, kib: int, calls: int, repeats: int) -> dict[str, float | int]:
    numel = kib * 256  # float32
    inputs = [torch.randn(numel, device=device) for _ in range(calls)]
    bias = torch.randn(numel, device=device)
    outputs = [torch.relu(x + bias) for x in inputs]
    kernel_ms = median_ms(lambda: [torch.relu(x + bias) for x in inputs], device, repeats)
    digest_graphs._graphs.clear()
    operators_ms = median_ms(by_operators(lambda: sample_commit.commit_digests(outputs)), device, repeats)
    digest_graphs._graphs.clear()
    digest_ms = median_ms(lambda: sample_commit.commit_digests(outputs), device, repeats)
    nbytes = numel * 4 * calls
    return {
        "kib": kib,
        "calls": calls,
        "kernel_ms": round(kernel_ms, 4),
        "operators_ms": round(operators_ms, 4),
        "digest_ms": round(digest_ms, 4),
        "ratio": round(digest_ms / max(kernel_ms, 1e-6), 2),
        "digest_gb_s": round(nbytes / max(digest_ms, 1e-6) / 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--sizes-kib", type=int, nargs="+", default=[4, 64, 1024, 4096, 16384])
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    chosen = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(chosen)
    began = time.perf_counter()
    commit_digest.warm(device)
    build_ms = (time.perf_counter() - began) * 1e3
    rows = [measure(device, kib, calls, args.repeats) for calls in args.calls for kib in args.sizes_kib]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    fused = device.type == "cuda" and not commit_digest._fused_refused
    print(f"commit digests against the work, {name}, torch {torch.__version__}, medians of {args.repeats}")
    print(f"fused kernels: built in {build_ms:.0f} ms\n" if fused else "fused kernels: not used\n")
    print("| " + " | ".join(title for title, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for _, key in COLUMNS) + " |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": name, "fused": fused, "build_ms": round(build_ms, 1), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
