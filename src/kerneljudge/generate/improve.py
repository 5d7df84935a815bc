"""`improve`: the repair loop. Ask the model, judge what it wrote, send the verdict's explanation back
(kerneljudge.results.explain), and again, up to K rounds or until a round is verified (docs/generate.md).

One chain per task and sample, each a conversation: the first prompt, the model's answer, the feedback on
it, the next answer. Every round is a line of `rounds.jsonl` (generate/records.py: the prompt it added, the
response, the code and its file `round_R/level_L_problem_P_sample_S_kernel.py`, the verdict in brief, the
explanation, the reward, and on the last round why the chain stopped), and every judgment goes into the
results store when one is given. Each `round_R/` folder is a KernelBench run folder over `problems/`.

A chain stops when its candidate is verified, when its K rounds are spent, or when the judge could not
judge it (ERROR or UNSUPPORTED: the judge's failure, never sent to the model as if it were the model's).
Resuming rebuilds each unfinished chain's conversation from its rounds and goes on at the next round; a
chain that ran out of rounds goes on when `--rounds` is raised. Judgments run `judge_jobs` at a time while
the other chains wait on the model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.config import JudgeConfig
from kerneljudge.errors import KernelJudgeError
from kerneljudge.generate.client import Backend, ChatRequest
from kerneljudge.generate.datasets import SelectedTask, write_problems
from kerneljudge.generate.prompts import Template, feedback_prompt, generation_prompt
from kerneljudge.generate.records import RoundRecord, Stop, Verdict, read_lines
from kerneljudge.generate.run import FAILURES, GenerateSpec, RunFolder, code_fields, exchange_fields
from kerneljudge.results.explain import explain
from kerneljudge.results.reward import REWARD_V2
from kerneljudge.results.verdict import Record
from kerneljudge.sources.candidate import load_candidate

ROUNDS = "rounds.jsonl"
FINAL: tuple[Stop, ...] = ("verified", "judge_error", "unsupported")


@dataclass(frozen=True)
class ImproveSpec:
    generation: GenerateSpec  # model, chains per task (samples), first prompt, sampling, concurrency
    rounds: int
    feedback: Template
    config: JudgeConfig
    store: Path | None = None
    judge_jobs: int = 1


@dataclass
class ImproveCounts:
    chains: int = 0
    verified: int = 0
    rounds_judged: int = 0
    failed: int = 0  # a request failed for good: the chain is left to resume
    skipped: int = 0  # finished by an earlier run

    def summary(self) -> str:
        return (
            f"{self.chains} chains: {self.verified} verified, {self.rounds_judged} rounds judged this run, "
            f"{self.skipped} finished before, {self.failed} interrupted by a failed request (run again)"
        )


def finished(history: Sequence[RoundRecord], rounds: int) -> bool:
    last = history[-1] if history else None
    return last is not None and (last.stop in FINAL or last.round >= rounds)


def stop_reason(record: Record | None, round_: int, rounds: int) -> Stop | None:
    if record is None or record.status == "ERROR":
        return "judge_error"
    if record.status == "UNSUPPORTED":
        return "unsupported"
    if record.verified:
        return "verified"
    return "rounds_exhausted" if round_ >= rounds else None


class Improver:
    """The loop's shared parts: the run folder, the backend, the judge's gate and the store."""

    def __init__(self, backend: Backend, spec: ImproveSpec, run: RunFolder) -> None:
        self.backend, self.spec, self.run = backend, spec, run
        self.judging = threading.Semaphore(spec.judge_jobs)
        self.storing = threading.Lock()
        self.judged = 0

    def judge(self, task: SelectedTask, path: Path) -> tuple[Record | None, str]:
        """The record of one round's candidate (stored), and its explanation for the model."""
        from kerneljudge.judgment.pipeline import judge

        try:
            with self.judging:
                record = judge(task.task, load_candidate(path), self.spec.config)
        except KernelJudgeError as exc:  # the judge could not start: not the model's to fix
            return None, f"ERROR: the judge could not judge this candidate: {exc}"
        with self.storing:
            self.judged += 1
        if self.spec.store is not None:
            from kerneljudge.results.store import Store

            with self.storing, Store(self.spec.store) as store:
                store.put(record)
        return record, explain(record)

    def chain(self, task: SelectedTask, sample_id: int, history: list[RoundRecord]) -> RoundRecord | None:
        """Run a chain from where `history` left it; its last round, or None when a request failed for good."""
        spec, gen = self.spec, self.spec.generation
        messages: list[dict[str, str]] = []
        for done in history:
            messages += [
                {"role": "user", "content": done.prompt},
                {"role": "assistant", "content": done.response or ""},
            ]
        if history:
            last = history[-1]
            status = last.verdict.status if last.verdict else "ERROR"
            prompt = feedback_prompt(spec.feedback, last.explanation or "", status, last.round, spec.rounds, task.name)
        else:
            prompt = generation_prompt(gen.template, task.task.text, task.name)
        record: RoundRecord | None = None
        for round_ in range(len(history) + 1, spec.rounds + 1):
            messages.append({"role": "user", "content": prompt})
            request = ChatRequest(
                tuple(messages), gen.model, gen.sampling.for_sample(sample_id), task.name, sample_id, round_
            )
            completion = self.backend.complete(request)
            fields = exchange_fields(task, sample_id, prompt, request, completion, self.backend)
            if not completion.text:
                self.run.append(FAILURES, RoundRecord(**fields, round=round_))
                return None
            code = code_fields(completion.text, f"round_{round_}/{task.sample_stem(sample_id)}_kernel.py")
            self.run.write_candidate(code["candidate"], code["source"])
            judged, explanation = self.judge(task, self.run.path / code["candidate"])
            reward = judged.reward(REWARD_V2) if judged is not None else None
            record = RoundRecord(
                **{**fields, **code},
                round=round_,
                verdict=None
                if judged is None
                else Verdict(
                    status=judged.status,
                    verified=judged.verified,
                    failure_kind=judged.failure_kind,
                    speedup=judged.timing.speedup,
                    candidate_sha256=judged.candidate.sha256,
                    record_created_at=judged.created_at,
                ),
                explanation=explanation,
                reward=reward.value if reward is not None else None,
                reward_spec=reward.spec if reward is not None else None,
                stop=stop_reason(judged, round_, spec.rounds),
            )
            self.run.append(ROUNDS, record)
            if record.stop is not None:
                return record
            messages.append({"role": "assistant", "content": completion.text})
            prompt = feedback_prompt(
                spec.feedback,
                explanation,
                record.verdict.status if record.verdict else "ERROR",
                round_,
                spec.rounds,
                task.name,
            )
        return record


