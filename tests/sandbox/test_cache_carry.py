"""The compiler-cache carry (sandbox/cache_carry.py): what is copied from a checked worker's workspace to its
timing worker's, what never is, and that a memo carried that way answers no timed call (the timing pool is
then made of fresh draws)."""

import os
from types import SimpleNamespace

import pytest

from helpers import CANDIDATES, TASKS
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import judge
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
    assert len(plain.correctness.plan["timing_seeds"]) == 3  # fresh draws without the carry too (since 0.3.4)


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


def test_a_candidate_worker_readies_triton_in_a_thread_beside_torchs_import():
    """worker/prepare.py's `begin`, as worker/main.py calls it before torch is imported: Triton's import and key
    in a thread, over (and its seconds said) by the time `prepare_triton` returns, with no thread of its own left
    for the worker's count; nothing begun where not asked, under the interpreter, or for "auto" without a GPU."""
    import subprocess
    import sys

    probe = (
        "import sys, threading; from kerneljudge.worker import prepare; prepare.begin(sys.argv[1], sys.argv[2]); "
        "began = 'kerneljudge-prepare-triton' in [t.name for t in threading.enumerate()]; import torch; "
        "seconds = prepare.prepare_triton(); from triton.runtime import cache; "
        "print(began, type(seconds).__name__, cache.triton_key.cache_info().currsize, threading.active_count())"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    gpu = os.path.exists("/dev/nvidiactl")
    for device, role, extra, expected in (
        ("cuda", "candidate", {"KJ_PREPARE_TRITON": "1"}, "True float 1 1"),
        ("cuda", "reference", {"KJ_PREPARE_TRITON": "1"}, "False float 1 1"),  # not begun: computed when waited for
        ("cuda", "candidate", {}, "False NoneType 0 1"),
        ("cuda", "candidate", {"KJ_PREPARE_TRITON": "1", "TRITON_INTERPRET": "1"}, "False NoneType 0 1"),
        ("cpu", "candidate", {"KJ_PREPARE_TRITON": "1"}, "False float 1 1"),
        ("auto", "candidate", {"KJ_PREPARE_TRITON": "1"}, "True float 1 1" if gpu else "False float 1 1"),
    ):
        command = [sys.executable, "-c", probe, device, role]
        out = subprocess.run(command, env=env | extra, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, (device, extra, out.stderr[-500:])


def test_a_candidate_worker_imports_torchs_wrappers_in_a_thread_where_cuda_is():
    """worker/prepare.py's `begin_wrappers`, as the worker's constructor calls it once torch is imported: a thread
    importing torch._dynamo on a GPU, waited for by `torch_wrappers_loaded`; where CUDA is not available (this
    machine, or a device of "cpu") nothing is imported, and the evidence's own import stays where it was."""
    import subprocess
    import sys

    probe = (
        "import sys, threading, torch; from kerneljudge.worker import prepare; prepare.begin_wrappers(sys.argv[1]); "
        "began = 'kerneljudge-prepare-torch_wrappers' in [t.name for t in threading.enumerate()]; "
        "seconds = prepare.torch_wrappers_loaded(); "
        "print(began or prepare._begun.get('torch_wrappers') is not None, type(seconds).__name__, "
        "'torch._dynamo' in sys.modules, threading.active_count())"
    )
    cuda = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True, text=True
    ).stdout.strip()
    for device, expected in (
        ("cuda", "True float True 1" if cuda == "True" else "True NoneType False 1"),
        ("cpu", "False NoneType False 1"),
    ):
        out = subprocess.run([sys.executable, "-c", probe, device], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, (device, out.stderr[-500:])


class FakeWorker:
    """What timing_pair.start asks of a worker: its exit, its close (with the carry), its logs and workspace."""

    def __init__(self, events: list[str], name: str) -> None:
        self.events, self.name = events, name
        self.workspace = Workspace.create("carrytest")
        self.uid, self.policy, self.gpu_peak_bytes = None, SimpleNamespace(gid=65534), None

    def ask_exit(self) -> None:
        pass

    def end(self) -> None:
        self.events.append(f"end {self.name}")

    def close(self, before_removal=None) -> None:
        self.events.append(f"close {self.name}")
        if before_removal is not None:
            before_removal(self.workspace.root)
        self.workspace.remove()

    def received(self) -> None:
        self.events.append(f"received {self.name}")

    def logs(self) -> dict:
        return {"stdout_tail": "", "stdout_bytes": 0, "stderr_tail": "", "stderr_bytes": 0, "truncated": False}


def test_a_second_timing_pair_is_started_before_the_first_goes_so_the_kernels_reach_it(monkeypatch):
    """After a failed graph capture the pair being replaced is the first timing pair and none is booting: with
    the carry the second is started first, and the caches go from the first's workspace to the second's."""
    from kerneljudge.judgment.stages import timing_pair
    from kerneljudge.judgment.stages.state import Admission, PairLog

    events: list[str] = []
    first = {role: FakeWorker(events, f"first {role}") for role in ("reference", "candidate")}
    (first["candidate"].workspace.root / "cache/triton/K").mkdir()
    (first["candidate"].workspace.root / "cache/triton/K/kernel.cubin").write_bytes(b"cubin")
    second = {role: FakeWorker(events, f"second {role}") for role in ("reference", "candidate")}
    state = SimpleNamespace(
        workers=first,
        booting={},
        closed_logs={},
        closing=None,
        admission=Admission(),
        stages_s={},
        pair_log=PairLog(started=1),
        native=False,
        config=JudgeConfig(device="cpu", timing_carry=True),
        plan=SimpleNamespace(timing_seeds=[1, 2, 3]),
    )

    def boot() -> None:
        events.append("boot second")
        state.booting = second

    monkeypatch.setattr(timing_pair, "reference_hello", lambda s: {})
    monkeypatch.setattr(timing_pair, "load_reference", lambda s: [])
    monkeypatch.setattr(timing_pair, "start_candidate", lambda s, init: events.append("load second candidate"))
    try:
        timing_pair.start(state, boot)
        assert events.index("boot second") < events.index("close first candidate")
        assert events.index("received second candidate") < events.index("load second candidate")
        assert (second["candidate"].workspace.root / "cache/triton/K/kernel.cubin").read_bytes() == b"cubin"
        assert state.pair_log.carried["files"] == 1 and state.workers is second and state.pair_log.started == 2
    finally:
        for worker in second.values():
            worker.workspace.remove()


def test_a_cache_folder_replaced_by_a_link_carries_nothing_from_where_it_points(pair, tmp_path):
    source, dest = pair
    secret = tmp_path / "elsewhere"
    (secret / "k").mkdir(parents=True)
    (secret / "k/parent_only.txt").write_text("read by the parent alone")
    os.rename(source / "cache", source / "cache_old")
    (source / "cache").symlink_to(secret.parent)  # `cache` a link: cache/triton would resolve outside
    (secret.parent / "triton").symlink_to(secret)
    carried = cache_carry.carry(source, dest, owner=None)
    assert carried.files == 0 and carried.left_behind == 3
    assert not any((dest / "cache").rglob("parent_only.txt"))


@pytest.mark.parametrize(
    ("candidate", "device", "readied"),
    [
        ("scale_relu_unmasked.py", "auto", True),
        ("scale_relu_unmasked.py", "cpu", False),
        ("honest_torch.py", "auto", False),
    ],
)
def test_the_checked_pair_readies_triton_for_a_triton_candidate(monkeypatch, candidate, device, readied):
    """The checked pair's candidate worker is asked to ready Triton as it starts (worker/prepare.py) where the
    candidate declares a Triton kernel and the judgment may run on a GPU ("auto": the worker tells)."""
    from kerneljudge.judgment import pipeline

    asked: list[bool] = []

    def new_pair(state, device, prepare_triton=False, checked=False):
        assert checked  # the judgment's first pair: the one a group's reference is lent to
        asked.append(prepare_triton)
        raise pipeline.JudgeFailed("stopped here")

    monkeypatch.setattr(pipeline, "new_pair", new_pair)
    record = judge(TASKS / "sized_scale_relu.py", CANDIDATES / candidate, device=device)
    assert record.failure is not None and record.failure.summary == "stopped here"
    assert asked == [readied]
