"""Which sandbox layer stops CUDA on this machine? (Run on a GPU machine; prints a Markdown table.)

Starts `torch.cuda.init()` inside the launcher with every layer, then with each layer left out in turn
(`SandboxPolicy.skip_layers`), then with each layer alone, and once through the same launcher with every
layer left out. A row whose CUDA works while the full set's does not names a culprit; the rows of single
layers catch a culprit that takes two layers together. `scripts/gpu_suite.sh run sandbox`
runs it.

    python scripts/sandbox_cuda_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kerneljudge.sandbox.confine import LAYERS, SandboxPolicy, run_confined

PROBE = (
    "import torch\n"
    "try:\n"
    "    torch.cuda.init()\n"
    "    print('CUDA', torch.cuda.device_count(), torch.cuda.get_device_name(0))\n"
    "except Exception as exc:\n"
    "    print('NOCUDA', type(exc).__name__, str(exc).splitlines()[0][:200])\n"
)
LAUNCHER_LAYERS = [name for name in LAYERS if name != "gpu_memory_cap"]  # the watcher lives in the parent


def probe(skip: frozenset[str]) -> dict[str, object]:
    layers, done = run_confined(PROBE, SandboxPolicy(confine_cuda=True, skip_layers=skip), timeout_s=180.0)
    out = done.stdout.decode(errors="replace").strip().splitlines()
    return {
        "skipped": sorted(skip),
        "cuda": bool(out) and out[-1].startswith("CUDA "),
        "said": out[-1] if out else done.stderr.decode(errors="replace").strip()[-200:],
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
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