def improve(
    tasks: Sequence[SelectedTask],
    backend: Backend,
    spec: ImproveSpec,
    folder: Path,
    on_chain: Callable[[RoundRecord | None], None] | None = None,
) -> ImproveCounts:
    """Run (or resume) every chain of every task in `folder`; `on_chain` gets each chain's last round (None for
    a chain finished before or interrupted by a failed request)."""
    with RunFolder(folder) as run:
        return repair(run, tasks, backend, spec, on_chain)


def repair(
    run: RunFolder,
    tasks: Sequence[SelectedTask],
    backend: Backend,
    spec: ImproveSpec,
    on_chain: Callable[[RoundRecord | None], None] | None,
) -> ImproveCounts:
    config = spec.config
    run.keep_settings(
        {
            **spec.generation.settings("improve"),
            "feedback_sha256": spec.feedback.sha256,
            "judge": {"device": config.device, "mode": config.mode, "policy": config.policy},
        }
    )
    write_problems(tasks, run.problems)
    histories: dict[tuple[str, int], list[RoundRecord]] = {}
    for record in read_lines(run.path / ROUNDS, RoundRecord):
        histories.setdefault((record.task_id, record.sample_id), []).append(record)
    improver, counts = Improver(backend, spec, run), ImproveCounts()
    todo = []
    for task in tasks:
        for sample_id in range(spec.generation.samples):
            history = sorted(histories.get((task.task_id, sample_id), []), key=lambda r: r.round)
            counts.chains += 1
            if finished(history, spec.rounds):
                counts.skipped += 1
                counts.verified += history[-1].stop == "verified"
                if on_chain:
                    on_chain(None)
            else:
                todo.append((task, sample_id, history))
    pool = ThreadPoolExecutor(max_workers=spec.generation.concurrency, thread_name_prefix="improve")
    try:
        for future in as_completed([pool.submit(improver.chain, *item) for item in todo]):
            last = future.result()
            counts.failed += last is None
            counts.verified += last is not None and last.stop == "verified"
            if on_chain:
                on_chain(last)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    counts.rounds_judged = improver.judged
    return counts
