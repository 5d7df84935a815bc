"""Which sandbox layer stops CUDA on this machine? (Run on a GPU machine; prints a Markdown table.)

Starts `torch.cuda.init()` inside the launcher with every layer, then with each layer left out in turn
(`SandboxPolicy.skip_layers`), and once unconfined through the same launcher with every layer left out.
A row whose CUDA works while the full set's does not names a culprit. `scripts/gpu_suite.sh run sandbox`
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [probe(frozenset())]
    rows += [probe(frozenset({name})) for name in LAUNCHER_LAYERS]
    rows.append(probe(frozenset(LAUNCHER_LAYERS)))
    print("| left out | CUDA | what the probe said |\n|---|---|---|")
    for row in rows:
        left_out = ", ".join(row["skipped"]) if len(row["skipped"]) < len(LAUNCHER_LAYERS) else "every layer"
        print(f"| {left_out or 'nothing'} | {'works' if row['cuda'] else 'fails'} | {row['said']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
