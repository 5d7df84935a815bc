"""A generation's run folder and `generate`, the loop that fills it (docs/generate.md).

    RUN_DIR/level_L_problem_P_sample_S_kernel.py   each sample's code, as KernelBench names it
    RUN_DIR/samples.jsonl                          one SampleRecord a sample (generate/records.py)
    RUN_DIR/failures.jsonl                         requests that failed for good: those samples stay to do
    RUN_DIR/problems/levelL/P_name.py              the tasks, as a KernelBench checkout lays them out
    RUN_DIR/run.json                               the settings a resumed run must keep

so that `kerneljudge batch --kernelbench-run RUN_DIR --kernelbench-problems RUN_DIR/problems` judges it as it
is. A sample is done once its line is in samples.jsonl: the candidate file is written first (atomically, by
rename) and the line after it, so a kill loses at most the samples in flight, and running the same command
again asks only for the samples not done. No sample is ever asked for, or recorded, twice.
"""

from __future__ import annotations

import fcntl
import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kerneljudge.errors import UsageError
from kerneljudge.generate.client import Backend, ChatRequest, Completion, Sampling
from kerneljudge.generate.datasets import SelectedTask, write_problems
from kerneljudge.generate.prompts import Template, generation_prompt
from kerneljudge.generate.records import SampleRecord, append_line, read_lines, repair_tail
from kerneljudge.sources import pyast
from kerneljudge.sources.candidate import extract_code
from kerneljudge.sources.task import sha256_text

RUN_FILE, SAMPLES, FAILURES, PROBLEMS = "run.json", "samples.jsonl", "failures.jsonl", "problems"
LOCK_FILE = ".lock"  # held while a process writes the folder: two at once would ask for the same samples


