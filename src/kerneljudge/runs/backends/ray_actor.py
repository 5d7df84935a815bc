"""The Ray backend's side on each GPU (runs/backends/ray.py is the driver's): a job as plain JSON, the form in
which it crosses to an actor and back into a `Job` there, the envelope a record comes back in, and the actor
(`GpuJudge`) that judges it on a `LocalBackend`. Importing this module does not import Ray; only
`GpuJudge.where`, run inside an actor, does.

Every message is bounded on both sides: a job or an envelope over its cap is refused by its length before
it is parsed, and becomes a `RemoteJudgeError` for that job alone (docs/security.md, "Bounded inputs").
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from kerneljudge.errors import KernelJudgeError
from kerneljudge.runs.backends import GroupJob, Job

if TYPE_CHECKING:
    from kerneljudge.results.verdict import Record

# A job carries two source texts, each at most 4 MiB from a file (sources/task.py MAX_SOURCE_BYTES) or
# 512 KiB from the server; JSON escaping (ensure_ascii off) at most doubles ordinary text.
MAX_JOB_CHARS = 16 * 1024 * 1024
# A record is a few hundred KiB at most (its worker logs are tails, its trials a bounded list); the cap is
# far above any honest one. The record travels as a JSON string inside the envelope: escaping at most
# doubles it, and the stage lines add at most MAX_STAGES * MAX_LINE_CHARS.
MAX_RECORD_CHARS = 8 * 1024 * 1024
MAX_STAGES = 500
MAX_LINE_CHARS = 500
MAX_ENVELOPE_CHARS = 2 * MAX_RECORD_CHARS + 2 * MAX_STAGES * MAX_LINE_CHARS + 1024
# A group is judged on one actor (its records come back together): its task and candidates as one job, its records
# as a list of envelopes; each bounded per candidate as a job and an envelope are.
MAX_GROUP = 64


class RemoteJudgeError(KernelJudgeError):
    """The judge itself failed on a lane of the cluster (not the candidate: that is a record)."""


@dataclass(frozen=True)
class Envelope:
    """What an actor answered for one job: the stages it saw, and a record or the judge's one-line error."""

    stages: list[str]
    record: Record | None = None
    error: str | None = None


def job_to_json(job: Job) -> str:
    """A job as the actor receives it: plain JSON of texts, names, paths and the configuration's values;
    `RemoteJudgeError` if it is longer than MAX_JOB_CHARS."""
    text = json.dumps(
        {"task": asdict(job.task), "candidate": asdict(job.candidate), "config": job.config.to_dict()},
        ensure_ascii=False,
    )
    _require_short_job(text)
    return text


def job_from_json(text: str) -> Job:
    """The job `job_to_json` wrote; the texts, and so their content hashes, are unchanged."""
    from kerneljudge.config import JudgeConfig
    from kerneljudge.sources.candidate import Candidate
    from kerneljudge.sources.task import Task

    _require_short_job(text)
    data = json.loads(text)
    return Job(Task(**data["task"]), Candidate(**data["candidate"]), JudgeConfig.from_mapping(data["config"]))


def group_to_json(group: GroupJob) -> str:
    """A group as the actor receives it: one task, its candidates and the configuration, as `job_to_json` writes a
    job; `RemoteJudgeError` past MAX_GROUP candidates or MAX_JOB_CHARS a candidate."""
    if not 0 < len(group.candidates) <= MAX_GROUP:
        raise RemoteJudgeError(f"a group sent to a lane holds 1 to {MAX_GROUP} candidates, not {len(group.candidates)}")
    text = json.dumps(
        {
            "task": asdict(group.task),
            "candidates": [asdict(candidate) for candidate in group.candidates],
            "config": group.config.to_dict(),
        },
        ensure_ascii=False,
    )
    _require_short_job(text, len(group.candidates))
    return text


def group_from_json(text: str) -> GroupJob:
    """The group `group_to_json` wrote."""
    from kerneljudge.config import JudgeConfig
    from kerneljudge.sources.candidate import Candidate
    from kerneljudge.sources.task import Task

    _require_short_job(text, MAX_GROUP)
    data = json.loads(text)
    candidates = tuple(Candidate(**candidate) for candidate in data["candidates"][: MAX_GROUP + 1])
    if not 0 < len(candidates) <= MAX_GROUP:
        raise RemoteJudgeError(f"a group holds 1 to {MAX_GROUP} candidates, not {len(candidates)}")
    return GroupJob(Task(**data["task"]), candidates, JudgeConfig.from_mapping(data["config"]))


def envelope_json(stages: list[str], record_json: str | None = None, error: str | None = None) -> str:
    """The actor's answer: the record's JSON, or the judge's error as one line when there is none or it is
    longer than MAX_RECORD_CHARS; the stages, at most MAX_STAGES lines of at most MAX_LINE_CHARS."""
    if record_json is not None and len(record_json) > MAX_RECORD_CHARS:
        error = f"the record is {len(record_json)} characters of JSON, more than the {MAX_RECORD_CHARS} allowed"
        record_json = None
    answer: dict[str, object] = {"stages": [one_line(stage) for stage in stages[:MAX_STAGES]]}
    if record_json is not None:
        answer["record"] = record_json
    else:
        answer["error"] = one_line(error or "no record and no error")
    return json.dumps(answer, ensure_ascii=False)


