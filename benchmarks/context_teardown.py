"""How long a CUDA process takes to be gone once told to end, by what it holds: the floor under the checked pair's
close, which the timing stage waits for before its first sample (docs/batch.md, "The checked pair's close").

A worker asked to exit leaves by `os._exit` (worker/main.py): no interpreter teardown, so what is left is the
kernel's and the driver's, the CUDA context torn down as the process's descriptors close, and in the sandbox the
chain of its init and launcher (sandbox/enter.py) and their namespaces. Each case is a fresh process holding one
thing more than a bare context: device memory, a CUPTI trace taken once (the checked candidate's worker is
traced), host memory page-locked with the driver (a worker's registered channel heads, protocol/pinned.py). Every
process is started first; then one at a time each is ended (`exit`: told on its stdin and leaving by os._exit;
`kill`: SIGKILL to its whole tree, each process of it waited for until gone, as the judge kills a worker:
sandbox/ending.kill_tree) and the seconds until then are taken.

    python benchmarks/context_teardown.py [--repeats 3] [--gib 2] [--json FILE]     (CUDA only)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sandboxed_child import sandboxed

from kerneljudge.sandbox.ending import kill_tree
from kerneljudge.sandbox.workspace import Workspace

CHILD = r"""
import ctypes, mmap, os, sys, time
import torch

case, gib = sys.argv[1], float(sys.argv[2])
x = torch.ones(1 << 20, device="cuda")
held = []
if case == "memory":
    held.append(torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda").fill_(1))
elif case == "traced":
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        (x * 2).sum().item()
elif case == "pinned":
    region = mmap.mmap(-1, 512 * 2**20)
    region.write(b"\1" * len(region))
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    rc = ctypes.CDLL("libcuda.so.1").cuMemHostRegister_v2(ctypes.c_void_p(address), ctypes.c_size_t(len(region)), 1)
    held.append((region, rc))
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
os._exit(0)
"""

CASES = ("bare", "memory", "traced", "pinned")


def start(case: str, gib: float, where: str, spaces: list[Workspace]) -> subprocess.Popen[str]:
    args = [case, str(gib)]
    if where == "sandbox":
        spaces.append(Workspace.create("teardown"))
        return sandboxed(spaces[-1], "teardown_child.py", CHILD, args)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def end(proc: subprocess.Popen[str], how: str) -> float:
    """Seconds from the word to end until the process is gone: told to exit, until its wait returns (in the sandbox
    the launcher's, which waits for its init, which waits for the worker); killed, until every process is gone."""
    began = time.perf_counter()
    if how == "exit":
        proc.stdin.write("end\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    else:  # as the judge kills a worker: every process of the tree, each waited for until gone
        kill_tree(proc.pid)
    proc.wait()
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gib", type=float, default=2.0, help="the device memory the `memory` case holds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ways = [(where, how) for where in ("bare", "sandbox") for how in ("exit", "kill")]
    plan = [(case, where, how) for case in CASES for where, how in ways for _ in range(args.repeats)]
    spaces: list[Workspace] = []
    procs = []
    try:
        for case, where, _how in plan:
            procs.append(start(case, args.gib, where, spaces))
        ready = [proc.stdout.readline().strip() == "ready" for proc in procs]  # type: ignore[union-attr]
        seconds: dict[tuple[str, str, str], list[float]] = {}
        for (case, where, how), proc, ok in zip(plan, procs, ready, strict=True):
            time.sleep(0.3)  # the last one's teardown over
            if ok:
                seconds.setdefault((case, where, how), []).append(end(proc, how))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for space in spaces:
            space.remove()
    rows = [
        {"case": case, "where": where, "how": how, "seconds": [round(s, 4) for s in found]}
        for (case, where, how), found in seconds.items()
    ]
    print("| holds | where | ended by | seconds until gone, median (min-max) |\n|---|---|---|---|")
    for row in rows:
        found = row["seconds"]
        print(
            f"| {row['case']} | {row['where']} | {row['how']} | {statistics.median(found):.3f} "
            f"({min(found):.3f}-{max(found):.3f}) |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"gib": args.gib, "rows": rows}, indent=1) + "\n")
    return 0 if len(rows) == len(CASES) * len(ways) else 1


if __name__ == "__main__":
    sys.exit(main())