class RunFolder:
    """A run folder: its settings, its problems, its JSONL files and candidates, written safely from threads."""

    def __init__(self, path: Path) -> None:
        if path.exists() and not path.is_dir():
            raise UsageError(f"--out {path} is a file, not a folder")
        path.mkdir(parents=True, exist_ok=True)
        self.path, self.lock = path, threading.Lock()
        # Released by close(), or by the kernel when the process dies, however it dies.
        self.held = (path / LOCK_FILE).open("a")
        try:
            fcntl.flock(self.held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.held.close()
            raise UsageError(f"another process is writing {path}: wait for it, or give another --out") from None
        for jsonl in path.glob("*.jsonl"):
            repair_tail(jsonl)

    def close(self) -> None:
        self.held.close()

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def problems(self) -> Path:
        return self.path / PROBLEMS

    def keep_settings(self, settings: dict[str, Any]) -> None:
        """Write run.json, or check that a run being resumed had these settings: its samples must be alike."""
        target = self.path / RUN_FILE
        if target.is_file():
            try:
                before = json.loads(target.read_text())
            except json.JSONDecodeError:
                raise UsageError(f"{target} is not JSON: was the folder made by kerneljudge generate?") from None
            changed = sorted(k for k in settings if before.get(k) != settings[k])
            if changed:
                key = changed[0]
                raise UsageError(
                    f"{self.path} was begun with {key} {before.get(key)!r}, not {settings[key]!r}: "
                    "give another --out, or the same settings to resume it"
                )
            return
        target.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")

    def write_candidate(self, relative: str, text: str) -> None:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(text)
        partial.replace(target)

    def append(self, name: str, record: Any) -> None:
        with self.lock:
            append_line(self.path / name, record)


def exchange_fields(
    task: SelectedTask, sample_id: int, prompt: str, request: ChatRequest, completion: Completion, backend: Backend
) -> dict[str, Any]:
    """The fields a sample and a repair round share, from the request and what came back."""
    return {
        "task_id": task.task_id,
        "task_name": task.name,
        "task_sha256": task.task.sha256,
        "level": task.level,
        "problem_id": task.problem_id,
        "sample_id": sample_id,
        "prompt": prompt,
        "response": completion.text,
        "model": completion.model,
        "requested_model": request.model,
        "finish_reason": completion.finish_reason,
        "completion_id": completion.completion_id,
        "usage": completion.usage,
        "sampling": request.sampling,
        "backend": backend.description,
        "started_at": completion.started_at,
        "latency_s": completion.latency_s,
        "attempts": completion.attempts,
        "error": completion.error,
    }


def code_fields(text: str, candidate: str) -> dict[str, Any]:
    """The code of a response (its last fenced block defining ModelNew, candidate.py), and an error where it
    does not parse: the file is written all the same, and the judge fails it, as a benchmark must count it."""
    code, extracted = extract_code(text)
    error = None
    try:
        pyast.parse(code)
    except SyntaxError as exc:
        what = "the code block" if extracted else "the response (no fenced Python block)"
        error = f"{what} is not valid Python (line {exc.lineno}: {exc.msg})"
    return {
        "candidate": candidate,
        "extracted": extracted,
        "source": code,
        "source_sha256": sha256_text(code),
        "error": error,
    }


@dataclass
class GenerateCounts:
    written: int = 0
    skipped: int = 0  # done by an earlier run
    failed: int = 0  # the request failed for good; left to do
    unparsed: int = 0  # written, but holding no valid Python
    models: set[str] = field(default_factory=set)

    def summary(self) -> str:
        models = f"; model {', '.join(sorted(self.models))}" if self.models else ""
        return (
            f"{self.written} samples written, {self.skipped} already done, {self.failed} failed (run again to "
            f"retry them), {self.unparsed} without valid Python{models}"
        )


@dataclass(frozen=True)
class GenerateSpec:
    model: str
    samples: int
    template: Template
    sampling: Sampling = Sampling()
    concurrency: int = 4

    def settings(self, kind: str = "generate") -> dict[str, Any]:
        return {
            "kind": kind,
            "model": self.model,
            "sampling": asdict(self.sampling),
            "template_sha256": self.template.sha256,
        }


def generate(
    tasks: Sequence[SelectedTask],
    backend: Backend,
    spec: GenerateSpec,
    folder: Path,
    on_sample: Callable[[SampleRecord | None], None] | None = None,
) -> GenerateCounts:
    """Ask for every sample of every task not done yet in `folder`, `spec.concurrency` at a time; each is
    recorded as it comes back (`on_sample` is called with it, or with None for one done before)."""
    with RunFolder(folder) as run:
        return fill(run, tasks, backend, spec, on_sample)


def fill(
    run: RunFolder,
    tasks: Sequence[SelectedTask],
    backend: Backend,
    spec: GenerateSpec,
    on_sample: Callable[[SampleRecord | None], None] | None,
) -> GenerateCounts:
    run.keep_settings(spec.settings())
    write_problems(tasks, run.problems)
    done = {(r.task_id, r.sample_id): r for r in read_lines(run.path / SAMPLES, SampleRecord)}
    counts = GenerateCounts()
    todo = []
    for task in tasks:
        for sample_id in range(spec.samples):
            record = done.get((task.task_id, sample_id))
            if record is None:
                todo.append((task, sample_id))
                continue
            counts.skipped += 1
            if record.candidate and record.source is not None and not (run.path / record.candidate).exists():
                run.write_candidate(record.candidate, record.source)  # deleted since: restored, not asked again
            if on_sample:
                on_sample(None)

    def one(task: SelectedTask, sample_id: int) -> SampleRecord:
        prompt = generation_prompt(spec.template, task.task.text, task.name)
        request = ChatRequest(
            ({"role": "user", "content": prompt},),
            spec.model,
            spec.sampling.for_sample(sample_id),
            task.name,
            sample_id,
        )
        completion = backend.complete(request)
        fields = exchange_fields(task, sample_id, prompt, request, completion, backend)
        if not completion.text:
            record = SampleRecord(**fields)
            run.append(FAILURES, record)
            return record
        record = SampleRecord(**{**fields, **code_fields(completion.text, f"{task.sample_stem(sample_id)}_kernel.py")})
        run.write_candidate(record.candidate or "", record.source or "")
        run.append(SAMPLES, record)
        return record

    pool = ThreadPoolExecutor(max_workers=spec.concurrency, thread_name_prefix="generate")
    try:
        for future in as_completed([pool.submit(one, task, sample_id) for task, sample_id in todo]):
            record = future.result()
            if record.response is None:
                counts.failed += 1
            else:
                counts.written += 1
                counts.unparsed += record.error is not None
                counts.models.add(record.model or "?")
            if on_sample:
                on_sample(record)
    except BaseException:  # an interrupt: nothing more is asked; the requests in flight finish or are lost
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return counts
