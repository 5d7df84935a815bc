"""Every input file is read with a bound, and the Ray backend's messages are capped.

A task, candidate or manifest that is a device, a FIFO, a directory, too large or not UTF-8 is refused
from the CLI in one line with exit code 1, within seconds (a FIFO's open must not wait for a writer). The
Ray codec's caps are tested without starting Ray.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge.cli import main
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.runs import batch
from kerneljudge.runs.backends import Job, ray_actor
from kerneljudge.runs.backends.ray import RayBackend, _Pending
from kerneljudge.runs.backends.ray_actor import (
    RemoteJudgeError,
    envelope_json,
    job_from_json,
    job_to_json,
    read_envelope,
)
from kerneljudge.runs.batch import ManifestError, read_manifest
from kerneljudge.sources.candidate import Candidate, load_candidate
from kerneljudge.sources.task import MAX_SOURCE_BYTES
from kerneljudge.tasks.load import load_task

TASK = TASKS / "tiny_bias_relu.py"
CANDIDATE = CANDIDATES / "honest_torch.py"
ANSWER_WITHIN_S = 10.0
ISOLATED_AS_BYTES = 8 * 1024**3  # a judge that read /dev/zero whole would fail here, not take the machine


def cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    """main(argv)'s exit code and stderr lines; fails rather than hangs if it has not returned in seconds."""
    if "/dev/zero" in argv:  # in a process of its own, its address space capped
        limit = (ISOLATED_AS_BYTES, ISOLATED_AS_BYTES)
        done = subprocess.run(
            [sys.executable, "-m", "kerneljudge", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, limit),
        )
        return done.returncode, done.stderr.splitlines()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(main(argv)), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(ANSWER_WITHIN_S)
    assert result, f"kerneljudge {' '.join(argv)} did not answer within {ANSWER_WITHIN_S:g} s"
    assert time.monotonic() - started < ANSWER_WITHIN_S
    return result[0], capsys.readouterr().err.splitlines()


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.py"
    os.mkfifo(path)
    return path


def hostile_files(tmp_path, fifo) -> dict[str, tuple[str, str]]:
    big = tmp_path / "big.py"
    with big.open("wb") as handle:  # 10 MB of a line repeated: sparse-free, and more than the 4 MiB cap
        handle.write(b"x = 1\n" * (10 * 1024 * 1024 // 6))
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\nx = 1\n")
    return {
        "device": ("/dev/zero", "is a character device, not a regular file"),
        "fifo": (str(fifo), "is a FIFO, not a regular file"),
        "directory": (str(tmp_path), "is a directory, not a regular file"),
        "large": (str(big), "larger than the 4 MiB cap"),
        "latin-1": (str(latin), "not UTF-8 text (byte 5"),
    }


@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "large", "latin-1"])
@pytest.mark.parametrize("role", ["task", "candidate"])
def test_a_task_or_candidate_that_is_no_source_file_is_one_line_exit_1(tmp_path, fifo, capsys, kind, role):
    path, message = hostile_files(tmp_path, fifo)[kind]
    argv = ["judge", path, str(CANDIDATE)] if role == "task" else ["judge", str(TASK), path]
    code, lines = cli([*argv, "--device", "cpu", "--no-timing"], capsys)
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith(f"kerneljudge: error: cannot read {role} ")
    assert message in lines[0]


def test_a_symlink_to_a_source_file_is_followed(tmp_path):
    link = tmp_path / "link.py"
    link.symlink_to(CANDIDATE)
    assert load_candidate(link).text == CANDIDATE.read_text()
    (tmp_path / "to_folder.py").symlink_to(tmp_path)
    with pytest.raises(UsageError, match="is a directory, not a regular file"):
        load_candidate(tmp_path / "to_folder.py")


def test_a_source_at_the_cap_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "edge.py"
    text = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    path.write_text(text + "#" * (MAX_SOURCE_BYTES - len(text) - 1) + "\n")
    assert len(load_task(path).text) == MAX_SOURCE_BYTES
    path.write_text(text + "#" * (MAX_SOURCE_BYTES - len(text)) + "\n")
    with pytest.raises(UsageError, match="larger than the 4 MiB cap"):
        load_task(path)


def test_a_manifest_that_is_a_fifo_is_one_line_exit_1(tmp_path, fifo, capsys):
    code, lines = cli(["batch", str(fifo), "--store", str(tmp_path / "s.db"), "--device", "cpu"], capsys)
    assert code == 1
    assert lines == [f"kerneljudge: error: cannot read the manifest {fifo}: it is a FIFO, not a regular file"]


