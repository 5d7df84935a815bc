"""Shared test helpers: paths to fixtures and a judge call that validates every record it returns."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import jsonschema

from kerneljudge import JudgeConfig, __version__, judge, protocol
from kerneljudge.judgment.env import fingerprint
from kerneljudge.results.reward import rewards_for
from kerneljudge.results.verdict import Correctness, Identity, Record, Timing, TimingStats

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REDTEAM = ROOT / "src" / "kerneljudge" / "redteam"


class FixtureDirs:
    """`DIRS / name`: the first of several folders that holds the file (test faults here, red-team hacks packaged)."""

    def __init__(self, *folders: Path, renames: dict[str, str] | None = None) -> None:
        self.folders = folders
        self.renames = renames or {}

    def __truediv__(self, name: str) -> Path:
        name = self.renames.get(name, name)
        return next((f / name for f in self.folders if (f / name).exists()), self.folders[0] / name)


TASKS = FixtureDirs(FIXTURES / "tasks", REDTEAM / "tasks", renames={"tiny_bias_relu.py": "bias_relu.py"})
CANDIDATES = FixtureDirs(FIXTURES / "candidates", REDTEAM / "fixtures")
EXAMPLES = ROOT / "examples"
SCHEMA_PATH = ROOT / "docs" / "schema" / "record.schema.json"

_validator = None


def run_all(*targets, message: str = "a lane never got through the gate") -> None:
    """Run each of `targets` in a thread of its own and join them all, failing where one is still running after
    20 s (a lane that waits for ever)."""
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(thread.is_alive() for thread in threads), message


def malformed_family_task(folder: Path) -> Path:
    """family_bias_relu.py with a typo in its family (an axis named `widht`, which the task does not define)."""
    text = (TASKS / "family_bias_relu.py").read_text().replace('"width": [', '"widht": [')
    assert '"widht"' in text
    path = folder / "family_malformed.py"
    path.write_text(text)
    return path


def validate_record(record: Record) -> dict:
    """Validate a record's JSON against the published schema (not the models that wrote it)."""
    global _validator
    if _validator is None:
        schema = json.loads(SCHEMA_PATH.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _validator = jsonschema.Draft202012Validator(schema)
    data = json.loads(record.to_json())
    _validator.validate(data)
    return data


def run_judge(task: str | Path, candidate: str | Path, **overrides) -> Record:
    """Judge on the CPU without timing unless asked; every record is schema-checked.

    The policy defaults to practical because most fixtures are plain torch; strict is asked for explicitly.
    """
    gpu = overrides.pop("gpu", None)  # a batch lane's GPU (not a configuration field)
    settings = {"device": "cpu", "timing": False, "timeout_s": 60.0, "policy": "practical", **overrides}
    record = judge(task, candidate, JudgeConfig(**settings), gpu=gpu)
    validate_record(record)
    return record


def probes(record: Record, word: str) -> list[str]:
    """The candidate's PROBE lines that contain `word` (e.g. the success marker of an attempt)."""
    lines = record.logs["candidate"].stdout_tail.splitlines()
    return [line for line in lines if line.startswith("PROBE") and word in line]


def answered(record: Record) -> bool:
    """The candidate's answer was judged: a pass, or a pass flagged for what its source does (file or socket use)."""
    return record.status in ("PASS", "SUSPICIOUS") and record.failure is None and record.valid


def hello_frame(**fields) -> protocol.Hello:
    """A worker's hello as the parent decodes it (protocol.Hello): a CPU reference worker's, with `fields` set."""
    frame = {"role": "reference", "pid": 1, "python": "3.12.0", "torch": "2.11.0", "cuda_available": False}
    return protocol.Hello(**{**frame, "device": "cpu", "flags": {}, **fields})


def make_record(candidate: str = "c0", status: str = "PASS", speedup: float | None = None, **changes) -> Record:
    """A complete record without judging anything; `changes` replace top-level fields."""
    stats = TimingStats(median_ms=1, p95_ms=1, min_ms=1, max_ms=1, mean_ms=1, cv=0.01, count=3, samples_ms=[1, 1, 1])
    timing = (
        Timing(measured=True, candidate=stats, reference=stats, speedup=speedup, speedup_interval=[1.5, 2.5])
        if speedup is not None
        else Timing(measured=False, reason="timing disabled by configuration")
    )
    fields = {
        "kerneljudge_version": __version__,
        "created_at": "2025-01-01T00:00:00+00:00",
        "task": Identity(sha256=hashlib.sha256(b"task").hexdigest(), name="task", path="tasks/task.py"),
        "candidate": Identity(sha256=hashlib.sha256(candidate.encode()).hexdigest(), name=candidate),
        "config": JudgeConfig(device="cpu", timing=False).to_dict(),
        "device": "cpu",
        "status": status,
        "verified": status == "PASS",
        "valid": status != "ERROR",
        "failure_kind": "tolerance" if status == "FAIL" else None,
        "correctness": Correctness(checked=True, passed=status == "PASS", method="oracle"),
        "timing": timing,
        "environment": fingerprint(hello_frame(torch="2.5.0", triton="3.1.0")),
        "duration_s": 1.0,
        **changes,
    }
    record = Record(**fields)
    record.rewards = rewards_for(record)
    return record


def allow_descriptors_past(number: int) -> None:
    """Raise this process's open-file limit past `number` (a test that dups a descriptor there), or skip the test
    where the hard limit does not allow it."""
    import resource

    import pytest

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft > number:
        return
    if hard != resource.RLIM_INFINITY and hard <= number:
        pytest.skip(f"descriptors limited to {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(2048, number + 1), hard))


def cpu_red_team(mode: str) -> list:
    """The red-team suite judged on the CPU in `mode` (two lanes), with what every mode must show: each fixture's
    expectation matched, the CUDA-only fixtures skipped, every honest one passing and no hack verified."""
    from kerneljudge.redteam.runner import run_suite
    from kerneljudge.redteam.suite import FIXTURES

    outcomes, skipped = run_suite("cpu", mode, jobs=2)
    mismatched = [o for o in outcomes if not o.matched]
    assert not mismatched, mismatched
    assert set(skipped) == {f.name for f in FIXTURES if f.cuda_only}
    assert all(o.status == "PASS" for o in outcomes if o.attack == "honest")
    assert not any(o.verified for o in outcomes if o.attack != "honest")
    return outcomes
