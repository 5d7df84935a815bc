"""Which sandbox layer stops CUDA on this machine? (Run on a GPU machine; prints a Markdown table.)

Starts `torch.cuda.init()` inside the launcher with every layer, then with each layer left out in turn
(`SandboxPolicy.skip_layers`), then with each layer alone, and once through the same launcher with every
layer left out. A row whose CUDA works while the full set's does not names a culprit; the rows of single
layers catch a culprit that takes two layers together. A last row puts the worker in the allow-listed root
(`SandboxPolicy.allowlist_cuda`, sandbox/allowlist.py) and runs CUDA, a Triton kernel and an inline C++
extension there. `scripts/gpu_suite.sh run sandbox` runs it.

    python scripts/sandbox_cuda_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kerneljudge.sandbox.confine import LAYERS, SandboxPolicy
from kerneljudge.sandbox.probe import run_confined

PROBE = (
    "import torch\n"
    "try:\n"
    "    torch.cuda.init()\n"
    "    print('CUDA', torch.cuda.device_count(), torch.cuda.get_device_name(0))\n"
    "except Exception as exc:\n"
    "    print('NOCUDA', type(exc).__name__, str(exc).splitlines()[0][:200])\n"
)
LAUNCHER_LAYERS = [name for name in LAYERS if name != "gpu_memory_cap"]  # the watcher lives in the parent


# CUDA, a Triton kernel compiled and run, and a C++ extension built inline: what a candidate's worker does.
# Triton reads a kernel's source from its file, so the probe writes itself into the workspace and runs that.
FULL_SOURCE = PROBE + (
    "import triton, triton.language as tl\n"
    "@triton.jit\n"
    "def _add(x, y, n, B: tl.constexpr):\n"
    "    i = tl.program_id(0) * B + tl.arange(0, B)\n"
    "    tl.store(y + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)\n"
    "x = torch.zeros(1000, device='cuda'); y = torch.empty_like(x)\n"
    "_add[(8,)](x, y, 1000, B=128)\n"
    "print('TRITON', float(y.sum()))\n"
    "from torch.utils.cpp_extension import load_inline\n"
    "m = load_inline('kj_probe', 'int two() { return 2; }', functions=['two'], build_directory='.', verbose=False)\n"
    "print('INLINE', m.two())\n"
    "import os; print('CUDA', sorted(os.listdir('/'))[:20])\n"
)
FULL_PROBE = f"open('kj_probe.py', 'w').write({FULL_SOURCE!r})\nimport runpy\nrunpy.run_path('kj_probe.py')\n"


def probe(skip: frozenset[str], allowlist: bool = False) -> dict[str, object]:
    policy = SandboxPolicy(confine_cuda=True, skip_layers=skip, allowlist_cuda=allowlist)
    code = FULL_PROBE if allowlist else PROBE
    layers, done = run_confined(code, policy, timeout_s=300.0, cuda=True)
    out = done.stdout.decode(errors="replace").strip().splitlines()
    return {
        "skipped": sorted(skip),
        "cuda": bool(out) and out[-1].startswith("CUDA "),
        "said": out[-1] if out else done.stderr.decode(errors="replace").strip()[-200:],
        "said_all": out + done.stderr.decode(errors="replace").strip().splitlines()[-5:],
        "in_force": [n for n, layer in layers.items() if layer.status == "in_force"],
        "layers": {n: f"{layer.status}: {layer.detail}" for n, layer in layers.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    skips = [frozenset()]
    skips += [frozenset({name}) for name in LAUNCHER_LAYERS]
    skips += [frozenset(LAUNCHER_LAYERS) - {name} for name in LAUNCHER_LAYERS]
    skips.append(frozenset(LAUNCHER_LAYERS))
    print("| layers | CUDA | what the probe said |\n|---|---|---|", flush=True)
    rows = []
    for skip in skips:
        row = probe(skip)
        rows.append(row)
        kept = [name for name in LAUNCHER_LAYERS if name not in skip]
        if not skip:
            which = "every layer"
        elif len(skip) == 1:
            which = f"all but {next(iter(skip))}"
        else:
            which = f"only {', '.join(kept)}" if kept else "none"
        print(f"| {which} | {'works' if row['cuda'] else 'fails'} | {row['said']} |", flush=True)
    row = probe(frozenset(), allowlist=True)
    rows.append(row)
    said = " / ".join(line for line in row["said_all"] if line.startswith(("CUDA", "NOCUDA", "TRITON", "INLINE")))
    print(
        f"| every layer and the allow-listed root (CUDA, Triton, inline C++) | {'works' if row['cuda'] else 'fails'} "
        f"| {said or row['said']} |",
        flush=True,
    )
    print(f"\nallow-listed root: {row['layers'].get('allowlist_root')}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
