"""One judgment, stage by stage: preflight and build, correctness, timing, the record.

The parent orchestrates two workers: a reference worker that runs the trusted task (inputs from seeds,
reference and oracle outputs) and a candidate worker that imports the untrusted candidate. The parent never
imports either; it compares, decides and writes the record. Each stage is a module of `kerneljudge.judgment.stages`
over the judgment's state (`judgment/stages/state.py`); this module runs them in order, keeps the results they
return (`judgment/stages/results.py`), holds the batch gate, closes the workers whatever happened, and has the record
assembled from the state and those results (`judgment/stages/record.py`).
"""

from __future__ import annotations

import datetime as dt
import random
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.judgment.env import fingerprint, host_fingerprint
from kerneljudge.judgment.gate import OPEN_GATE, Gate
from kerneljudge.judgment.progress import Progress, progress_of
from kerneljudge.judgment.stages import (
    build,
    correctness,
    device_memory,
    integrity,
    record,
    sanitizer,
    timing,
    timing_ahead,
    timing_pair,
)
from kerneljudge.judgment.stages.build import sandbox_capability
from kerneljudge.judgment.stages.calls import draws_random_note
from kerneljudge.judgment.stages.failures import (
    COMPILE_ERROR_TYPES,
    CandidateFailed,
    JudgeFailed,
    TaskUnsupported,
    classify_error,
    error_failure,
    integrity_failure,
)
from kerneljudge.judgment.stages.replays import perturbations
from kerneljudge.judgment.stages.results import StageResults
from kerneljudge.judgment.stages.shared_reference import SharedReference
from kerneljudge.judgment.stages.spare_pairs import SparePairs
from kerneljudge.judgment.stages.state import JudgmentState
from kerneljudge.judgment.stages.timed_calls import COMPILE_TIMEOUT_FACTOR, sample_list
from kerneljudge.judgment.stages.timing import KERNELBENCH_FLUSH_BYTES, MIN_FLUSH_BYTES, l2_flush_bytes
from kerneljudge.judgment.stages.trials import task_check_disagrees
from kerneljudge.judgment.stages.workers import at_gate, clocked, close_workers, join_closing, new_pair
from kerneljudge.results.verdict import Capability, Failure, Record, Timing
from kerneljudge.sources.candidate import Candidate, candidate_from_text, load_candidate
from kerneljudge.sources.task import Task
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_task
from kerneljudge.timing.figures import combined_timing
from kerneljudge.timing.sides import CachedSide

__all__ = [
    "COMPILE_ERROR_TYPES",
    "COMPILE_TIMEOUT_FACTOR",
    "KERNELBENCH_FLUSH_BYTES",
    "MIN_FLUSH_BYTES",
    "CandidateFailed",
    "JudgeFailed",
    "Judgment",
    "TaskUnsupported",
    "classify_error",
    "combined_timing",
    "draws_random_note",
    "error_failure",
    "integrity_failure",
    "judge",
    "l2_flush_bytes",
    "perturbations",
    "sample_list",
    "sandbox_capability",
    "task_check_disagrees",
]


