"""How often each perturbed replay shows a race that an idle GPU hides (docs/benchmarks/redteam.md).

The judge replays one trial of each candidate under perturbations of the device's scheduling
(worker/correctness/perturb.py): under the strict policy one of every kind, each with strengths drawn by the
parent (judgment/stages/replays.perturbations). A race is caught only if the drawn replay shows it, so what a
replay of each kind shows, and how often, decides the red team's H10 fixtures. This runs a candidate's call in
this process (the project's own fixtures only: nothing here is sandboxed), first `--calls` times on the idle
device, then `--calls` times under each kind with strengths drawn as the parent draws them, the call made as the
candidate's worker makes it (marked on its stream before and after, sized by the previous call's length), and
counts the calls whose output differs bitwise from the first idle one. `sm_hold` is also broken down by its
drawn share of the SMs.

    python benchmarks/perturb_reach.py [--task src/kerneljudge/redteam/tasks/row_sum.py]
        [--candidate src/kerneljudge/redteam/fixtures/split_row_race.py] [--calls 40] [--seed 0] [--json FILE]

CUDA only. The table goes to stdout (Markdown); the rows and every call's drawn strengths, whether its output
differed and its length go to --json, to tell which strengths find the race.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kerneljudge.judgment.stages.replays import perturbations
from kerneljudge.protocol.limits import PERTURB_KINDS
from kerneljudge.worker.correctness import perturb
from kerneljudge.worker.timing.timer import Timer

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "src/kerneljudge/redteam/tasks/row_sum.py"
CANDIDATE = ROOT / "src/kerneljudge/redteam/fixtures/split_row_race.py"
SHARES = ((0.5, 0.7), (0.7, 0.9 + 1e-9))


class Device(Timer):
    """What the perturbations ask of a worker (its torch, its device, its sleep calibration and flush buffer)."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.torch, self.device, self.product_ms = torch, device, None


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def called(worker: Device, model: Any, inputs: list[Any], spec: dict[str, Any] | None, last_s: float) -> tuple:
    """One call as the candidate's worker makes it (worker/candidate.py): its output and its length in seconds."""
    # Judge versions before 0.3.21 mark no call: their hold counts from its own launch.
    begin = getattr(perturb, "begin_call", lambda worker: None)
    end = getattr(perturb, "end_call", lambda worker: None)
    with perturb.perturbed(worker, spec, last_s) as done:
        if "error" in done:
            raise RuntimeError(f"the perturbation {spec} could not be made: {done['error']}")
        begin(worker)
        began = time.perf_counter()
        with torch.no_grad():
            out = model(*inputs)
        end(worker)
        torch.cuda.current_stream(worker.device).synchronize()
        length = time.perf_counter() - began
    torch.cuda.synchronize(worker.device)
    return out.clone(), length


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", type=Path, default=TASK)
    parser.add_argument("--candidate", type=Path, default=CANDIDATE)
    parser.add_argument("--calls", type=int, default=40, help="calls idle and under each kind")
    parser.add_argument("--seed", type=int, default=0, help="seeds the drawn strengths and the inputs")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("perturb_reach: CUDA only (the perturbations are the device's)", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    task, candidate = load(args.task, "task"), load(args.candidate, "candidate")
    torch.manual_seed(args.seed)
    model = candidate.ModelNew(*task.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    worker = Device(device)
    first, last_s = called(worker, model, inputs, None, 0.0)
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    draws: dict[str, list[dict[str, Any]]] = {}  # every call's drawn strengths and whether its output differed
    for kind in (None, *PERTURB_KINDS):
        differing, lengths, drawn = 0, [], []
        for _ in range(args.calls):
            spec = None if kind is None else next(p for p in perturbations(None, rng, True) if p["kind"] == kind)
            _, last_s = called(worker, model, inputs, None, last_s)  # the previous call, idle, sizes this one
            out, length = called(worker, model, inputs, spec, last_s)
            same = bool(torch.equal(out, first))
            differing += not same
            lengths.append(length)
            drawn.append({**(spec or {}), "differs": not same})
        rows.append(row(kind or "idle", differing, args.calls, lengths))
        draws[kind or "idle"] = [
            {**d, "call_ms": round(length * 1e3, 4)} for d, length in zip(drawn, lengths, strict=True)
        ]
        if kind == "sm_hold":
            for low, high in SHARES:
                part = [d for d in drawn if low <= d["share"] < high]
                rows.append(
                    row(f"sm_hold, share {low}-{min(high, 0.9):.1f}", sum(d["differs"] for d in part), len(part))
                )
    print(f"{torch.cuda.get_device_name(device)}, {args.candidate.name} on {args.task.name}, seed {args.seed}\n")
    print("| replay | calls | outputs differing | share | median call ms |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['replay']} | {r['calls']} | {r['differing']} | {r['share']:.2f} | {r['median_ms'] or ''} |")
    if args.json:
        report = {"device": torch.cuda.get_device_name(device), "rows": rows, "draws": draws}
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def row(name: str, differing: int, calls: int, lengths: list[float] | None = None) -> dict[str, Any]:
    median = sorted(lengths)[len(lengths) // 2] * 1e3 if lengths else None
    return {
        "replay": name,
        "calls": calls,
        "differing": differing,
        "share": differing / calls if calls else 0.0,
        "median_ms": round(median, 3) if median is not None else None,
    }


if __name__ == "__main__":
    sys.exit(main())
