"""Upstream KernelBench's evaluator on one candidate, in this process (batch_throughput.py --kernelbench starts
one fresh process per candidate, as upstream's own scripts do).

Imports `kernelbench.eval.eval_kernel_against_ref` from the checkout given by path (ScalingIntelligence/
KernelBench: `src/kernelbench`; never vendored here) and calls it with the settings of upstream's
`scripts/eval_from_generations.py`: 5 correctness trials, 100 timed runs, performance measured, the backend
`triton` for a candidate that imports Triton and `cuda` otherwise. Writes one JSON object: compiled,
correctness, runtime and reference runtime (us, where upstream measured them), the seconds the call took,
or the exception that ended it.

Upstream's package imports its model clients when it is imported (`kernelbench/__init__.py` imports
`utils`, which imports openai, litellm, python-dotenv and tqdm); the evaluator uses none of them, and a GPU
machine without a network lacks them. Each such module that is not installed is stood in for by an empty
module whose every attribute is a no-op (`stand_ins`), and the JSON names them.

    python benchmarks/upstream_eval.py --kernelbench ../KernelBench --task T.py --candidate C.py --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

CORRECT_TRIALS, PERF_TRIALS = 5, 100  # upstream's scripts/eval_from_generations.py defaults


CLIENT_MODULES = ("openai", "litellm", "dotenv", "tqdm", "requests")  # imported by upstream's package, not used here


def stand_ins(names: tuple[str, ...] = CLIENT_MODULES) -> list[str]:
    """Put an empty module in place of each of `names` that is not installed; the names stood in for."""
    missing = [name for name in names if name not in sys.modules and importlib.util.find_spec(name) is None]
    for name in missing:
        module = types.ModuleType(name)
        module.__getattr__ = _no_op_attribute  # type: ignore[method-assign]
        sys.modules[name] = module
    return missing


def _no_op_attribute(attribute: str) -> Any:
    """A stand-in's attribute: a no-op callable, except the dunders that tools probe (`inspect` asks every module
    in sys.modules for `__file__` when torch registers an op; a callable there breaks torch's import)."""
    if attribute.startswith("__") and attribute.endswith("__"):
        raise AttributeError(attribute)
    return lambda *args, **kwargs: None


def backend_for(source: str) -> str:
    return "triton" if "import triton" in source or "from triton" in source else "cuda"


def evaluate(checkout: Path, task: Path, candidate: Path) -> dict[str, Any]:
    source = checkout / "src"
    if not (source / "kernelbench" / "eval.py").is_file():
        raise SystemExit(f"no upstream KernelBench evaluator at {source / 'kernelbench' / 'eval.py'}")
    sys.path.insert(0, str(source))
    stood_in = stand_ins()
    from kernelbench.eval import eval_kernel_against_ref

    reference, custom = task.read_text(), candidate.read_text()
    began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="kj-upstream-") as build:
            result = eval_kernel_against_ref(
                reference,
                custom,
                num_correct_trials=CORRECT_TRIALS,
                num_perf_trials=PERF_TRIALS,
                measure_performance=True,
                build_dir=build,
                backend=backend_for(custom),
            )
    except Exception as exc:  # upstream raises on some candidates; the benchmark counts that as a failure
        return {
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "seconds": round(time.monotonic() - began, 3),
            "stood_in": stood_in,
        }
    answer: dict[str, Any] = {"seconds": round(time.monotonic() - began, 3), "stood_in": stood_in}
    if result is None:  # upstream returns None when the candidate's build failed in a retryable way
        return answer | {"compiled": False, "correctness": False}
    for name in ("compiled", "correctness", "runtime", "ref_runtime"):
        answer[name] = getattr(result, name, None)
    answer["metadata"] = json.dumps(getattr(result, "metadata", {}), default=str)[:500]
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a ScalingIntelligence/KernelBench checkout")
    parser.add_argument("--task", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    args.json.write_text(json.dumps(evaluate(args.kernelbench, args.task, args.candidate)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
