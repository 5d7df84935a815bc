"""Run by tests/suite/test_suite_properties.py, in a process of its own started with TRITON_INTERPRET=1 (Triton reads
it when it is imported): python tests/suite_properties.py OP. Exits 0 when hypothesis finds no counterexample,
and prints it otherwise."""

from __future__ import annotations

import importlib.util
import sys

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kerneljudge import suite
from kerneljudge.checks.correctness import compare_to_oracle, tolerance_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Widths near the candidates' block sizes (powers of two, 8192 where rows start looping) and odd ones.
WIDTHS = st.one_of(st.sampled_from([1, 2, 127, 128, 129, 1000, 4095, 4096, 8191, 8192, 8193]), st.integers(1, 9000))


def shapes_for(op: str):
    if op == "rope":  # (batch, seq, heads, head_dim), head_dim even
        return st.tuples(
            st.integers(1, 2), st.integers(1, 8), st.integers(1, 6), st.integers(1, 64).map(lambda h: 2 * h)
        )
    return st.tuples(st.integers(1, 6), WIDTHS)


def load_candidate(op: str):
    path = suite.SuiteTask(op, "fp32", (1, 1)).candidate_path()
    spec = importlib.util.spec_from_file_location(f"suite_candidate_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(op: str, module, dtype: str, shape: tuple[int, ...], scale: float, offset: float) -> None:
    task = suite.SuiteTask(op, dtype, shape, scale=scale, offset=offset)
    namespace: dict = {}
    exec(compile(task.text(), task.name, "exec"), namespace)  # the package's own task code
    init = namespace["get_init_inputs"]()
    torch.manual_seed(0)
    reference = namespace["Model"](*init)
    torch.manual_seed(0)
    candidate = module.ModelNew(*init)
    inputs = namespace["get_inputs"]()
    with torch.no_grad():
        expected = reference(*inputs)
        oracle = reference.double()(*[x.double() for x in inputs])
        got = candidate(*inputs)
    pairs = zip(*(o if isinstance(o, tuple) else (o,) for o in (got, expected, oracle)), strict=True)
    for out, ref, orc in pairs:
        result = compare_to_oracle(out, ref, orc, tolerance_for(DTYPES[dtype]))
        assert result.passed, (task.name, shape, scale, offset, result.summary)


def main(op: str) -> int:
    module = load_candidate(op)

    @settings(max_examples=20, deadline=None, derandomize=True, database=None)
    @given(
        dtype=st.sampled_from(list(DTYPES)),
        shape=shapes_for(op),
        scale=st.sampled_from([1e-3, 1.0, 4.0, 100.0]),
        offset=st.sampled_from([0.0, 1000.0]) if op == "layernorm" else st.just(0.0),
    )
    def run(dtype, shape, scale, offset):
        check(op, module, dtype, shape, scale, offset)

    run()
    print(f"{op}: no counterexample in 20 drawn cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
