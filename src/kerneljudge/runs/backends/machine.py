"""Where lanes are: the GPUs a worker could be given, the lanes on them, and the machine's fingerprint as a
judgment records it (its environment digest, the store key's fourth field, known before judging).

`batch`, `serve` and every backend ask here (docs/batch.md, "Lanes: every local GPU"; docs/serve.md).
"""

from __future__ import annotations

from typing import Any

from kerneljudge import protocol
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import KernelJudgeError, UsageError


class ProbeError(KernelJudgeError):
    """No worker could be started to fingerprint this machine, so no item's key is known."""


def machine_environment(config: JudgeConfig, gpu: str | None = None) -> dict[str, Any]:
    """This machine's fingerprint as a judgment under `config` records it; its key fields are exact.

    What the workers see depends on the device asked for: on `--device cpu` they
    see no GPU (CUDA_VISIBLE_DEVICES is emptied), so the records carry no GPU name
    even on a GPU machine. Then every key field is known here without a worker:
    the workers run this interpreter with this torch and read Triton's version
    from its metadata. Otherwise the GPU name is the CUDA runtime's, which the
    parent never initializes, so a bare reference worker is started and asked.
    """
    from kerneljudge.judgment.env import fingerprint, host_fingerprint

    if config.device == "cpu":
        return host_fingerprint()
    return fingerprint(probe_hello(config, gpu))


def probe_hello(config: JudgeConfig, gpu: str | None = None) -> protocol.Hello:
    """The hello of a bare reference worker started as the pipeline starts one (same device, sandbox, GPU)."""
    from kerneljudge.judgment.env import greeting, probe
    from kerneljudge.sandbox import confine
    from kerneljudge.sandbox.talk import WorkerFailure

    try:
        frame, _ = probe(config.device, confine.policy_for(config.sandbox), config.timeout_s, gpu)
    except (confine.SandboxUnavailable, OSError) as exc:
        raise ProbeError(f"cannot start a worker to fingerprint this machine: {exc}") from None
    except WorkerFailure as exc:
        raise ProbeError(f"the probe worker did not start: {exc}; `kerneljudge env` shows what is missing") from None
    hello = greeting(frame)
    if hello is None:
        raise ProbeError("the probe worker did not say hello; `kerneljudge env` shows what is missing")
    return hello


def visible_gpus() -> list[str]:
    """The GPUs a worker could be given: CUDA_VISIBLE_DEVICES's entries where set, else NVML's indices."""
    import os

    from kerneljudge.sandbox.gpu_memory import open_nvml

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip() and entry.strip() != "-1"]
    _, handles, _ = open_nvml()
    return [str(index) for index in range(len(handles))]


def lanes_for(device: str, gpus: str | None, jobs: int) -> list[str | None]:
    """`jobs` lanes per GPU (`gpus`: "all" or a comma list of visible ones), or `jobs` lanes on the CPU or on
    the inherited device.

    A lane is the GPU its judgments' workers see (CUDA_VISIBLE_DEVICES), or None for the CPU or for lanes
    that keep the inherited view. Lanes of several GPUs alternate (0, 1, 0, 1, ...), so the first items
    of the queue spread over every GPU.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    visible = visible_gpus() if device != "cpu" else []
    if gpus is None or device == "cpu" or not visible:
        if gpus not in (None, "all"):
            raise UsageError(f"--gpus {gpus}: no GPU is visible here" + (" (--device cpu)" if device == "cpu" else ""))
        return [None] * jobs
    chosen = visible if gpus == "all" else [entry.strip() for entry in gpus.split(",") if entry.strip()]
    unknown = [entry for entry in chosen if entry not in visible]
    if unknown or not chosen:
        raise UsageError(f"--gpus {gpus}: {', '.join(unknown) or 'nothing'} not among the visible GPUs {visible}")
    return list(dict.fromkeys(chosen)) * jobs
