"""What naming the kept timed call after each sample costs (stages/kept_call.py, since 0.3.7): a measured `time`
request asks the parent after each sample which call's output to keep (`sampled`, answered by `keep`). This
times the same requests of a reference worker (the red team's small bias_relu task by default, its pool staged)
with and without the exchange, many samples of one call each, and reports the parent's wall time per sample of
each and their difference: the exchange's cost, which lies between samples (outside the event pair and the host
clock) and adds to a timed judgment's measuring hold, once per sample on each side.

    python benchmarks/kept_call_exchange.py [--task FILE] [--samples 200] [--repeats 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import kerneljudge.redteam
from kerneljudge import protocol
from kerneljudge.tasks.lint_reference import SEEDS, LintReference
from kerneljudge.tasks.load import load_task


def per_sample_ms(worker: LintReference, samples: int, ask_keep: bool, graph: bool) -> float:
    """The parent's wall milliseconds per sample of one request of `samples` samples of one call."""
    request = protocol.Time(calls=1, samples=samples, warmup=1, staged=True, ask_keep=ask_keep, graph=graph)
    began = time.perf_counter()
    response, _ = worker.worker.request(request, interim=lambda frame: protocol.Keep(call=-1))
    elapsed = (time.perf_counter() - began) * 1e3
    if response.get("type") != "timed":
        raise RuntimeError(f"the worker answered {response.get('type')}: {response.get('message')}")
    return elapsed / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    small = Path(kerneljudge.redteam.__file__).parent / "tasks" / "bias_relu.py"
    parser.add_argument("--task", default=str(small), help="a task spec (a file, builtin:NAME)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    worker = LintReference(load_task(args.task), args.device, 120.0)
    rows = []
    try:
        worker.load(SEEDS[0])
        device = worker.hello.get("device", args.device)
        worker.stage()
        for graph in (False, True) if str(device).startswith("cuda") else (False,):
            seen: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.repeats):  # interleaved, so that drift falls on both alike
                for ask_keep in (False, True):
                    seen[ask_keep].append(per_sample_ms(worker, args.samples, ask_keep, graph))
            plain, asked = statistics.median(seen[False]), statistics.median(seen[True])
            rows.append(
                {
                    "device": str(device),
                    "graph": graph,
                    "samples": args.samples,
                    "plain_ms_per_sample": round(plain, 4),
                    "asked_ms_per_sample": round(asked, 4),
                    "exchange_us": round((asked - plain) * 1e3, 1),
                }
            )
    finally:
        worker.close()
    print("| device | graph | ms per sample, plain | ms per sample, asked | the exchange, us |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['device']} | {row['graph']} | {row['plain_ms_per_sample']} | {row['asked_ms_per_sample']} | "
            f"{row['exchange_us']} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
