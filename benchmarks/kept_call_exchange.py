"""What naming the kept timed call after each sample costs (judgment/stages/kept_call.py, since 0.3.7): a measured
`time`
request asks the parent after each sample which call's output to keep (`sampled`, answered by `keep`). This
times the same requests of a reference worker (the red team's small bias_relu task by default, its pool staged)
with and without the exchange, many samples of one call each, and reports the parent's wall time per sample of
each and their difference: the exchange's cost, which lies between samples (outside the event pair and the host
clock) and adds to a timed judgment's measuring hold, once per sample on each side; and, since 0.3.9, what the
commit of one sample costs a request (the digests of every call's output of it, worker/seal/commit.py).

    python benchmarks/kept_call_exchange.py [--task FILE] [--samples 200] [--calls 1] [--repeats 5] [--json FILE]
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

MODES = ("plain", "asked", "committed")  # no exchange; a `keep` after each sample; and a `commit` of the first one


def answer(mode: str, calls: int):
    def answering(frame: dict) -> protocol.Request:
        if mode == "committed" and frame == {"type": "sampled", "sample": 0}:
            return protocol.Commit(calls=calls)  # every call's output of the sample digested (worker/seal/commit.py)
        return protocol.Keep(call=-1)

    return answering


def per_sample_ms(worker: LintReference, samples: int, calls: int, mode: str, graph: bool) -> float:
    """The parent's wall milliseconds per sample of one request of `samples` samples of `calls` calls."""
    ask_keep = mode != "plain"
    request = protocol.Time(calls=calls, samples=samples, warmup=1, staged=True, ask_keep=ask_keep, graph=graph)
    began = time.perf_counter()
    response, _ = worker.worker.request(request, interim=answer(mode, calls))
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
    parser.add_argument("--calls", type=int, default=1, help="calls per sample (the commit digests each's output)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    worker = LintReference(load_task(args.task), args.device, 120.0)
    rows = []
    try:
        worker.load(SEEDS[0])
        device = worker.hello.device
        worker.stage()
        for graph in (False, True) if str(device).startswith("cuda") else (False,):
            seen: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(args.repeats):  # interleaved, so that drift falls on all alike
                for mode in MODES:
                    seen[mode].append(per_sample_ms(worker, args.samples, args.calls, mode, graph))
            plain, asked, _ = (statistics.median(seen[mode]) for mode in MODES)
            # The commit, once a request, set against the same request of one sample without it: its own wall time.
            one: dict[str, list[float]] = {"asked": [], "committed": []}
            for _ in range(10 * args.repeats):
                for mode in one:
                    one[mode].append(per_sample_ms(worker, 1, args.calls, mode, graph))
            commit_ms = statistics.median(one["committed"]) - statistics.median(one["asked"])
            rows.append(
                {
                    "device": str(device),
                    "graph": graph,
                    "samples": args.samples,
                    "calls": args.calls,
                    "plain_ms_per_sample": round(plain, 4),
                    "asked_ms_per_sample": round(asked, 4),
                    "exchange_us": round((asked - plain) * 1e3, 1),
                    "commit_ms_per_request": round(commit_ms, 3),
                }
            )
    finally:
        worker.close()
    print("| device | graph | calls | ms per sample, plain | ms per sample, asked | the exchange, us | commit, ms |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['device']} | {row['graph']} | {row['calls']} | {row['plain_ms_per_sample']} | "
            f"{row['asked_ms_per_sample']} | {row['exchange_us']} | {row['commit_ms_per_request']} |"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