def read_envelopes(text: object, count: int) -> list[Envelope]:
    """A group's answer from its actor: `count` envelopes, each checked as `read_envelope` checks one;
    `RemoteJudgeError` where the answer is not a JSON list of that many, or longer than they may be."""
    if not isinstance(text, str):
        raise RemoteJudgeError(f"sent {type(text).__name__}, not a JSON list of envelopes")
    if len(text) > count * (MAX_ENVELOPE_CHARS + 16):
        raise RemoteJudgeError(f"sent {len(text)} characters for a group of {count}, more than allowed")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RemoteJudgeError(f"sent no JSON list of envelopes: {one_line(str(exc))}") from None
    if not isinstance(data, list) or len(data) != count or not all(isinstance(item, str) for item in data):
        raise RemoteJudgeError(f"sent no list of {count} envelopes")
    return [read_envelope(item) for item in data]


def read_envelope(text: object) -> Envelope:
    """An actor's answer, checked: `RemoteJudgeError` when it is not a string of at most MAX_ENVELOPE_CHARS,
    not an envelope, or holds no valid record and no error."""
    from kerneljudge.results.verdict import Record

    if not isinstance(text, str):
        raise RemoteJudgeError(f"sent {type(text).__name__}, not a JSON envelope")
    if len(text) > MAX_ENVELOPE_CHARS:
        raise RemoteJudgeError(
            f"sent an envelope of {len(text)} characters, more than the {MAX_ENVELOPE_CHARS} allowed"
        )
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RemoteJudgeError(f"sent no JSON envelope: {one_line(str(exc))}") from None
    if not isinstance(data, dict) or not isinstance(data.get("stages", []), list):
        raise RemoteJudgeError("sent JSON that is not an envelope")
    stages = [one_line(str(stage)) for stage in data.get("stages", [])[:MAX_STAGES]]
    if "error" in data:
        return Envelope(stages, error=one_line(str(data["error"])))
    record_json = data.get("record")
    if not isinstance(record_json, str):
        raise RemoteJudgeError("sent an envelope with neither a record nor an error")
    if len(record_json) > MAX_RECORD_CHARS:
        raise RemoteJudgeError(
            f"sent a record of {len(record_json)} characters, more than the {MAX_RECORD_CHARS} allowed"
        )
    try:
        return Envelope(stages, record=Record.model_validate_json(record_json))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise RemoteJudgeError(f"sent no valid record: {one_line(str(exc))}") from None


def one_line(text: str) -> str:
    """The first non-empty line of `text`, at most MAX_LINE_CHARS long."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= MAX_LINE_CHARS else first[: MAX_LINE_CHARS - 3] + "..."


def _require_short_job(text: str, candidates: int = 1) -> None:
    if len(text) > candidates * MAX_JOB_CHARS:
        allowed = candidates * MAX_JOB_CHARS
        raise RemoteJudgeError(f"the job is {len(text)} characters of JSON, more than the {allowed} allowed")


class GpuJudge:
    """The actor on one GPU (made remote by `RayBackend`): a `LocalBackend` of `jobs_per_gpu` lanes."""

    def __init__(self, jobs_per_gpu: int, cached_baselines: bool) -> None:
        from kerneljudge.runs.backends.local import LocalBackend

        self.backend = LocalBackend([None] * jobs_per_gpu, cached_baselines=cached_baselines)

    def where(self) -> str:
        """The node's address and the GPU Ray gave this actor, for progress lines."""
        import ray

        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
        return f"node {ray.util.get_node_ip_address()}, GPU {gpus}"

    def environment(self, config_json: str) -> str:
        """This node's fingerprint as a judgment under the configuration records it (`machine_environment`)."""
        from kerneljudge.config import JudgeConfig
        from kerneljudge.runs.backends.machine import machine_environment

        return json.dumps(machine_environment(JudgeConfig.from_mapping(json.loads(config_json))))

    def judge(self, job_json: str) -> str:
        """An envelope (`envelope_json`): the record, or the judge's error as one line, and the stages seen."""
        stages: list[str] = []
        try:
            job = job_from_json(job_json)
            future = self.backend.submit(job, lambda text: stages.append(f"{time.strftime('%H:%M:%S')} {text}"))
            return envelope_json(stages, record_json=future.result().model_dump_json())
        except Exception as exc:  # the judge's own fault, sent back as text: the driver raises it
            return envelope_json(stages, error=f"{type(exc).__name__}: {exc}")

    def judge_group(self, group_json: str) -> str:
        """A JSON list of envelopes, one per candidate of the group in its order, once the group is judged on one
        of this actor's lanes (`LocalBackend.submit_group`); the stages go with the first."""
        stages: list[str] = []
        try:
            group = group_from_json(group_json)
        except Exception as exc:
            return json.dumps([envelope_json(stages, error=f"{type(exc).__name__}: {exc}")])
        futures = self.backend.submit_group(group, lambda text: stages.append(f"{time.strftime('%H:%M:%S')} {text}"))
        answers = []
        for index, future in enumerate(futures):
            seen = stages if index == 0 else []
            try:
                answers.append(envelope_json(seen, record_json=future.result().model_dump_json()))
            except Exception as exc:
                answers.append(envelope_json(seen, error=f"{type(exc).__name__}: {exc}"))
        return json.dumps(answers)
