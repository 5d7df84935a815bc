"""Replays of a trial (the plan's `replay_at`): the candidate's call again on the same inputs, compared with
its first answer; at one trial on CUDA (the plan's `perturbed_at`) again under perturbations of the device's
scheduling that the worker's own code makes (worker/correctness/perturb.py), drawn once per judgment from its source of
randomness and recorded (`correctness.replay.perturbations`): every kind under strict, two under practical. A
difference beyond rounding fails as `nondeterministic`; one at rounding level is KJ-C001. What the worker says
it made is checked against what was asked (`check_report`): a report no honest worker gives fails as
`integrity_violation`. What they find is kept in the judgment's `results.Replays`, which the correctness stage
hands them and the record reads.
"""

from __future__ import annotations

import random
import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks.catalog import finding
from kerneljudge.judgment.gate import footprint_sizes
from kerneljudge.judgment.stages.calls import call_candidate, compare
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.results import Replays
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.timing import l2_flush_bytes
from kerneljudge.protocol import limits
from kerneljudge.results.verdict import Failure

PRACTICAL_COUNT = 2  # perturbed replays under practical; strict has one of every kind
# Past the practical count, a perturbed replay starts only while those before it took less than this: a replay
# of a 1 ms call costs milliseconds, one of KernelBench's multi-GiB outputs seconds (its comparison).
PERTURBED_BUDGET_S = 30.0
DEFAULT_COPY_BYTES = 16 << 20  # where the judgment reserved nothing (its footprint unknown)
COPY_SHARE = 24  # the copies' three buffers take at most an eighth of what the gate reserved
REPORT_KEYS = {
    "gpu_load": {"products"},
    "launch_order": {"flushed_bytes", "delay_cycles"},
    "copy_traffic": {"copies", "copy_bytes"},
    "sm_hold": {"blocks", "sms", "hold_cycles"},
    "staggered_release": {"delay_cycles", "release_cycles", "products"},
}
MAX_SMS = 4096