def test_manifest_lines_and_size_are_capped(tmp_path, monkeypatch):
    manifest = tmp_path / "manifest.jsonl"
    good = json.dumps({"task": str(TASK), "candidate": str(CANDIDATE)})
    manifest.write_text(good + "\n" + "[" * 10_000 + "\n")
    with pytest.raises(ManifestError, match=r"line 2: not an item \(JSON nested too deeply\)"):
        read_manifest(manifest)
    manifest.write_text(good + "\n" + json.dumps({"task": "x" * batch.MAX_MANIFEST_LINE_CHARS, "candidate": "c"}))
    with pytest.raises(ManifestError, match="line 2: longer than 16384 characters"):
        read_manifest(manifest)
    manifest.write_text(good + "\n" + good + "\n")
    assert len(read_manifest(manifest)) == 2
    monkeypatch.setattr(batch, "MAX_MANIFEST_BYTES", len(good) + 1)
    with pytest.raises(ManifestError, match="cannot read the manifest .*: larger than"):
        read_manifest(manifest)


# The Ray backend's codec, without Ray.


def job(candidate_text: str = "class ModelNew: pass\n") -> Job:
    return Job(load_task(TASK), Candidate(text=candidate_text, name="c"), JudgeConfig(device="cpu"))


def test_a_job_over_the_cap_is_refused_by_its_length_on_both_sides(monkeypatch):
    text = job_to_json(job("# é ünïcode\n"))
    assert job_from_json(text).candidate.text == "# é ünïcode\n"
    monkeypatch.setattr(ray_actor, "MAX_JOB_CHARS", len(text) - 1)
    with pytest.raises(RemoteJudgeError, match=r"the job is \d+ characters of JSON, more than the \d+ allowed"):
        job_to_json(job("# é ünïcode\n"))
    with pytest.raises(RemoteJudgeError, match="the job is"):
        job_from_json(text)


def test_a_record_over_the_cap_becomes_the_judges_one_line_error(monkeypatch):
    record_json = make_record("c").model_dump_json()
    answer = read_envelope(envelope_json(["12:00:00 building"], record_json=record_json))
    assert answer.record is not None and answer.record.candidate.name == "c" and answer.stages == ["12:00:00 building"]
    monkeypatch.setattr(ray_actor, "MAX_RECORD_CHARS", len(record_json) - 1)
    answer = read_envelope(envelope_json(["x\ny"] * 1000, record_json=record_json))
    assert answer.record is None and "the record is" in answer.error and "\n" not in answer.error
    assert answer.stages == ["x"] * ray_actor.MAX_STAGES
    error = read_envelope(envelope_json([], error="Boom: " + "e" * 10_000 + "\nsecond line")).error
    assert error.startswith("Boom: e") and len(error) == ray_actor.MAX_LINE_CHARS


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "sent NoneType, not a JSON envelope"),
        ("[" * 100_000, "sent no JSON envelope"),
        ("[1, 2]", "not an envelope"),
        ('{"stages": []}', "neither a record nor an error"),
        ('{"stages": [], "record": "{}"}', "sent no valid record"),
        ("x" * (ray_actor.MAX_ENVELOPE_CHARS + 1), "sent an envelope of"),
    ],
)
def test_a_bad_envelope_is_one_line_for_its_job(text, message):
    with pytest.raises(RemoteJudgeError, match=message) as info:
        read_envelope(text)
    assert "\n" not in str(info.value)


class FakeRay:
    """What RayBackend._finish asks of Ray: `get` answers the envelope text sent for a reference."""

    class RayError(Exception):
        pass

    class RayActorError(RayError):
        pass

    exceptions = SimpleNamespace(RayError=RayError, RayActorError=RayActorError)

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers

    def get(self, ref: str) -> object:
        return self.answers[ref]


def driver(answers: dict[str, object]) -> RayBackend:
    """A RayBackend's driver state without a cluster: one lane actor, `answers` in flight."""
    backend = RayBackend.__new__(RayBackend)
    backend._ray = FakeRay(answers)
    backend._cond = threading.Condition()
    backend._free = {"lane0": 0}
    backend._inflight = {ref: (_Pending("{}", lambda text: None, [Future()]), "lane0") for ref in answers}
    return backend


def test_the_driver_fails_only_the_job_whose_envelope_is_too_long(monkeypatch):
    good = envelope_json([], record_json=make_record("c").model_dump_json())
    monkeypatch.setattr(ray_actor, "MAX_ENVELOPE_CHARS", len(good))
    backend = driver({"long": good + " ", "good": good})
    futures = {ref: pending.futures[0] for ref, (pending, _) in backend._inflight.items()}
    for ref in ["long", "good"]:
        backend._finish(ref)
    with pytest.raises(RemoteJudgeError, match=r"^lane0 sent an envelope of \d+ characters, more than"):
        futures["long"].result(0)
    assert futures["good"].result(0).candidate.name == "c"
    assert backend._free == {"lane0": 2}


def test_a_job_too_long_to_send_fails_its_future_not_the_submitter(monkeypatch):
    monkeypatch.setattr(ray_actor, "MAX_JOB_CHARS", 100)
    backend = RayBackend.__new__(RayBackend)
    future = backend.submit(job())
    with pytest.raises(RemoteJudgeError, match="not sent to a lane: the job is"):
        future.result(0)
