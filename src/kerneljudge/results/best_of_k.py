"""Best-of-K speedup claims with a multiplicity correction, per task (kerneljudge report).

Whoever keeps the fastest of K candidates of a task has looked K times: the largest of K noisy speedups
is biased upward, and with K candidates that are no faster than the reference one of them clears a
5% test by luck about 1 - 0.95**K of the time. Each candidate's claim "faster than the reference" is
a hypothesis with a one-sided p-value from its own paired timing (`evidence_of`); the K claims of a
task are tested together with Benjamini-Hochberg at false discovery rate q, and the corrected claim
is the fastest discovery with a lower bound at the false-coverage-adjusted level 1 - R*q/K (Benjamini
and Yekutieli, 2005). Methodology, sources and worked example: docs/report.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kerneljudge.results.metrics import speedup_of, verified_runtime_ms
from kerneljudge.results.verdict import Record, Timing

FDR_Q = 0.05
NORMAL = statistics.NormalDist()


def binomial_upper_tail(n: int, k: int) -> float:
    """P(B >= k) for B ~ Binomial(n, 1/2), exactly (integer sums; one division at the end)."""
    if k <= 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n


def sign_test_p(ratios: Sequence[float], threshold: float = 1.0) -> float:
    """One-sided exact sign test of H0 "the median paired ratio is at most `threshold`" (ties dropped)."""
    above = sum(r > threshold for r in ratios)
    below = sum(r < threshold for r in ratios)
    return binomial_upper_tail(above + below, above)


def median_lower_bound(ratios: Sequence[float], alpha: float) -> float | None:
    """A distribution-free lower confidence bound of the median ratio at level 1 - alpha: the j-th smallest
    ratio, j the largest with P(B <= j - 1) <= alpha for B ~ Binomial(n, 1/2); None when even the smallest
    ratio is not a bound at that level (too few blocks)."""
    values = sorted(ratios)
    n, chosen = len(values), None
    for j in range(1, n + 1):
        if binomial_upper_tail(n, n - j + 1) <= alpha:  # P(B <= j - 1) = P(B >= n - j + 1) by symmetry
            chosen = values[j - 1]
        else:
            break
    return chosen


@dataclass(frozen=True)
class Evidence:
    """A candidate's one-sided p-value for "faster than the reference", how it was derived, and its lower bound."""

    p_value: float
    method: str
    ratios: tuple[float, ...] = ()  # the paired block ratios, when the p-value is the sign test's
    interval: tuple[float, float, float] | None = None  # (speedup, low, high) at `level`, when from an interval
    level: float = 0.95

    def lower_bound(self, alpha: float) -> float | None:
        """The speedup's lower bound at level 1 - alpha, from the same evidence as the p-value."""
        if self.ratios:
            return median_lower_bound(self.ratios, alpha)
        if self.interval is None:
            return None
        speedup, low, high = self.interval
        return math.exp(math.log(speedup) - NORMAL.inv_cdf(1 - alpha) * log_se(low, high, self.level))


def log_se(low: float, high: float, level: float) -> float:
    """The standard error of the log speedup that a two-sided interval at `level` implies, read as normal."""
    return (math.log(high) - math.log(low)) / (2 * NORMAL.inv_cdf(0.5 + level / 2))


def interval_p(speedup: float, low: float, high: float, level: float) -> float:
    """One-sided p-value of "speedup <= 1" from a two-sided interval, reading it as normal on the log scale."""
    se = log_se(low, high, level)
    if not se > 0:
        return 0.0 if speedup > 1 else 1.0
    return 1.0 - NORMAL.cdf(math.log(speedup) / se)


def _blocks(timing: Timing) -> list[float]:
    """The paired block ratios the speedup was estimated from: throttled blocks left out unless all were."""
    throttled = set((timing.clocks or {}).get("throttled_blocks") or [])
    ratios = [r for b, r in enumerate(timing.block_ratios) if b not in throttled and r > 0]
    return ratios or [r for r in timing.block_ratios if r > 0]


