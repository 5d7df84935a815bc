"""Benchmark figures over judged records: fast_p, verified_fast_p, geometric-mean speedups, Wilson intervals.

fast_p is KernelBench's metric (Ouyang et al., 2025, arXiv:2502.10517): the share of all judgments whose
candidate is correct and faster than p times the baseline (speedup > p), the incorrect ones counted in the
denominator. Here "correct" is the record's correctness check alone, as KernelBench's own evaluation
reports it, and verified_fast_p counts only verified records (correct, honest, timed without a finding
that voids the figure). Records of a judge failure (`valid` false) are the judge's fault, not the
candidate's: they are left out of both and counted apart. A correct record without a measured speedup
(timing off, or not measured) counts only at p = 0, where any speedup would clear the bar; where no
judgment was timed at all, fast_p above 0 is not a figure and the report says "not timed".

verified_runtime is KernelGuard's (the hardened KernelBench fork among the seed systems): a judgment's
candidate runtime, given only when it is verified and timed. Here it is the candidate's median time per call
in milliseconds (`timing.candidate.median_ms`), None otherwise; runtimes compare within a task only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.results.verdict import Record
from kerneljudge.sources.task import MAX_LISTING_BYTES, read_source

THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile: two-sided 95% intervals
LEVEL = re.compile(r"(?:^|[/_])level_?(\d+)(?:[/_]|$)")
LIVE = "the live reference, paired in the same judgment"


@dataclass(frozen=True)
class Rate:
    """count of total, with a 95% Wilson score interval (no interval for an empty total)."""

    count: int
    total: int

    @property
    def value(self) -> float | None:
        return self.count / self.total if self.total else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.count, self.total) if self.total else None


def wilson(count: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (Wilson, 1927): low <= count/total <= high, in [0, 1].

    The interval contains the observed share in exact arithmetic, with ends exactly 0 at count 0 and 1 at
    count = total; in floating point `centre - half` at count 0 comes out as 5.6e-17 or -1e-17, so the
    ends are clamped to the share and to [0, 1] (an error bar drawn from share - low must not go negative)."""
    if total <= 0 or not 0 <= count <= total:
        raise ValueError(f"a rate needs 0 <= count <= total and total > 0, got {count} of {total}")
    share = count / total
    z2 = z * z
    centre = (share + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(share * (1 - share) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return min(share, max(0.0, centre - half)), max(share, min(1.0, centre + half))


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float) -> Rate:
    """KernelBench's fast_p over judgments: correct and speedup > p, out of all of them."""
    if len(correct) != len(speedups):
        raise ValueError(f"{len(correct)} correctness flags against {len(speedups)} speedups")
    count = sum(1 for ok, s in zip(correct, speedups, strict=True) if ok and (s > p if s is not None else p == 0))
    return Rate(count, len(correct))


def geometric_mean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass(frozen=True)
class Summary:
    judged: int  # valid records: the denominators
    judge_failures: int  # invalid records, left out
    correct: Rate
    verified: Rate
    fast: dict[float, Rate]
    verified_fast: dict[float, Rate]
    geomean_speedup_correct: float | None  # over correct records with a measured speedup
    geomean_speedup_verified: float | None
    statuses: dict[str, int]
    timed: int = 0  # valid records with a speedup: none means fast_p above 0 was not measured
    verified_runtimes: int = 0  # valid records with a verified_runtime
    speedups_against: str = LIVE

    @property
    def not_timed(self) -> bool:
        return self.judged > 0 and self.timed == 0


def is_correct(record: Record) -> bool:
    """The record's correctness check passed (KernelBench's "correct"; findings aside)."""
    return bool(record.correctness and record.correctness.passed)


def speedup_of(record: Record) -> float | None:
    t = record.timing
    return t.speedup if t is not None and t.measured and t.speedup is not None else None


def verified_runtime_ms(record: Record) -> float | None:
    """KernelGuard's verified_runtime: the candidate's median ms per call, for a verified, timed record only."""
    t = record.timing
    if not (record.valid and record.verified) or t is None or not t.measured or t.candidate is None:
        return None
    return t.candidate.median_ms


def level_of(record: Record) -> str:
    """`level N` where the task's path or name carries a KernelBench level folder or prefix; else `other`."""
    for text in (record.task.path or "", record.task.name):
        found = LEVEL.search(text.replace("\\", "/"))
        if found:
            return f"level {found.group(1)}"
    return "other"


class BaselineError(ValueError):
    """A baseline file that cannot be read, or a record it has no time for; the message is one line."""


@dataclass(frozen=True)
class Baseline:
    """Reference times in KernelBench's baseline format (its `results/timing/<hardware>/baseline_time_torch.json`).

    The file maps `levelN` to problem file names (`19_ReLU.py`) to timing statistics, of which the
    mean in milliseconds is used, as KernelBench's analysis does: speedup = baseline mean / the
    candidate's mean. Only records of tasks named in it can be scored against it.
    """

    path: str
    means_ms: dict[str, dict[str, float]]  # "level 1" -> problem file name -> mean ms

    @classmethod
    def read(cls, path: str | Path) -> Baseline:
        try:
            data = json.loads(read_source(Path(path), "the baseline", BaselineError, MAX_LISTING_BYTES))
        except ValueError as exc:
            raise BaselineError(f"the baseline {path} is not JSON: {exc}") from None
        if not isinstance(data, dict) or not data:
            raise BaselineError(f'the baseline {path} is not KernelBench\'s format: expected {{"level1": {{...}}}}')
        means: dict[str, dict[str, float]] = {}
        for level, problems in data.items():
            found = re.fullmatch(r"level(\d+)", str(level))
            if not found or not isinstance(problems, dict):
                raise BaselineError(f"the baseline {path}: {level!r} is not a level of problems (level1, level2, ...)")
            table = means.setdefault(f"level {found.group(1)}", {})
            for name, stats in problems.items():
                if stats is None or (isinstance(stats, dict) and "error" in stats):
                    continue  # KernelBench writes null or {"error": ...} where it could not time a problem
                mean = stats.get("mean") if isinstance(stats, dict) else None
                if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not mean > 0:
                    raise BaselineError(f"the baseline {path}: {level}/{name} has no positive mean time")
                table[str(name)] = float(mean)
        return cls(str(path), means)

    def speedup(self, record: Record) -> float | None:
        """Baseline mean over the candidate's mean; None when the candidate was not timed."""
        t = record.timing
        if t is None or not t.measured or t.candidate is None or not t.candidate.mean_ms > 0:
            return None
        level, name = level_of(record), Path(record.task.path or record.task.name).name
        mean = self.means_ms.get(level, {}).get(name)
        if mean is None:
            raise BaselineError(f"the baseline {self.path} has no time for {level.replace(' ', '')}/{name}")
        return mean / t.candidate.mean_ms


def summarize(
    records: Iterable[Record],
    thresholds: Sequence[float] = THRESHOLDS,
    baseline: Baseline | None = None,
) -> Summary:
    """The figures over `records`; speedups are each record's own paired ones, or against `baseline`."""
    records = list(records)
    valid = [r for r in records if r.valid]
    correct = [is_correct(r) for r in valid]
    verified = [bool(r.verified) for r in valid]
    speedup: Callable[[Record], float | None] = baseline.speedup if baseline else speedup_of
    speedups = [speedup(r) for r in valid]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return Summary(
        judged=len(valid),
        judge_failures=len(records) - len(valid),
        correct=Rate(sum(correct), len(valid)),
        verified=Rate(sum(verified), len(valid)),
        fast={p: fast_p(correct, speedups, p) for p in thresholds},
        verified_fast={p: fast_p(verified, speedups, p) for p in thresholds},
        geomean_speedup_correct=geometric_mean(s for ok, s in zip(correct, speedups, strict=True) if ok and s),
        geomean_speedup_verified=geometric_mean(s for ok, s in zip(verified, speedups, strict=True) if ok and s),
        statuses=dict(sorted(statuses.items())),
        timed=sum(s is not None for s in speedups),
        verified_runtimes=sum(verified_runtime_ms(r) is not None for r in valid),
        speedups_against=f"the baseline file {baseline.path} (KernelBench's format)" if baseline else LIVE,
    )
