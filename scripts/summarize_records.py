"""Print a Markdown table of the verdict records (*.json) in a directory."""

import json
import sys
from pathlib import Path


def main(directory: str) -> None:
    print("| record | status | failure | trials | candidate median | reference median | speedup |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(Path(directory).glob("*.json")):
        r = json.loads(path.read_text())
        if "schema_version" not in r:
            continue
        t = r["timing"]
        cand = f"{t['candidate']['median_ms'] * 1e3:.1f} us" if t.get("candidate") else "-"
        ref = f"{t['reference']['median_ms'] * 1e3:.1f} us" if t.get("reference") else "-"
        speedup = f"{t['speedup']:.3f}x" if t.get("speedup") else "-"
        trials = r["correctness"]["trials"]
        failure = r["failure"]["kind"] if r.get("failure") else ""
        print(
            f"| {path.stem} | {r['status']} | {failure} | {sum(x['passed'] for x in trials)}/{len(trials)} "
            f"| {cand} | {ref} | {speedup} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
