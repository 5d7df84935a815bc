"""How long one honest judgment takes on an idle machine, and where its time goes.

Judges honest candidates one at a time, nothing beside them, each with timing and without (enforce mode,
the practical policy), and prints per judgment its wall time and `stages_s` (starting the workers and
building, correctness and its parts: the reference's trials, the candidate's calls, the comparisons; timing),
and the share of the timing stage the timed calls kept the device busy (`timing.busy_fraction`); then the
timing stage split by its round trips (the fresh pair's start and load, staging, calibrating, the measured
requests, the checks of kept outputs, and what is the parent's own); then the medians. The work:

- `--device cuda` (default where CUDA is visible): the built-in suite's eight fp32 tasks at their public,
  production-like sizes (64 and 128 MiB a tensor) with their honest Triton candidates
  (benchmarks/throughput_manifest.py), or those named by `--only`;
- `--device cpu`: the README's example (examples/softmax, its Triton candidate through the interpreter).

    python benchmarks/judgment_latency.py --device cuda --out latency > table.md
    python benchmarks/judgment_latency.py --device cpu --repeats 3 --spare-workers both

`--pinned-heads no|both` judges without the channels' registered heads too (protocol/pinned.py; the
workers then copy every tensor through windows mapped per copy, as before them), and a last table shows the
outputs' crossings: the candidate's writes, the reference's reads and comparisons, in correctness and in the
timing stage's checks.

`--early-triton no|both` judges with the checked pair's candidate worker not readying Triton as it starts
(worker/prepare.py: Triton's import and installation key in a thread beside torch's import, before the hello), as
workers started before 2026-12-04 (judge 0.3.2); a table splits the workers' start and the build: each worker's hello,
the candidate's load by its parts (the task's source, the import, the build, the evidence) and its first call.

`--timing-ahead yes|both` times with the fresh timing pair made ready while correctness runs (loaded, its pool
staged, each side's first call made: judgment/stages/timing_ahead.py); a table shows what the thread spent, beside which
correctness stage, and how long the timing stage waited for it.

`--spare-workers yes|both` judges with spare worker pairs (judgment/stages/spare_pairs.py): each judgment takes the
pairs the ones before it started (two where it times: the checked pair and the timing pair), which have
finished starting when it comes (an idle judge), as a serving process or a batch lane with `--spare-workers`
would have them. `--out DIR` keeps the tasks written and
`latency.json`, the rows. docs/batch.md keeps the tables measured.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import throughput_manifest

from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages.spare_pairs import SparePairs, pairs_taken

ROOT = Path(__file__).resolve().parents[1]
README_EXAMPLE = (ROOT / "examples" / "softmax" / "reference.py", ROOT / "examples" / "softmax" / "candidate_triton.py")
# stages_s keys, in the order of a judgment, with the column each goes under
COLUMNS = {
    "waiting": "waiting",
    "build": "workers and build",
    "correctness.reference.trial": "reference trials",
    "correctness.candidate.call": "candidate calls",
    "correctness.reference.compare": "comparisons",
    "correctness": "correctness",
    "timing": "timing",
}

# The workers' start and the build, and the candidate's first call (which compiles), by `stages_s` key
BUILD_PARTS = {
    "reference hello": ("build.reference.hello",),
    "candidate hello": ("build.candidate.hello",),
    "Triton readied (thread)": ("build.candidate.hello:triton",),
    "load: task": ("build.candidate.load:task",),
    "load: import": ("build.candidate.load:import",),
    "load: build": ("build.candidate.load:build",),
    "load: evidence": ("build.candidate.load:evidence",),
    "load": ("build.candidate.load",),
    "build": ("build",),
    "candidate calls (first compiles)": ("correctness.candidate.call:call",),
}

# The outputs' crossings (worker clocks, `stages_s["<stage>.<worker>.<op>:<part>"]`): the column of each
CROSSINGS = {
    "correctness: candidate writes": ("correctness.candidate.call:write",),
    "reference reads": ("correctness.reference.compare:read",),
    "compares": ("correctness.reference.compare:compare",),
    "timing checks: candidate writes": ("timing.candidate.captured:write", "timing.candidate.recheck:write"),
    "reference reads ": ("timing.reference.compare:read",),
    "compares ": ("timing.reference.compare:compare",),
}

# Staging the timing pool, by the reference's parts and the candidate's read (worker clocks), in the timing
# stage or ahead (`stages_s["ahead.<worker>.<op>"]`, judgment/stages/timing_ahead.py)
STAGING = {
    "reference makes inputs": ("reference.stage:inputs",),
    "its outputs and the oracle's": ("reference.stage:reference",),
    "timed checks made": ("reference.stage:checks",),
    "writes them to the candidate": ("reference.stage:write",),
    "reference's round trip": ("reference.stage",),
    "candidate reads them": ("candidate.stage:read",),
    "candidate's round trip": ("candidate.stage",),
}

# With --timing-ahead: what the thread made ready while correctness ran (its round trips, both workers), its own
# wall time, and the timing stage's wait for it
AHEAD_PARTS = {
    "greeting and loading": ("hello", "load"),
    "staging": ("stage",),
    "first calls": ("warm",),
}

# The timing stage's round trips (`stages_s["timing.<worker>.<op>"]`), grouped: the ops of each column
TIMING_PARTS = {
    "fresh pair's start and load": ("hello", "load"),
    "caches carried (--timing-carry)": ("carry",),
    "first calls (--timing-warm)": ("warm",),
    "staging the pool": ("stage",),
    "calibrating (graph capture)": ("calibrate",),
    "measured requests": ("time",),
    "checks of kept outputs": ("captured", "recheck", "compare"),
}


def timing_split(stages: dict[str, float]) -> list[float]:
    """The timing stage's seconds by TIMING_PARTS (both workers), the checked pair's close, then what no round
    trip holds (the parent)."""
    parts = [
        sum(stages.get(f"timing.{role}.{op}", 0.0) for role in ("reference", "candidate") for op in ops)
        for ops in TIMING_PARTS.values()
    ]
    parts.append(stages.get("timing.checked_pair.close", 0.0))
    parts.append(stages.get("timing.ahead", 0.0))
    return [*parts, max(0.0, stages.get("timing", 0.0) - sum(parts))]


def ahead_split(stages: dict[str, float]) -> list[float]:
    """What the thread of --timing-ahead spent (AHEAD_PARTS, both workers), its wall time, the correctness stage's
    wall time it ran beside, and the timing stage's wait for it."""
    parts = [
        sum(stages.get(f"ahead.{role}.{op}", 0.0) for role in ("reference", "candidate") for op in ops)
        for ops in AHEAD_PARTS.values()
    ]
    return [*parts, stages.get("ahead", 0.0), stages.get("correctness", 0.0), stages.get("timing.ahead", 0.0)]