class Judgment(JudgmentState):
    """One judgment; `run()` always returns a record, whatever the candidate or the judge did.

    Its state is `JudgmentState`'s, and `results` the stages' own results; the few steps a test or a benchmark
    replaces (the timing pair's boot and start, the sanitizer's decision, the timing stage) are methods here, handed
    to the stages that use them.
    """

    def __init__(
        self,
        task: Task,
        candidate: Candidate,
        config: JudgeConfig,
        progress: Callable[[str], None] | None = None,
        gpu: str | None = None,
        gate: Gate | None = None,
        baselines: dict[str, CachedSide] | None = None,
        rng: random.Random | None = None,
        spares: SparePairs | None = None,
        shared: SharedReference | None = None,
    ) -> None:
        super().__init__(
            task=task,
            candidate=candidate,
            config=config,
            progress=progress or (lambda stage: None),
            gpu=gpu,
            gate=gate or OPEN_GATE,
            baselines=baselines or {},
            source=rng if rng is not None else secrets.SystemRandom(),
            spares=spares,
            shared=shared,
        )
        self.results = StageResults()

    def run(self) -> Record:
        """Run the stages, close every worker whatever happened, and return the record."""
        started = time.monotonic()
        try:
            self._pipeline()
        except CandidateFailed as exc:  # an out-of-memory where the judgment outgrew the GPU is the judge's
            self.failure = device_memory.judged(self, exc.failure)
        except JudgeFailed as exc:
            self.failure = Failure(kind="judge_error", phase="judge", summary=str(exc))
        except TaskUnsupported as exc:
            self.capabilities["task_runs_here"] = Capability(status="unavailable", required=True, detail=str(exc))
        except Exception as exc:  # a bug in the judge must not become the candidate's verdict
            self.failure = Failure(kind="judge_error", phase="judge", summary=f"{type(exc).__name__}: {exc}")
        finally:
            ahead_logs = timing_ahead.end(self)  # a timing pair made ready ahead that timing did not take
            for worker in [*self.booting.values(), *self.workers.values()]:  # all end together
                worker.ask_exit()
            for worker in self.booting.values():  # never told to load anything: no candidate code ran there
                worker.close()
            self.booting = {}
            join_closing(self)  # a checked pair closed beside its timing pair (judgment/stages/workers.py)
            logs = {**self.closed_logs, **ahead_logs, **close_workers(self)}
            self.admission.held.close()
        if any(
            self.admission.memory_peaks.values()
        ):  # the reservation checked against what was held (a stage log line)
            held = ", ".join(f"{role} {peak / 2**30:.1f}" for role, peak in self.admission.memory_peaks.items())
            self.progress(
                f"device memory: reserved {self.admission.reserved_bytes / 2**30:.1f} GiB; held at most {held} GiB"
            )
        duration_s = time.monotonic() - started
        traces = self.results.traces = integrity.judge_traces(self)
        if traces is not None:
            self.add_findings(list(traces.findings))
            self.capabilities["profiler_trace"] = traces.capability
        created_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        # A judgment asked for the CPU that ended before any worker said hello (a candidate that does not parse
        # or defines no ModelNew) still records the software it ran with, as a batch keys it (batch.py).
        hello = self.build.hello
        environment = host_fingerprint() if hello is None and self.config.device == "cpu" else fingerprint(hello)
        return record.assemble(self, self.results, logs, duration_s, created_at, environment)

    def _pipeline(self) -> None:
        with at_gate(self, measuring=False):
            with clocked(self, "build"):
                build.settle_asked_device(self)
                self.progress("checking the candidate's source")
                build.run_preflight(self)
                # Both interpreters start at once (imports take seconds); the candidate's is only told
                # to import the candidate once the reference has settled the device.
                self.progress("starting workers")
                # Triton's import and key beside torch's, in the candidate's worker (worker/prepare.py).
                self.workers = new_pair(self, self.config.device, prepare_triton=self.readies_triton, checked=True)
                build.start_reference(self, self._sanitizer_decision)
                if self.unsupported():
                    return
                init_inputs = build.load_reference(self)
                self.progress(f"building the candidate on {self.build.device}")
                build.start_candidate(self, init_inputs)
                if self.config.timing:
                    self._boot_timing_pair()
            with clocked(self, "correctness"):
                correctness.run(self, self._sanitizer_decision, self.results.correctness)
            if self.config.timing and self.results.timing.fails_closed(self.findings, self.config):
                return
            if not self.config.timing:
                self.results.timing.timing = Timing(measured=False, reason="timing disabled by configuration")
                return
            # The fresh pair is loaded as work, beside the other lanes: only the measurement holds them back
            # (on an H200 on 2026-12-02, judge 0.1.0, the load took about 4 s of each timed judgment's turn alone).
            with clocked(self, "timing"):
                self.progress("starting a fresh worker pair for timing")
                self._start_timing_pair()
        # The timing stage holds the gate itself: to work while it stages and checks, to measure (every other
        # lane paused) only while it takes samples (judgment/stages/timing.py).
        with clocked(self, "timing"):
            self._timing()

    def _timing(self) -> None:
        """The timing stage (judgment/stages/timing.py); a benchmark overrides it to time one pair several ways."""
        timing.run(self, self._start_timing_pair, self.results.correctness.timing_sets, self.results.timing)

    def _sanitizer_decision(self) -> sanitize.Decision:
        return sanitizer.decision(self)

    def _boot_timing_pair(self) -> None:
        timing_pair.boot(self)

    def _start_timing_pair(self) -> None:
        timing_pair.start(self, self._boot_timing_pair)


def judge(
    task: Task | str | Path,
    candidate: Candidate | str | Path | None = None,
    config: JudgeConfig | None = None,
    progress: Progress | bool | None = None,
    gpu: str | None = None,
    gate: Gate | None = None,
    baselines: dict[str, CachedSide] | None = None,
    rng: random.Random | None = None,
    spares: SparePairs | None = None,
    *,
    candidate_text: str | None = None,
    **overrides: Any,
) -> Record:
    """Judge one candidate against one task and return the verdict record.

    The candidate is either `candidate` (a `Candidate`, or the path of its file) or `candidate_text` (its text:
    Python source, or a model's response whose last fenced Python block defining ModelNew is judged, read as a
    file's text is); exactly one of them. `overrides` are JudgeConfig fields (device="cpu", mode="off", ...);
    `progress` is called with a short description as each stage starts, or, when True, draws the CLI's spinner
    naming each stage on stderr (kerneljudge/judgment/progress.py). A batch lane passes
    `gpu` (the workers' CUDA_VISIBLE_DEVICES), `gate` (shared by its lanes) and, with cached baselines,
    the task's `baselines` (`kerneljudge.runs.backends.lane.BaselineCache`). `rng` replaces the operating system's
    randomness in the hidden plan (judgment/hidden_plan.py): for tests only, since a candidate that knows it knows
    the plan.
    `spares`: worker pairs started ahead (judgment/stages/spare_pairs.py), for a judge that judges one after another.
    docs/api.md.
    """
    config = (config or JudgeConfig()).with_(**overrides) if overrides else (config or JudgeConfig())
    task = task if isinstance(task, Task) else load_task(task)
    if (candidate is None) == (candidate_text is None):
        raise UsageError("judge() takes exactly one of candidate (a Candidate or a file's path) and candidate_text")
    if candidate_text is not None:
        candidate = candidate_from_text(candidate_text)
    elif isinstance(candidate, str) and "\n" in candidate:  # a text given where a path is expected
        raise UsageError("candidate is a path; to judge a candidate's or a response's text, pass candidate_text=")
    candidate = candidate if isinstance(candidate, Candidate) else load_candidate(candidate)
    candidate = gpumode.adapt_candidate(task, candidate)  # a GPU MODE submission: custom_kernel as ModelNew
    with progress_of(progress, "judging") as update:
        judgment = Judgment(task, candidate, config, update, gpu, gate, baselines, rng, spares)
        return judgment.run()
