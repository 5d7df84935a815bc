"""Judging a group (judgment/group.py): the candidates of one task judged with one hidden plan and one reference
worker lent to each in turn; every record as the candidate's single judgment makes it, and nothing of one candidate
within the next one's reach."""

import json
import os
import sys
from pathlib import Path

import pytest

from helpers import EXAMPLES, ROOT, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment import group as group_module
from kerneljudge.judgment.group import GroupSource, judge_group
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages import shared_reference
from kerneljudge.protocol import channel

sys.path.insert(0, str(ROOT / "scripts"))
from record_parity import differences, normalized  # noqa: E402

TASK = EXAMPLES / "softmax" / "reference.py"  # BATCH and WIDTH globals: a family derived from them
CONFIG = JudgeConfig(device="cpu", timing=False, timeout_s=90.0, policy="practical")
KEY = bytes(range(32))

HONEST = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
"""
# Right at the public width only: the hidden shapes catch it, after which the reference was at another shape.
PUBLIC_WIDTH_ONLY = HONEST.replace(
    "        return torch.softmax(x, dim=-1)",
    "        if x.shape[-1] != 1000:\n            return torch.zeros_like(x)\n        return torch.softmax(x, dim=-1)",
)
# The first 512 columns only (the example's wrong Triton kernel, in torch): fails the first trial.
CAPPED = HONEST.replace(
    "        return torch.softmax(x, dim=-1)",
    "        out = torch.zeros_like(x)\n        out[:, :512] = torch.softmax(x[:, :512], dim=-1)\n        return out",
)

MARKER = b"KJ-GROUP-MARKER-7f3a"
CHANNEL_READER = """
import os
import sys

def channel_fds():
    return [int(a.split(":")[1]) for a in sys.argv if a.startswith(("candidate_in:", "candidate_out:"))]
"""
# Leaves a marker in its outbox, far past its outputs, at every call.
LEAVES_A_MARKER = CHANNEL_READER + HONEST.replace(
    "        return torch.softmax(x, dim=-1)",
    "        out = torch.softmax(x, dim=-1)\n"
    "        fd = [int(a.split(':')[1]) for a in sys.argv if a.startswith('candidate_out:')][0]\n"
    f"        os.pwrite(fd, {MARKER!r}, 64 * 1024 * 1024)\n"
    "        return out",
)
# Looks for the marker in both its channels as it is imported, and answers wrongly where it finds it.
LOOKS_FOR_THE_MARKER = (
    CHANNEL_READER
    + f"""
def found():
    for fd in channel_fds():
        position = 0
        while True:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            while start < end:
                if {MARKER!r} in os.pread(fd, min(end - start, 1 << 24), start):
                    return True
                start += 1 << 24
            position = end
    return False

