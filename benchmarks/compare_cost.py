"""What the parent's oracle comparison costs: seconds per output for compare_to_oracle (every trial's outputs)
and OracleCheck (a timed call's output, once per timing block), per dtype and size, best of --repeats.

    python benchmarks/compare_cost.py --sizes 1024 4096 --repeats 3 > table.md

The oracle is given rounded to the output's dtype, as the reference worker sends it; the candidate is the
oracle perturbed within tolerance, so both paths run to the end. docs/tolerances.md keeps a table.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from kerneljudge.checks.correctness import OracleCheck, compare_to_oracle, tolerance_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def best_s(step, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096], help="square outputs of this side")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("| output | dtype | compare_to_oracle | OracleCheck (timed output) | passed |")
    print("|---|---|---|---|---|")
    generator = torch.Generator().manual_seed(0)
    for side in args.sizes:
        exact = torch.randn(side, side, dtype=torch.float64, generator=generator)
        for name in args.dtypes:
            dtype = DTYPES[name]
            ref, oracle = exact.to(dtype), exact.to(dtype)
            cand = (exact * (1 + torch.finfo(dtype).eps)).to(dtype)
            tol = tolerance_for(dtype)
            full = best_s(lambda: compare_to_oracle(cand, ref, oracle, tol), args.repeats)  # noqa: B023
            check = OracleCheck(ref, oracle, tol)
            fast = best_s(lambda: check.compare(cand), args.repeats)  # noqa: B023
            passed = compare_to_oracle(cand, ref, oracle, tol).passed and check.compare(cand).passed
            print(f"| {side} x {side} | {name} | {full:.3f} s | {fast:.3f} s | {passed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
