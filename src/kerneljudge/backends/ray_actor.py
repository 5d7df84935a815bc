"""The Ray backend's side on each GPU (backends/ray.py is the driver's): a job as plain JSON, the form in
which it crosses to an actor and back into a `Job` there, and the actor (`GpuJudge`) that judges it on a
`LocalBackend`. Importing this module does not import Ray; only `GpuJudge.where`, run inside an actor, does.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

from kerneljudge.backends import Job


def job_to_json(job: Job) -> str:
    """A job as the actor receives it: plain JSON of texts, names, paths and the configuration's values."""
    return json.dumps({"task": asdict(job.task), "candidate": asdict(job.candidate), "config": job.config.to_dict()})


def job_from_json(text: str) -> Job:
    """The job `job_to_json` wrote; the texts, and so their content hashes, are unchanged."""
    from kerneljudge.candidate import Candidate
    from kerneljudge.config import JudgeConfig
    from kerneljudge.tasks.source import Task

    data = json.loads(text)
    return Job(Task(**data["task"]), Candidate(**data["candidate"]), JudgeConfig.from_mapping(data["config"]))


class GpuJudge:
    """The actor on one GPU (made remote by `RayBackend`): a `LocalBackend` of `jobs_per_gpu` lanes."""

    def __init__(self, jobs_per_gpu: int, cached_baselines: bool) -> None:
        from kerneljudge.backends.local import LocalBackend

        self.backend = LocalBackend([None] * jobs_per_gpu, cached_baselines=cached_baselines)

    def where(self) -> str:
        """The node's address and the GPU Ray gave this actor, for progress lines."""
        import ray

        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
        return f"node {ray.util.get_node_ip_address()}, GPU {gpus}"

    def environment(self, config_json: str) -> str:
        """This node's fingerprint as a judgment under the configuration records it (`machine_environment`)."""
        from kerneljudge.backends.machine import machine_environment
        from kerneljudge.config import JudgeConfig

        return json.dumps(machine_environment(JudgeConfig.from_mapping(json.loads(config_json))))

    def judge(self, job_json: str) -> str:
        """An envelope: {"record": record JSON} or {"error": one line}, and the stages seen, with their times."""
        stages: list[str] = []
        try:
            job = job_from_json(job_json)
            future = self.backend.submit(job, lambda text: stages.append(f"{time.strftime('%H:%M:%S')} {text}"))
            return json.dumps({"record": future.result().model_dump_json(), "stages": stages})
        except Exception as exc:  # the judge's own fault, sent back as text: the driver raises it
            return json.dumps({"error": f"{type(exc).__name__}: {exc}", "stages": stages})