def copy_bytes(footprint: dict[str, Any] | None, reserved_bytes: int) -> int:
    """Each copy of `copy_traffic`: what one call reads and writes (the task's inputs and outputs), within
    [MIN_COPY_BYTES, MAX_COPY_BYTES] and an eighth of the device memory the gate reserved for the judgment
    across the three buffers (gate.memory_need counts 3 GiB of it beside the tensors)."""
    sizes = footprint_sizes(footprint)
    if sizes is None or reserved_bytes <= 0:
        return DEFAULT_COPY_BYTES
    _, inputs, outputs, _ = sizes
    ceiling = max(limits.MIN_COPY_BYTES, min(limits.MAX_COPY_BYTES, reserved_bytes // COPY_SHARE))
    return min(ceiling, max(limits.MIN_COPY_BYTES, int(inputs + outputs)))


def perturbations(
    hello: protocol.Hello | None, rng: random.Random, strict: bool, copy_size: int = DEFAULT_COPY_BYTES
) -> list[dict[str, Any]]:
    """The perturbed replays of one judgment on CUDA (worker/correctness/perturb.py), drawn from `rng`: every kind in
    a random order under the strict policy (`JudgeConfig.strict`), two kinds under practical, each with random
    strengths."""
    kinds = list(limits.PERTURB_KINDS)
    rng.shuffle(kinds)
    count = len(kinds) if strict else PRACTICAL_COUNT

    def spec(kind: str) -> dict[str, Any]:
        if kind == "gpu_load":
            return {"kind": kind, "side": 2048, "factor": round(rng.uniform(1.5, 4.0), 3)}
        if kind == "launch_order":
            return {"kind": kind, "flush_bytes": l2_flush_bytes(hello, native=False), "delay_ms": _ms(rng, 0.2, 2.0)}
        if kind == "copy_traffic":
            return {"kind": kind, "bytes": copy_size, "factor": round(rng.uniform(1.0, 4.0), 3)}
        if kind == "sm_hold":
            return {"kind": kind, "share": round(rng.uniform(0.5, 0.9), 3), "factor": round(rng.uniform(0.75, 2.0), 3)}
        return {
            "kind": kind,
            "side": 2048,
            "delay_ms": _ms(rng, 0.1, 1.0),
            "release": round(rng.uniform(0.0, 1.0), 3),
            "factor": round(rng.uniform(0.5, 2.0), 3),
        }

    return [spec(kind) for kind in kinds[:count]]


def _ms(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 3)


def check_report(asked: dict[str, Any], report: Any) -> tuple[dict[str, Any] | None, str | None]:
    """What the worker says it made of a perturbation: (its counts, None) where it made what was asked within the
    worker's bounds, (None, None) where it could not set it up (said so: not the candidate's doing), and (None,
    why) for anything else, which no honest worker reports: the candidate changed the worker's code."""
    if not isinstance(report, dict) or not report:
        return None, "no report of the perturbation"
    if set(report) == {"error"} and isinstance(report["error"], str) and len(report["error"]) <= 300:
        return None, None
    kind = asked["kind"]
    if report.get("applied") != kind:
        return None, f"asked for {kind}, the worker reports {str(report.get('applied'))[:40]!r}"
    counts = {k: v for k, v in report.items() if k != "applied"}
    if set(counts) != REPORT_KEYS[kind]:
        return None, f"{kind}'s report has the fields {sorted(counts)[:8]}, not {sorted(REPORT_KEYS[kind])}"
    if not all(type(v) is int and v >= 0 for v in counts.values()):
        return None, f"{kind}'s report has a field that is not a count"
    problem = _out_of_bounds(asked, counts)
    return (None, f"{kind}: {problem}") if problem else (counts, None)


def _out_of_bounds(asked: dict[str, Any], counts: dict[str, int]) -> str | None:
    """Where a count is not one the worker's own bounds allow for what was asked (worker/correctness/perturb.py)."""
    if "products" in counts and not limits.MIN_PRODUCTS <= counts["products"] <= limits.MAX_PRODUCTS:
        return f"{counts['products']} products, outside [{limits.MIN_PRODUCTS}, {limits.MAX_PRODUCTS}]"
    for name in ("delay_cycles", "release_cycles", "hold_cycles"):
        if name in counts and counts[name] > limits.MAX_CYCLES:
            return f"{name} {counts[name]} beyond {limits.MAX_CYCLES}"
    kind = asked["kind"]
    if kind == "launch_order" and counts["flushed_bytes"] not in (0, int(asked.get("flush_bytes", 0))):
        return f"{counts['flushed_bytes']} bytes flushed, asked {asked.get('flush_bytes')}"
    if kind == "copy_traffic":
        if not limits.MIN_COPIES <= counts["copies"] <= limits.MAX_COPIES:
            return f"{counts['copies']} copies, outside [{limits.MIN_COPIES}, {limits.MAX_COPIES}]"
        wanted = min(limits.MAX_COPY_BYTES, max(limits.MIN_COPY_BYTES, int(asked["bytes"])))
        if counts["copy_bytes"] != wanted:
            return f"copies of {counts['copy_bytes']} bytes, asked {wanted}"
    if kind == "sm_hold":
        sms, blocks = counts["sms"], counts["blocks"]
        if not 2 <= sms <= MAX_SMS or blocks != limits.hold_blocks(float(asked["share"]), sms):
            return f"{blocks} blocks on {sms} SMs for a share of {asked['share']}"
    return None


def planned(state: JudgmentState, replays: Replays) -> list[dict[str, Any]]:
    """The judgment's perturbations, drawn once (a trial run again draws none anew) and kept in `replays`."""
    if replays.perturbations is None:
        size = copy_bytes(state.admission.footprint, state.admission.reserved_bytes)
        replays.perturbations = perturbations(state.build.hello, state.source, state.config.strict, size)
    return list(replays.perturbations)


def replay(state: JudgmentState, replays: Replays, index: int, inputs: Any, keep_inputs: bool = False) -> bool:
    """The trial's call again on the same inputs, and at one trial on CUDA (the plan's `perturbed_at`) again under
    each drawn perturbation (`planned`), within `PERTURBED_BUDGET_S` past the practical count, each added to
    `replays`; False where its worker could not make the inputs again (the trial is run again, shipped)."""
    if not replay_once(state, replays, index, inputs, keep_inputs, None):
        return False
    if state.plan is None or index != state.plan.perturbed_at:
        return True
    began = time.monotonic()
    drawn = planned(state, replays)
    for number, spec in enumerate(drawn):
        spent_s = time.monotonic() - began
        if number >= PRACTICAL_COUNT and spent_s > PERTURBED_BUDGET_S:
            replays.skipped, replays.perturbed_s = [p["kind"] for p in drawn[number:]], round(spent_s, 3)
            return True
        if not replay_once(state, replays, index, inputs, keep_inputs, spec):
            return False
    return True


def replay_once(
    state: JudgmentState,
    replays: Replays,
    index: int,
    inputs: Any,
    keep_inputs: bool,
    perturb_spec: dict[str, Any] | None,
) -> bool:
    """One replay: a difference beyond rounding fails as `nondeterministic`, one at rounding level is KJ-C001."""
    if not state.calls.draws_random:  # another random state: what differs then is the kernel's own nondeterminism
        state.calls.call_seed = state.source.randrange(2**31 - 1)
    phase = f"replay of trial {index}" + (f" under {perturb_spec['kind']}" if perturb_spec else "")
    again = call_candidate(state, inputs, phase=phase, keep_inputs=keep_inputs, perturb=perturb_spec)
    if again is None:
        return False
    entry: dict[str, Any] = {"trial": index}
    if perturb_spec:
        counts, problem = check_report(perturb_spec, again.perturbed)
        if problem is not None:
            summary = f"the worker's report of its perturbation is not what it was asked to make: {problem}"
            raise CandidateFailed(Failure(kind="integrity_violation", phase=phase, summary=summary[:500]))
        done = again.perturbed or {}  # (a report without counts is {"error": why}: check_report)
        entry["perturbation"] = perturb_spec["kind"] if counts is not None else f"not applied: {done['error']}"[:300]
        if counts is not None:
            entry["conditions"] = counts
    results = compare(state, "trial", again, "replay")
    worst = next((r for r in results if not r["passed"]), None) or max(
        results, key=lambda r: r["metrics"].get("differing_elements", 0)
    )
    entry.update(summary=worst["summary"], **worst["metrics"])
    identical = all(r["differing_elements"] == 0 for r in [*replays.trials, entry])
    replays.trials.append(entry)
    replays.bitwise_identical = identical
    if not worst["passed"]:
        raise CandidateFailed(Failure(kind="nondeterministic", phase=phase, summary=worst["summary"]))
    if worst["metrics"].get("differing_elements"):
        state.findings.append(finding("KJ-C001", "info", evidence={"trial": index, **worst["metrics"]}))
    return True
