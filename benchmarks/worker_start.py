"""Where a worker's start goes: the interpreter, torch, the device, the sandbox, and many at once.

Every judgment starts two workers, and a timed one two more; a batch of twelve lanes starts up to 24 at once.
This prints a Markdown table of

- `import torch` in a fresh interpreter, reading the installed bytecode and with an empty bytecode cache of
  its own (how workers started before the judge kept a bytecode cache of its own: sandbox/bytecode.py,
  docs/process-model.md);
- the device's share, in one interpreter: torch imported, its first tensor on the device (the context),
  the first matmul (cuBLAS), the first synchronize;
- a candidate's worker: its hello, and when it answers a first request;
- a worker's hello (what `stages.build.start_reference` waits for), sandboxed as a judgment's are, alone and
  `--together` at once (default 2, 12 and 24).

    python benchmarks/worker_start.py [--device cpu|cuda] [--together 2 12 24]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch  # noqa: F401  (the parent's own import, done before any measurement: a judge has it loaded)

from kerneljudge import protocol
from kerneljudge.sandbox.confine import DEFAULT_POLICY, SandboxPolicy
from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
from kerneljudge.sandbox.talk import WorkerChannels

SOURCE = """import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.randn(4)]
def get_init_inputs():
    return []
"""

STEPS = """import time, sys
began = time.perf_counter()
marks = []
def mark(name):
    global began
    marks.append((name, time.perf_counter() - began))
    began = time.perf_counter()
import torch
mark("import torch")
if sys.argv[1] == "cuda":
    x = torch.ones(64, 64, device="cuda")
    mark("first device tensor")
    y = x @ x
    mark("first matmul")
    torch.cuda.synchronize()
    mark("first synchronize")
print(";".join(f"{name}={seconds:.3f}" for name, seconds in marks))
"""


def bytecode_installed() -> str:
    """How many of torch's modules have their bytecode installed beside them (what a worker reads)."""
    import importlib.util

    root = os.path.dirname(torch.__file__)
    sources = [os.path.join(top, name) for top, _, names in os.walk(root) for name in names if name.endswith(".py")]
    cached = sum(os.path.exists(importlib.util.cache_from_source(path)) for path in sources)
    return f"{cached} of {len(sources)}"


def interpreter_s(prefix: bool) -> float:
    """Wall seconds of `import torch` in a fresh interpreter (that writes no bytecode, as workers do)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory() as cache:
        if prefix:
            env["PYTHONPYCACHEPREFIX"] = cache
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
        return time.perf_counter() - began


def device_steps(device: str) -> list[tuple[str, float]]:
    out = subprocess.run([sys.executable, "-c", STEPS, device], capture_output=True, text=True, check=True).stdout
    return [(name, float(seconds)) for name, seconds in (part.split("=") for part in out.strip().split(";"))]


def hellos(device: str, count: int, policy: SandboxPolicy = DEFAULT_POLICY) -> list[float]:
    """Seconds from each worker's spawn to its hello, `count` started at once."""
    limits = WorkerLimits()
    workers, began = [], time.perf_counter()
    try:
        for _ in range(count):
            workers.append(WorkerProcess("reference", device, SOURCE, limits, policy, peer=WorkerChannels("c", 2**20)))
        seconds = []
        for worker in workers:
            worker.receive(timeout_s=300)
            seconds.append(time.perf_counter() - began)
        return seconds
    finally:
        for worker in workers:
            worker.ask_exit()
        for worker in workers:
            worker.close()


def candidate_ready(device: str) -> tuple[float, float]:
    """A candidate's worker alone: seconds to its hello, and to its answer to a first request (it loads torch's
    own wrappers between the two, worker/evidence.py)."""
    began = time.perf_counter()
    worker = WorkerProcess(
        "candidate", device, SOURCE, WorkerLimits(), DEFAULT_POLICY, channels=WorkerChannels("c", 2**20)
    )
    try:
        worker.receive(timeout_s=300)
        hello = time.perf_counter() - began
        worker.request(protocol.Derive(), timeout_s=300)  # the reference's alone: answered with a protocol error
        return hello, time.perf_counter() - began
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if os.path.exists("/dev/nvidia0") else "cpu")
    parser.add_argument("--together", type=int, nargs="*", default=[2, 12, 24])
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores, device {args.device}\n")
    print("| what | seconds |")
    print("|---|---|")
    print(f"| torch's modules with their bytecode installed | {bytecode_installed()} |")
    print(f"| `import torch`, installed bytecode | {interpreter_s(False):.2f} |")
    print(f"| `import torch`, an empty bytecode cache of its own | {interpreter_s(True):.2f} |")
    for name, seconds in device_steps(args.device):
        print(f"| in one interpreter: {name} | {seconds:.2f} |")
    alone = hellos(args.device, 1)[0]
    print(f"| a sandboxed worker's hello, alone | {alone:.2f} |")
    hello, ready = candidate_ready(args.device)
    print(f"| a sandboxed candidate's worker, alone: hello / ready for its first request | {hello:.2f} / {ready:.2f} |")
    bare = hellos(args.device, 1, SandboxPolicy(enabled=False))[0]
    print(f"| a worker's hello without the sandbox, alone | {bare:.2f} |")
    for count in args.together:
        seconds = hellos(args.device, count)
        print(
            f"| {count} sandboxed workers started at once: hello, median / last | "
            f"{statistics.median(seconds):.2f} / {max(seconds):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
