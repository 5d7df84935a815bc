"""The compiler-cache carry (sandbox/cache_carry.py): what is copied from a checked worker's workspace to its
timing worker's, what never is, and that a memo carried that way answers no timed call (the timing pool is
then made of fresh draws)."""

import os

import pytest

from helpers import CANDIDATES
from kerneljudge.config import JudgeConfig
from kerneljudge.pipeline import judge
from kerneljudge.sandbox import cache_carry
from kerneljudge.sandbox.workspace import Workspace


@pytest.fixture
def pair():
    source, dest = Workspace.create("carrytest"), Workspace.create("carrytest")
    yield source.root, dest.root
    source.remove()
    dest.remove()


def test_carries_the_compiler_caches_only(pair):
    source, dest = pair
    kernel = source / "cache/triton/ABC123/kernel.cubin"
    kernel.parent.mkdir(parents=True)
    kernel.write_bytes(b"\x7fELF" + bytes(1000))
    os.utime(kernel, ns=(1_000_000_000, 2_000_000_000))
    (source / "cache/inductor/fx").mkdir(parents=True)
    (source / "cache/inductor/fx/graph").write_text("g")
    (source / "cache/torch_extensions/ext.so").write_bytes(b"so")  # path-bound: built again anyway
    (source / "home/notes").write_text("not a cache")
    (source / "cache/triton/link").symlink_to("/etc/passwd")
    os.mkfifo(source / "cache/triton/fifo")

    carried = cache_carry.carry(source, dest, owner=None)

    assert (dest / "cache/triton/ABC123/kernel.cubin").read_bytes() == kernel.read_bytes()
    assert (dest / "cache/triton/ABC123/kernel.cubin").stat().st_mtime_ns == 2_000_000_000
    assert (dest / "cache/inductor/fx/graph").read_text() == "g"
    assert not (dest / "cache/torch_extensions/ext.so").exists()
    assert not (dest / "home/notes").exists()
    assert not os.path.lexists(dest / "cache/triton/link")
    assert not os.path.lexists(dest / "cache/triton/fifo")
    assert (carried.files, carried.bytes, carried.left_behind, carried.dropped) == (2, 1005, 2, None)


def test_never_writes_through_a_name_already_there(pair):
    source, dest = pair
    (source / "cache/triton/k").write_text("from the checked worker")
    (dest / "cache/triton/k").symlink_to(dest / "elsewhere")
    carried = cache_carry.carry(source, dest, owner=None)
    assert carried.left_behind == 1 and not (dest / "elsewhere").exists()


def test_over_the_limit_nothing_is_carried(pair, monkeypatch):
    source, dest = pair
    for i in range(4):
        (source / f"cache/triton/d{i}").mkdir()
        (source / f"cache/triton/d{i}/blob").write_bytes(bytes(400))
    monkeypatch.setattr(cache_carry, "MAX_BYTES", 1000)
    carried = cache_carry.carry(source, dest, owner=None)
    assert carried.files == 0 and "MiB" in carried.dropped
    assert list((dest / "cache/triton").iterdir()) == []


def test_a_carried_memo_answers_no_timed_call(tiny_task):
    """A memo of the correctness trials' outputs, kept in the Triton cache folder, reaches the timing worker
    with the carry; the timing pool is made of fresh draws (recorded in the plan), so no timed call finds its
    answer there. (With the trials' inputs as the pool, the fixture served its memo over a thousand times.)"""
    config = JudgeConfig(device="cpu", mode="audit", policy="practical")
    record = judge(tiny_task, CANDIDATES / "memo_in_compiler_cache.py", config.with_(timing_carry=True))
    assert record.timing.measured
    assert record.timing.carried_caches["files"] >= 3 and record.timing.carried_caches["dropped"] is None
    assert "cache/triton/memo" not in record.logs["candidate_timing"].workspace_changes["created"]
    assert "memo hit from another worker" not in record.logs["candidate_timing"].stderr_tail
    fresh = record.correctness.plan["timing_seeds"]
    assert len(fresh) == 3 and not set(fresh) & {trial.seed for trial in record.correctness.trials}

    plain = judge(tiny_task, CANDIDATES / "memo_in_compiler_cache.py", config)
    assert plain.timing.measured and plain.timing.carried_caches is None
    assert "timing_seeds" not in plain.correctness.plan


def test_a_worker_started_ahead_computes_tritons_own_key_before_any_candidate_code():
    """worker/prepare.py: asked (PREPARE_TRITON_ENV), the worker computes Triton's installation key, which its
    first compile would otherwise compute; not asked, or under Triton's interpreter, it does nothing."""
    import subprocess
    import sys

    probe = (
        "from kerneljudge.worker.prepare import prepare_triton; from triton.runtime import cache; "
        "prepare_triton(); print(cache.triton_key.cache_info().currsize)"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    for extra, expected in (
        ({"KJ_PREPARE_TRITON": "1"}, "1"),
        ({}, "0"),
        ({"KJ_PREPARE_TRITON": "1", "TRITON_INTERPRET": "1"}, "0"),
    ):
        out = subprocess.run([sys.executable, "-c", probe], env=env | extra, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, (extra, out.stderr[-500:])
