"""The server's gauges and counters, served at GET /metrics in Prometheus' text format (prometheus-client).

Each service has its own registry (not the library's global one), so several services in one process, as
in the tests, keep their own counts. Latency is a judgment's time from its admission to its record, queue
wait included: the histogram `kerneljudge_judgment_seconds` for Prometheus' `histogram_quantile`, and
`kerneljudge_judgment_latency_seconds{quantile=...}` over the last `WINDOW` judgments for a glance.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

WINDOW = 1000
QUANTILES = (0.5, 0.9, 0.99)
LATENCY_BUCKETS_S = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600, math.inf)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServeMetrics:
    """What GET /metrics reports; `lanes` (a cluster may lose some), `busy` and `waiting` are read at each scrape."""

    def __init__(self, lanes: Callable[[], int], busy: Callable[[], int], waiting: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        Gauge("kerneljudge_lanes", "Judging lanes alive (judgments side by side)", registry=self.registry).set_function(
            lanes
        )
        Gauge("kerneljudge_lanes_busy", "Lanes judging now", registry=self.registry).set_function(busy)
        Gauge(
            "kerneljudge_queue_depth", "Judgments admitted and waiting for a lane", registry=self.registry
        ).set_function(waiting)
        self.judgments = Counter(
            "kerneljudge_judgments",
            "Judgments finished, by record status (judge_fault: no record, the judge raised)",
            ["status"],
            registry=self.registry,
        )
        self.answers = Counter(
            "kerneljudge_answers",
            "Answers given, by where their record came from (judged, store, shared with one in flight)",
            ["source"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "kerneljudge_rejected", "Requests refused, by reason", ["reason"], registry=self.registry
        )
        self.latency = Histogram(
            "kerneljudge_judgment_seconds",
            "Seconds from a judgment's admission to its record, queue wait included",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        recent = Gauge(
            "kerneljudge_judgment_latency_seconds",
            f"Quantiles of the last {WINDOW} judgments' seconds from admission to record (NaN before the first)",
            ["quantile"],
            registry=self.registry,
        )
        self._recent: deque[float] = deque(maxlen=WINDOW)
        self._lock = threading.Lock()
        for q in QUANTILES:
            recent.labels(quantile=str(q)).set_function(lambda q=q: self.quantile(q))

    def judged(self, status: str, seconds: float) -> None:
        self.judgments.labels(status=status).inc()
        self.latency.observe(seconds)
        with self._lock:
            self._recent.append(seconds)

    def answered(self, source: str, count: int = 1) -> None:
        self.answers.labels(source=source).inc(count)

    def refused(self, reason: str) -> None:
        self.rejected.labels(reason=reason).inc()

    def quantile(self, q: float) -> float:
        """The q-quantile of recent judgments' latency; NaN before the first."""
        with self._lock:
            samples = sorted(self._recent)
        if not samples:
            return math.nan
        if len(samples) == 1:
            return samples[0]
        return statistics.quantiles(samples, n=100, method="inclusive")[round(q * 100) - 1]

    def render(self) -> bytes:
        return generate_latest(self.registry)
