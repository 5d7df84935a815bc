"""`kerneljudge confirm`: re-measure a candidate in fresh process pairs and label its claim on the ladder.

Each run is a whole judgment: two fresh workers, new hidden seeds (so new hidden inputs), correctness
checked again, then timing. A claim climbs the ladder (kerneljudge.timing.ladder) only as far as every
run supports it: correct in every run; faster than eager by the margin in the first run's interval;
confirmed when every run's interval clears the margin. On CUDA the reference is also timed under
torch.compile (a third side of every block) in the first run, for the compile rung; where it cannot be
compiled, or on the CPU, that rung is recorded as not measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import judge
from kerneljudge.results.verdict import Record
from kerneljudge.sources.candidate import Candidate
from kerneljudge.sources.task import Task
from kerneljudge.timing.ladder import Rung, climb
from kerneljudge.timing.stats import RatioEstimate


@dataclass(frozen=True)
class Run:
    index: int
    status: str
    verified: bool
    speedup: float | None
    interval: list[float] | None
    stop_reason: str | None
    failure: str | None


@dataclass(frozen=True)
class Confirmation:
    claim: str | None
    margin: float
    runs: list[Run]
    rungs: list[Rung]
    spread: float | None  # (max - min) / median of the runs' speedups

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_of(record: Record) -> RatioEstimate | None:
    t = record.timing
    if not t.measured or t.speedup is None or not t.speedup_interval:
        return None
    low, high = t.speedup_interval
    return RatioEstimate(t.speedup, low, high, t.interval_level or 0.95, t.speedup_rse or 0.0, len(t.block_ratios))


def compile_estimate_of(record: Record) -> RatioEstimate | None:
    t = record.timing
    if not t.measured or t.speedup_vs_compile is None or not t.speedup_vs_compile_interval:
        return None
    low, high = t.speedup_vs_compile_interval
    return RatioEstimate(t.speedup_vs_compile, low, high, t.interval_level or 0.95, 0.0, len(t.block_ratios))


def compile_on(config: JudgeConfig) -> bool:
    """The torch.compile baseline is measured on CUDA only (on the CPU Inductor builds C++ for minutes)."""
    import torch

    return config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())


def confirm(
    task: Task,
    candidate: Candidate,
    config: JudgeConfig,
    runs: int = 5,
    margin: float = 0.02,
    progress: Callable[[str], None] | None = None,
    judge_once: Callable[[Task, Candidate, JudgeConfig], Record] = judge,
) -> Confirmation:
    """Judge `runs` times in fresh process pairs and climb the ladder on what every run supports."""
    if runs < 1:
        raise ValueError("confirm needs at least one run")
    config = config.with_(timing=True)
    records: list[Record] = []
    for index in range(runs):
        if progress:
            progress(f"fresh process pair {index + 1}/{runs}")
        record = judge_once(task, candidate, config.with_(timing_compile=index == 0 and compile_on(config)))
        records.append(record)
        if not record.verified:
            break  # a run that is not verified ends the claim; no point timing more
    estimates = [estimate_of(r) for r in records]
    correct = len(records) == runs and all(r.verified for r in records)
    confirmations = [e for e in estimates if e is not None] if correct else None
    if confirmations is not None and len(confirmations) < runs:
        confirmations = None
    vs_compile = compile_estimate_of(records[0]) if correct else None
    claim, rungs = climb(correct, vs_compile, estimates[0] if correct else None, confirmations, margin)
    speedups = [e.speedup for e in estimates if e is not None]
    spread = (max(speedups) - min(speedups)) / statistics.median(speedups) if len(speedups) > 1 else None
    return Confirmation(
        claim=claim,
        margin=margin,
        runs=[
            Run(
                index=i,
                status=r.status,
                verified=r.verified,
                speedup=r.timing.speedup,
                interval=r.timing.speedup_interval,
                stop_reason=r.timing.stop_reason,
                failure=r.failure.summary if r.failure else None,
            )
            for i, r in enumerate(records)
        ],
        rungs=rungs,
        spread=spread,
    )