def work(device: str, only: list[str] | None, out: Path) -> list[tuple[str, Path, Path]]:
    """(name, task, candidate) of each judgment to make."""
    if device == "cpu":
        return [("readme_softmax", *README_EXAMPLE)]
    lines = throughput_manifest.write(out, kinds=("honest_triton",))
    found = [(Path(line["task"]).parent.name, Path(line["task"]), Path(line["candidate"])) for line in lines]
    return [entry for entry in found if not only or entry[0] in only]


def judged(name: str, task: Path, candidate: Path, config: JudgeConfig, spares: SparePairs | None) -> dict[str, Any]:
    if spares is not None:  # an idle judge: its spare pairs have finished starting before the request comes
        spares.waiting()
        while spares.starting():  # both workers of each said hello
            time.sleep(0.02)
    began = time.monotonic()
    record = judge(task, candidate, config, spares=spares)
    wall = time.monotonic() - began
    return {
        "task": name,
        "timing": config.timing,
        "spare_workers": spares is not None,
        "timing_warm": config.timing and config.timing_warm,
        "timing_carry": config.timing and config.timing_carry,
        "timing_ahead": config.timing and config.timing_ahead,
        "ahead": record.timing.ahead,
        "pinned_heads": os.environ.get("KJ_PINNED_HEADS") != "0",
        "early_triton": EARLY_TRITON[0],
        "carried_caches": record.timing.carried_caches,
        "status": record.status,
        "verified": record.verified,
        "failure": record.failure.summary[:200] if record.failure else None,
        "wall_s": round(wall, 3),
        "duration_s": record.duration_s,
        "stages_s": record.stages_s,
        "speedup": record.timing.speedup if record.timing.measured else None,
        "busy_fraction": record.timing.busy_fraction,
        "timed_busy_s": record.timing.timed_busy_s,
    }


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def way(row: dict[str, Any]) -> str:
    """How a judgment was made, as a name's suffix: " (warm)", " (carry)", " (warm, carry)", " (no heads)"..."""
    chosen = [name for name in ("warm", "carry", "ahead") if row.get(f"timing_{name}")]
    chosen += [] if row.get("pinned_heads", True) else ["no heads"]
    chosen += [] if row.get("early_triton", True) else ["no early Triton"]
    return f" ({', '.join(chosen)})" if chosen else ""


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ["task", "timed", "spare workers", "status", "wall s", *COLUMNS.values(), "timing busy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        stages = [cell(r["stages_s"].get(key)) for key in COLUMNS]
        busy = "-" if r["busy_fraction"] is None else f"{100 * r['busy_fraction']:.0f}%"
        status = r["status"] + (" verified" if r["verified"] else "")
        lines.append(
            f"| {r['task']}{way(r)} | {yes(r['timing'])} | {yes(r['spare_workers'])} | {status} | {r['wall_s']:.1f} | "
            + " | ".join(stages)
            + f" | {busy} |"
        )
    timed_rows = [r for r in rows if r["timing"] and "timing" in r["stages_s"]]
    if timed_rows:
        head = [
            "task",
            "timing",
            *TIMING_PARTS,
            "the checked pair's close",
            "waiting for the pair made ahead",
            "the parent's own",
            "held (others paused)",
            "busy while held",
            "the close's own (until its processes were gone)",
        ]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in timed_rows:
            split = " | ".join(cell(v, 2) for v in timing_split(r["stages_s"]))
            name = r["task"] + (" (spares)" if r["spare_workers"] else "") + way(r)
            held = r["stages_s"].get("timing.held")
            busy = "-" if not held or r["timed_busy_s"] is None else f"{100 * min(1.0, r['timed_busy_s'] / held):.0f}%"
            own = [r["stages_s"].get(f"timing.checked_pair.close:{part}") for part in ("beside", "ended")]
            close = "-" if own[0] is None else f"{own[0]:.2f} ({cell(own[1], 2)})"
            lines.append(f"| {name} | {r['stages_s']['timing']:.2f} | {split} | {cell(held, 2)} | {busy} | {close} |")
        head = ["task", *STAGING]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in timed_rows:
            stages = r["stages_s"]
            parts = [
                cell(sum(stages.get(f"{at}.{key}", 0.0) for key in keys for at in ("timing", "ahead")), 3)
                for keys in STAGING.values()
            ]
            lines.append(f"| {r['task']}{way(r)} | " + " | ".join(parts) + " |")
        ahead_rows = [r for r in timed_rows if r.get("timing_ahead")]
        if ahead_rows:
            head = ["task", *AHEAD_PARTS, "the thread's wall", "correctness beside it", "timing's wait for it"]
            lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for r in ahead_rows:
                lines.append(f"| {r['task']} | " + " | ".join(cell(v, 2) for v in ahead_split(r["stages_s"])) + " |")
    head = ["task", "timed", *BUILD_PARTS]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        parts = [cell(sum(r["stages_s"].get(key, 0.0) for key in keys), 2) for keys in BUILD_PARTS.values()]
        lines.append(f"| {r['task']}{way(r)} | {yes(r['timing'])} | " + " | ".join(parts) + " |")
    head = ["task", "timed", *CROSSINGS]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        parts = [cell(sum(r["stages_s"].get(key, 0.0) for key in keys), 3) for keys in CROSSINGS.values()]
        lines.append(f"| {r['task']}{way(r)} | {yes(r['timing'])} | " + " | ".join(parts) + " |")
    lines += [
        "",
        "| timed | spare workers | judgments | median wall s | max wall s | median timing busy |",
        "|---|---|---|---|---|---|",
    ]
    kinds = sorted({way(r) for r in rows})
    for timed, spare, kind in itertools.product((True, False), (False, True), kinds):
        group = [r for r in rows if r["timing"] is timed and r["spare_workers"] is spare and way(r) == kind]
        if not group:
            continue
        walls = [r["wall_s"] for r in group]
        busy = [r["busy_fraction"] for r in group if r["busy_fraction"] is not None]
        median_busy = f"{100 * statistics.median(busy):.0f}%" if busy else "-"
        timed_cell = yes(timed) + kind
        lines.append(
            f"| {timed_cell} | {yes(spare)} | {len(group)} | {statistics.median(walls):.1f} | {max(walls):.1f} | "
            f"{median_busy} |"
        )
    return "\n".join(lines) + "\n"


EARLY_TRITON = [True]  # whether the checked pair's candidate worker readies Triton as it starts (the default)


def checked_pair_without_early_triton() -> None:
    """The checked pair started as before 2026-12-04 (judge 0.3.2), its candidate worker not readying Triton
    (worker/prepare.py); the timing pair and spares as always."""
    from kerneljudge.judgment import pipeline
    from kerneljudge.judgment.stages import workers

    def new_pair(state: Any, device: str, prepare_triton: bool = False) -> Any:
        return workers.new_pair(state, device, prepare_triton and EARLY_TRITON[0])

    pipeline.new_pair = new_pair


def profile_parent(whole_stage: bool) -> cProfile.Profile:
    """A profiler of the parent's part of the timing stage: of every measuring hold and of the first calibration
    requests before it (`judgment/stages/timing.py`'s `take`), or, `whole_stage`, of whole judgments (`Judgment.run`),
    whose dump (OUT/timing_profile.prof) splits the timing stage by its callees (`_start_timing_pair`: the
    checked pair's close and the fresh pair's load; `_timing`: staging, the hold, the checks after it)."""
    from kerneljudge.judgment import pipeline
    from kerneljudge.judgment.stages import timing as timing_stage

    profiler = cProfile.Profile()
    owner, name = (pipeline.Judgment, "run") if whole_stage else (timing_stage, "take")
    original = getattr(owner, name)

    def profiled(*args: Any, **kwargs: Any) -> Any:
        profiler.enable()
        try:
            return original(*args, **kwargs)
        finally:
            profiler.disable()

    setattr(owner, name, profiled)
    return profiler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    parser.add_argument("--only", nargs="*", default=None, help="suite task names to keep (CUDA)")
    parser.add_argument("--repeats", type=int, default=1, help="judgments of each candidate, per timing choice")
    parser.add_argument("--no-untimed", action="store_true", help="only the judgments with timing")
    for flag, what in (
        ("--spare-workers", "judge with spare worker pairs started ahead (judgment/stages/spare_pairs.py)"),
        ("--timing-warm", "timed judgments with one untimed call of each side before the measuring hold"),
        ("--timing-carry", "timed judgments with the candidate's compiler caches carried to its timing worker"),
        ("--timing-ahead", "timed judgments with the timing pair made ready while correctness runs"),
        ("--pinned-heads", "workers copying device tensors through the channels' registered heads"),
        ("--early-triton", "the checked pair's candidate worker readying Triton beside torch's import"),
    ):
        default = "yes" if flag in ("--pinned-heads", "--early-triton") else "no"
        parser.add_argument(flag, choices=("no", "yes", "both"), default=default, help=f"{what}: no, yes or each way")
    parser.add_argument(
        "--profile-timing",
        action="store_true",
        help="profile the parent while it holds the others back to measure (judgment/stages/timing.py's take): "
        "OUT/timing_profile.txt",
    )
    parser.add_argument(
        "--profile-stage",
        action="store_true",
        help="profile the parent over whole judgments, the timing stage split by its callees: "
        "OUT/timing_profile.txt and OUT/timing_profile.prof",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    for flag in ("pinned_heads", "early_triton"):  # a spare pair keeps the setting it started in
        if getattr(args, flag) != "yes" and args.spare_workers != "no":
            parser.error(f"--{flag.replace('_', '-')} {getattr(args, flag)} needs --spare-workers no")
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    out = args.out or Path(tempfile.mkdtemp(prefix="kj-latency-"))
    out.mkdir(parents=True, exist_ok=True)
    config = JudgeConfig(device=device, mode="enforce", policy="practical")
    rows: list[dict[str, Any]] = []
    either = {"no": (False,), "yes": (True,), "both": (False, True)}
    # (timing, warm, carry, ahead) of each judgment of a candidate: the last three only matter where there is
    # timing; the carry and ahead never together (JudgeConfig)
    ways_to_time = itertools.product(either[args.timing_warm], either[args.timing_carry], either[args.timing_ahead])
    choices = [(True, warm, carry, ahead) for warm, carry, ahead in ways_to_time if not (carry and ahead)]
    choices += [] if args.no_untimed else [(False, False, False, False)]
    heads = either[args.pinned_heads]
    early = either[args.early_triton]
    if early != (True,):
        checked_pair_without_early_triton()
    ways = either[args.spare_workers]
    jobs = work(device, args.only, out)
    profiler = profile_parent(args.profile_stage) if args.profile_timing or args.profile_stage else None
    with SparePairs(depth=pairs_taken(any(timed for timed, *_ in choices))) as spares:
        if True in ways and jobs:  # the judgment that starts the first spare is not counted
            name, task, candidate = jobs[0]
            judge(task, candidate, config.with_(timing=False), spares=spares)
        for name, task, candidate in jobs:
            for (timed, warm, carry, ahead), pinned, readied in itertools.product(choices, heads, early):
                os.environ["KJ_PINNED_HEADS"] = "1" if pinned else "0"  # inherited by the workers started next
                EARLY_TRITON[0] = readied
                for spare in ways:
                    for _ in range(args.repeats):
                        chosen = config.with_(timing=timed, timing_warm=warm, timing_carry=carry, timing_ahead=ahead)
                        rows.append(judged(name, task, candidate, chosen, spares if spare else None))
                        last = rows[-1]
                        print(
                            f"{name} timed={timed} warm={warm} carry={carry} ahead={ahead} heads={pinned} "
                            f"early={readied} "
                            f"spares={spare}: "
                            f"{last['status']} in "
                            f"{last['wall_s']:.1f} s",
                            file=sys.stderr,
                            flush=True,
                        )
                        (out / "latency.json").write_text(json.dumps(rows, indent=1) + "\n")
    if profiler is not None:
        profiler.dump_stats(out / "timing_profile.prof")
        with open(out / "timing_profile.txt", "w") as report:
            pstats.Stats(profiler, stream=report).sort_stats("cumulative").print_stats(40)
            pstats.Stats(profiler, stream=report).sort_stats("tottime").print_stats(25)
    sys.stdout.write(markdown(rows))
    return 0 if all(r["status"] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