FOUND = found()
"""
    + HONEST.replace("return torch.softmax(x, dim=-1)", "return torch.softmax(x, dim=-1) + float(FOUND)")
)


def written(folder: Path, **texts: str) -> list[Path]:
    paths = []
    for name, text in texts.items():
        path = folder / f"{name}.py"
        path.write_text(text)
        paths.append(path)
    return paths


def comparable(record) -> dict:
    """A record less what differs between two runs of the same judgment (times, paths, the sandbox's uids) and
    what says where its workers came from."""
    data = normalized(json.loads(record.to_json()))
    for key in ("workers", "logs"):
        data.pop(key, None)
    return data


class Spied(shared_reference.SharedReference):
    made: list["Spied"] = []

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        Spied.made.append(self)


@pytest.fixture
def spied(monkeypatch):
    Spied.made = []
    monkeypatch.setattr(group_module, "SharedReference", Spied)
    return Spied.made


def test_every_record_of_a_group_is_the_candidates_single_judgment(tmp_path, spied):
    # The first derives the task's family and fails at a hidden shape, leaving the reference there; the second fails
    # at the first trial, before any family is derived; the third goes through every stage.
    candidates = written(tmp_path, public_width_only=PUBLIC_WIDTH_ONLY, capped=CAPPED, honest=HONEST)
    grouped = judge_group(TASK, candidates, CONFIG, key=KEY)
    singles = [judge(TASK, candidate, CONFIG, rng=GroupSource(KEY)) for candidate in candidates]
    assert [r.status for r in grouped] == ["FAIL", "FAIL", "PASS"]
    assert [r.failure_kind for r in grouped] == ["tolerance", "tolerance", None]
    assert grouped[0].failure.phase.startswith("correctness (shape trial")  # it reached the hidden shapes
    assert grouped[0].correctness.shape_family is not None and grouped[1].correctness.shape_family is None
    for one, alone in zip(grouped, singles, strict=True):
        validate_record(one)
        assert differences(comparable(one), comparable(alone)) == [], one.candidate.name
        assert one.workers.checked == "group" and alone.workers.checked == "started"
    assert [r.workers.group.index for r in grouped] == [0, 1, 2]
    assert len({r.workers.group.id for r in grouped}) == 1 and grouped[0].workers.group.size == 3
    (shared,) = spied
    assert (shared.started, shared.lends, shared.retired) == (1, 3, [])  # one reference, greeted once
    assert shared.worker is None  # ended with the group
    for later in grouped[1:]:  # its start and hello were the first judgment's
        assert later.stages_s["build.reference.hello"] < 0.1 < grouped[0].stages_s["build.reference.hello"]
    # The first judgment ran every trial of the reference; the later ones were answered from the outputs the group's
    # reference kept (worker/correctness/memo.py), and their records are still the single judgments' above.
    kept = [sum(key.endswith("reference.trial:kept") for key in r.stages_s) for r in grouped]
    assert kept[0] == 0 and kept[1] >= 1 and kept[2] >= 1, kept
    assert not any(key.endswith(":kept") for r in singles for key in r.stages_s)


def test_a_candidate_finds_nothing_the_one_before_it_left_in_their_channels(tmp_path):
    candidates = written(tmp_path, leaves=LEAVES_A_MARKER, looks=LOOKS_FOR_THE_MARKER)
    leaves, looks = judge_group(TASK, candidates, CONFIG.with_(mode="audit"), key=KEY)
    assert leaves.correctness.passed and leaves.workers.group.index == 0
    assert looks.correctness.passed, looks.failure  # it found no marker: its outputs were right


def test_without_the_wipe_the_marker_would_be_found(tmp_path, monkeypatch):
    """The control of the test above: the channels not wiped between the candidates, the marker is found."""
    monkeypatch.setattr(shared_reference, "wipe", lambda endpoints: 0)
    candidates = written(tmp_path, leaves=LEAVES_A_MARKER, looks=LOOKS_FOR_THE_MARKER)
    _, looks = judge_group(TASK, candidates, CONFIG.with_(mode="audit"), key=KEY)
    assert not looks.correctness.passed and looks.failure_kind == "tolerance"


def test_a_reference_that_died_between_two_judgments_is_replaced(tmp_path, spied):
    candidates = written(tmp_path, first=HONEST, second=HONEST)

    def kill_the_reference(index, record):
        if index == 0:
            spied[0].worker.kill()

    records = judge_group(TASK, candidates, CONFIG, key=KEY, on_record=kill_the_reference)
    assert [r.status for r in records] == ["PASS", "PASS"]
    (shared,) = spied
    assert shared.started == 2 and shared.lends == 2
    assert shared.retired == ["it ended while it waited for the next judgment"]


def test_a_reference_left_in_the_middle_of_a_request_is_retired():
    shared = shared_reference.SharedReference("", "cpu", None, None, None, start=lambda *a, **k: None)

    class Alive:
        dead, started_at = False, float("inf")

        class proc:
            @staticmethod
            def poll():
                return None

        def ask_exit(self):
            pass

        def close(self):
            self.closed = True

    worker = shared.worker = Alive()
    shared.limits = type("Limits", (), {"lifetime_s": 1800.0})()
    lent = shared.lent = shared_reference.LentReference(shared, worker)
    lent.close()
    assert shared.worker is worker and shared.retired == []  # whole: kept for the next lend
    lent = shared.lent = shared_reference.LentReference(shared, worker)
    lent.broke_off = True
    lent.close()
    assert shared.worker is None and worker.closed
    assert shared.retired == ["a judgment ended in the middle of one of its requests"]


def test_a_timed_group_times_each_candidate_on_a_fresh_pair(tmp_path):
    candidates = written(tmp_path, first=HONEST, second=HONEST)
    records = judge_group(TASK, candidates, CONFIG.with_(timing=True), key=KEY)
    for record in records:
        assert record.status == "PASS" and record.timing.measured, record.failure
        assert record.workers.checked == "group" and record.workers.timing == ["started"]
    assert records[0].logs["reference_timing"] and records[1].logs["reference_timing"]


def test_the_wipe_leaves_zeros_where_data_was_and_holes_where_there_was_none():
    endpoint = channel.create("wipe_test", 256 * 1024 * 1024)
    try:
        os.pwrite(endpoint.fd, b"\x01" * 4096, 0)
        os.pwrite(endpoint.fd, MARKER, 100 * 1024 * 1024)
        assert shared_reference.wipe([endpoint], limit_bytes=4095) is None  # past the bound: nothing written
        assert os.pread(endpoint.fd, 1, 0) == b"\x01"
        written_bytes = shared_reference.wipe([endpoint])
        assert 4096 <= written_bytes <= 2 * 1024 * 1024  # the pages that held data, not the capacity
        assert os.pread(endpoint.fd, 4096, 0) == bytes(4096)
        assert os.pread(endpoint.fd, len(MARKER), 100 * 1024 * 1024) == bytes(len(MARKER))
        assert shared_reference.wipe([endpoint]) == written_bytes  # the same pages again, nothing more
    finally:
        os.close(endpoint.fd)


def test_a_group_source_is_the_same_stream_for_one_key_and_another_for_another():
    one, same, other = GroupSource(KEY), GroupSource(KEY), GroupSource(bytes(32))
    draws = [(s.randrange(2**32 - 1), s.random(), s.sample(range(100), 3), s.uniform(2, 8)) for s in (one, same, other)]
    assert draws[0] == draws[1] != draws[2]
    with pytest.raises(ValueError):
        GroupSource(b"short")
    with pytest.raises(NotImplementedError):
        one.getstate()
    assert 0.45 < sum(GroupSource(os.urandom(32)).random() for _ in range(20000)) / 20000 < 0.55


def test_a_group_takes_candidates_or_texts_and_each_group_draws_its_own_plan(tmp_path):
    (honest,) = written(tmp_path, honest=HONEST)
    with pytest.raises(Exception, match="exactly one of"):
        judge_group(TASK, [honest], CONFIG, candidate_texts=[HONEST])
    with pytest.raises(Exception, match="at least one candidate"):
        judge_group(TASK, [], CONFIG)
    (from_text,) = judge_group(TASK, config=CONFIG, candidate_texts=["```python\n" + HONEST + "```"])
    (from_path,) = judge_group(TASK, [honest], CONFIG)
    assert from_text.status == from_path.status == "PASS" and from_text.candidate.extracted_from_response
    assert from_text.workers.group.id != from_path.workers.group.id
    seeds = [[t.seed for t in r.correctness.trials if t.kind == "hidden"] for r in (from_text, from_path)]
    assert seeds[0] != seeds[1]  # a key per group, from the operating system


def test_a_worker_that_cannot_be_sandboxed_is_the_judges_failure_as_in_a_single_judgment():
    from kerneljudge.judgment.stages.failures import JudgeFailed
    from kerneljudge.sandbox.confine import SandboxUnavailable
    from kerneljudge.sandbox.process import WorkerLimits

    def refused(*args, **kwargs):
        raise SandboxUnavailable("no user namespace")

    shared = shared_reference.SharedReference("", "cpu", None, None, WorkerLimits(max_message_bytes=1 << 20), refused)
    with pytest.raises(JudgeFailed, match="a worker cannot be sandboxed as required: no user namespace"):
        shared.lend("candidate text")
    assert shared.worker is None and shared.channels is None and shared.lent is None


def test_a_candidate_that_filled_its_channels_past_the_bound_costs_the_group_its_reference(
    tmp_path, monkeypatch, spied
):
    """What a candidate leaves in its outbox is its choice: past what is wiped, the next lend gets fresh channels
    and a fresh reference, which hold nothing, instead of the parent writing zeros for as long as it wrote data."""
    monkeypatch.setattr(shared_reference, "WIPE_LIMIT_BYTES", 1024)  # the marker's page is past it
    candidates = written(tmp_path, leaves=LEAVES_A_MARKER, looks=LOOKS_FOR_THE_MARKER)
    _, looks = judge_group(TASK, candidates, CONFIG.with_(mode="audit"), key=KEY)
    assert looks.correctness.passed, looks.failure
    (shared,) = spied
    assert shared.started == 2 and shared.retired == ["the last candidate left more in its channels than is wiped"]