def evidence_of(record: Record) -> Evidence:
    """The candidate's evidence that it is faster than its reference; p = 1 where there is none to claim with."""
    t = record.timing
    if not (record.valid and record.verified):
        return Evidence(1.0, "not verified: no claim")
    if speedup_of(record) is None:
        return Evidence(1.0, "not timed: no claim")
    if len(t.shapes) > 1:  # the claim is "faster at every timing shape": the largest of the shapes' p-values
        intervals = [s.get("interval") for s in t.shapes]
        if not all(intervals):
            return Evidence(1.0, "a timing shape without an interval: no claim")
        ps = [interval_p(s["speedup"], *s["interval"], t.interval_level or 0.95) for s in t.shapes]
        worst = t.shapes[ps.index(max(ps))]
        return Evidence(
            max(ps),
            f"normal approximation from each of {len(ps)} timing shapes' intervals (largest p)",
            interval=(worst["speedup"], *worst["interval"]),
            level=t.interval_level or 0.95,
        )
    ratios = _blocks(t)
    if ratios:
        return Evidence(sign_test_p(ratios), f"exact sign test over {len(ratios)} paired blocks", tuple(ratios))
    if t.speedup_interval and t.speedup is not None:
        level = t.interval_level or 0.95
        return Evidence(
            interval_p(t.speedup, *t.speedup_interval, level),
            "normal approximation from the speedup's interval",
            interval=(t.speedup, *t.speedup_interval),
            level=level,
        )
    return Evidence(1.0, f"no paired evidence ({t.method or 'unknown'} timing): no claim")


def benjamini_hochberg(p_values: Sequence[float], q: float = FDR_Q) -> list[bool]:
    """Which hypotheses Benjamini-Hochberg (1995) rejects at false discovery rate q: every p at or below
    the largest p_(i) with p_(i) <= i*q/m."""
    if not 0 < q < 1:
        raise ValueError(f"the false discovery rate q must be in (0, 1), got {q}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    passed = [rank for rank, i in enumerate(order, start=1) if p_values[i] <= rank * q / m]
    cutoff = p_values[order[passed[-1] - 1]] if passed else -1.0
    return [p <= cutoff for p in p_values]


@dataclass(frozen=True)
class TaskClaim:
    """A task's best-of-K: the naive claim (fastest verified), and what survives the correction at q."""

    task: str
    k: int  # valid judgments of the task: every candidate looked at
    q: float
    fastest: str | None  # the fastest verified candidate: the uncorrected best-of-K claim
    fastest_speedup: float | None
    fastest_p: float | None
    discoveries: int  # claims Benjamini-Hochberg keeps at q
    claimed: str | None  # the fastest kept candidate: the corrected claim
    claimed_speedup: float | None
    claimed_lower_bound: float | None  # at level 1 - discoveries*q/k
    claimed_runtime_ms: float | None  # its verified_runtime
    method: str  # how the claimed (else the fastest) candidate's p-value was derived

    @property
    def level(self) -> float | None:
        return 1 - self.discoveries * self.q / self.k if self.discoveries else None


def claim_for(task: str, records: Sequence[Record], q: float) -> TaskClaim:
    """One task's corrected claim over its valid records (each record one look)."""
    evidence = [evidence_of(r) for r in records]
    kept = benjamini_hochberg([e.p_value for e in evidence], q)
    timed = [i for i, r in enumerate(records) if r.verified and speedup_of(r) is not None]
    fastest = max(timed, key=lambda i: speedup_of(records[i]) or 0.0, default=None)
    found = [i for i in timed if kept[i]]
    claimed = max(found, key=lambda i: speedup_of(records[i]) or 0.0, default=None)
    shown = claimed if claimed is not None else fastest
    alpha = len(found) * q / len(records)
    return TaskClaim(
        task=task,
        k=len(records),
        q=q,
        fastest=records[fastest].candidate.name if fastest is not None else None,
        fastest_speedup=speedup_of(records[fastest]) if fastest is not None else None,
        fastest_p=evidence[fastest].p_value if fastest is not None else None,
        discoveries=len(found),
        claimed=records[claimed].candidate.name if claimed is not None else None,
        claimed_speedup=speedup_of(records[claimed]) if claimed is not None else None,
        claimed_lower_bound=evidence[claimed].lower_bound(alpha) if claimed is not None else None,
        claimed_runtime_ms=verified_runtime_ms(records[claimed]) if claimed is not None else None,
        method=evidence[shown].method if shown is not None else "no verified, timed candidate",
    )


def best_of_k(records: Iterable[Record], q: float = FDR_Q) -> list[TaskClaim]:
    """Every task's corrected best-of-K claim, tasks in name order; judge failures (`valid` false) left out."""
    by_task: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        if record.valid:
            by_task.setdefault((record.task.name, record.task.sha256), []).append(record)
    names = [name for name, _ in by_task]
    return [
        claim_for(name if names.count(name) == 1 else f"{name} ({sha[:8]})", group, q)
        for (name, sha), group in sorted(by_task.items())
    ]
