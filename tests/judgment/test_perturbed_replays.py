"""Perturbed replays on the CPU: what the parent draws and records, how each perturbation sizes itself, what the
worker's code queues around the call (with a stand-in for torch's CUDA calls), and the parent's check of what the
worker reports (tests/gpu/test_gpu_perturb.py runs them on a GPU against a racy candidate)."""

import random
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from helpers import hello_frame
from kerneljudge import protocol
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.pipeline import MIN_FLUSH_BYTES, perturbations
from kerneljudge.judgment.stages import replays
from kerneljudge.judgment.stages.failures import CandidateFailed
from kerneljudge.judgment.stages.results import Replays
from kerneljudge.judgment.stages.state import Admission, BuildFacts, CallFacts
from kerneljudge.worker.correctness import perturb

GIB = 2**30


class FakeTensor:
    def __init__(self, log):
        self.log = log

    def copy_(self, other, non_blocking=False):
        self.log.append(f"copy {other.where}")

    where = "device"


class FakeCuda:
    """Records what the worker queues: products, copies, sleeps, stream waits, the holding kernel's launch."""

    def __init__(self, fail: bool = False, sms: int = 132):
        self.log: list[str] = []
        self.fail = fail
        log = self.log

        class Kernel:
            def __init__(self, name):
                self.name = name

            def set_shared_memory_config(self, nbytes):
                log.append(f"shared {nbytes}")

            def __call__(self, grid, block, args, shared_mem=0, stream=None):
                if self.name == "kj_sm_hold":
                    log.append(f"hold {grid[0]} blocks {args[1]} cycles, at most {args[2]}")
                else:
                    log.append(f"mark {args[1]}" + (" on its own stream" if stream is not None else ""))

        def event(enable_timing=False):
            return SimpleNamespace(
                record=lambda stream=None: log.append("event recorded") if not enable_timing else None,
                synchronize=lambda: None,
                elapsed_time=lambda end: 0.5,
            )

        cuda = SimpleNamespace(
            Stream=lambda device=None: SimpleNamespace(synchronize=lambda: log.append("side waited")),
            stream=lambda s: nullcontext(),
            Event=event,
            _sleep=lambda cycles: log.append(f"sleep {cycles}"),
            get_device_properties=lambda device: SimpleNamespace(
                multi_processor_count=sms, shared_memory_per_block_optin=227 * 1024
            ),
            _compile_kernel=lambda source, name: Kernel(name),
            current_stream=lambda device=None: SimpleNamespace(wait_event=lambda e: log.append("call waits")),
        )
        self.torch = SimpleNamespace(
            cuda=cuda,
            full=self.full,
            zeros=self.zeros,
            int32="int32",
            ones=self.ones,
            empty_like=lambda a: FakeTensor(log),
            mm=lambda a, b, out=None: log.append("mm"),
            uint8="uint8",
        )

    def zeros(self, n, dtype=None, device=None):
        self.log.append(f"{n} zeros")
        return object()

    def full(self, shape, value, device=None):
        if self.fail:
            raise RuntimeError("CUDA out of memory")
        return object()

    def ones(self, n, dtype=None, device=None, pin_memory=False):
        tensor = FakeTensor(self.log)
        tensor.where = "host" if pin_memory else "device"
        return tensor


def worker(fake):
    flush = SimpleNamespace(zero_=lambda: fake.log.append("flushed"))
    return SimpleNamespace(
        torch=fake.torch,
        device=SimpleNamespace(type="cuda"),
        product_ms=None,
        flush_buffer=lambda nbytes: flush if nbytes else None,
        sleep_cycles=lambda ms: int(ms * 1000),
    )


def made(spec, last_call_s=0.010, fake=None):
    fake = fake or FakeCuda()
    with perturb.perturbed(worker(fake), spec, last_call_s) as done:
        fake.log.append("call")
    return done, fake.log


# The parent's draw


def test_strict_draws_every_kind_in_a_random_order_and_practical_two():
    hello = hello_frame(l2_cache_bytes=60 * 2**20)
    strict = perturbations(hello, random.Random(1), True)
    assert sorted(p["kind"] for p in strict) == sorted(perturb.KINDS)
    orders = {tuple(p["kind"] for p in perturbations(hello, random.Random(seed), True)) for seed in range(20)}
    assert len(orders) > 5  # the order is drawn
    practical = perturbations(hello, random.Random(1), False)
    assert len(practical) == replays.PRACTICAL_COUNT and len({p["kind"] for p in practical}) == 2
    drawn = {p["kind"]: p for seed in range(40) for p in perturbations(hello, random.Random(seed), True)}
    assert drawn["launch_order"]["flush_bytes"] == 120 * 2**20
    assert perturbations(None, random.Random(0), True)[0]["kind"] in perturb.KINDS
    order = next(p for p in perturbations(None, random.Random(0), True) if p["kind"] == "launch_order")
    assert order["flush_bytes"] == MIN_FLUSH_BYTES
    assert 0.5 <= drawn["sm_hold"]["share"] <= 0.9 and drawn["copy_traffic"]["bytes"] == replays.DEFAULT_COPY_BYTES


def state_for(policy="strict", footprint=None, reserved=0, seed=3):
    return SimpleNamespace(
        replays=Replays(),
        admission=Admission(footprint=footprint, reserved_bytes=reserved),
        build=BuildFacts(hello=hello_frame(l2_cache_bytes=50 * 2**20)),
        calls=CallFacts(),
        source=random.Random(seed),
        config=JudgeConfig(policy=policy),
    )


def test_the_draw_is_made_once_and_recorded():
    state = state_for()
    first = replays.planned(state, state.replays)
    assert state.replays.as_record()["perturbations"] == first and len(first) == len(perturb.KINDS)
    assert replays.planned(state, state.replays) == first  # a trial run again draws nothing anew


def test_copies_are_sized_to_the_calls_data_within_what_was_reserved():
    footprint = {"parameter_bytes": 0, "input_bytes": 40 << 20, "output_bytes": 8 << 20}
    assert replays.copy_bytes(footprint, 10 * GIB) == 48 << 20
    small = {**footprint, "input_bytes": 1000, "output_bytes": 10}
    assert replays.copy_bytes(small, 10 * GIB) == perturb.MIN_COPY_BYTES
    huge = {**footprint, "input_bytes": 6 * GIB}
    assert replays.copy_bytes(huge, 100 * GIB) == perturb.MAX_COPY_BYTES
    assert replays.copy_bytes(huge, 3 * GIB) == 3 * GIB // replays.COPY_SHARE  # an eighth of it, three buffers
    assert replays.copy_bytes(None, 10 * GIB) == replays.copy_bytes(footprint, 0) == replays.DEFAULT_COPY_BYTES


def test_each_perturbation_is_bounded_by_the_previous_call():
    assert perturb.scaled_count(3.0, 0.010, 0.5, 4, 512) == 60
    assert perturb.scaled_count(3.0, 0.0, 0.5, 4, 512) == 4
    assert perturb.scaled_count(3.0, 100.0, 0.5, 4, 512) == 512
    assert perturb.scaled_count(3.0, float("inf"), 0.5, 4, 512) == 4
    assert perturb.hold_ms(1.5, 0.010) == 15.0
    assert perturb.hold_ms(1.0, 0.0) == perturb.MIN_HOLD_MS and perturb.hold_ms(2.0, 60.0) == perturb.MAX_HOLD_MS
    assert perturb.hold_blocks(0.5, 132) == 66 and perturb.hold_blocks(0.99, 132) == 131
    assert perturb.hold_blocks(0.01, 132) == 1 and perturb.hold_blocks(0.9, 1) == 1
    assert perturb.bounded_cycles(2**40) == perturb.MAX_CYCLES and perturb.bounded_cycles(-5) == 0


# What the worker queues, and that the parent accepts it


def test_a_load_lasts_about_the_factor_of_a_call_and_is_waited_for_after_it():
    done, log = made({"kind": "gpu_load", "side": 64, "factor": 3.0})
    assert done == {"applied": "gpu_load", "products": 60}
    assert log[: log.index("call")].count("mm") == 2 + 60  # two to measure one product (0.5 ms), then 3 x 10 ms
    assert log[-1] == "side waited"
    done, log = made({"kind": "gpu_load", "side": 64}, last_call_s=0.0)
    assert log.count("mm") == 2 + perturb.MIN_PRODUCTS


def test_another_launch_order_flushes_and_delays_ahead_of_the_call():
    done, log = made({"kind": "launch_order", "flush_bytes": 1 << 20, "delay_ms": 1.0})
    assert done == {"applied": "launch_order", "flushed_bytes": 1 << 20, "delay_cycles": 1000}
    assert log == ["flushed", "sleep 1000", "call"]


def test_copy_traffic_alternates_device_and_host_copies_on_two_streams():
    done, log = made({"kind": "copy_traffic", "bytes": 8 << 20, "factor": 2.0})
    assert done == {"applied": "copy_traffic", "copies": 40, "copy_bytes": 8 << 20}  # 2 x 10 ms of 0.5 ms copies
    queued = log[: log.index("call")]
    assert queued.count("copy host") == 40 and queued.count("copy device") == 2 + 40
    assert log[-2:] == ["side waited", "side waited"]


def called_as_the_worker_calls(spec, fake=None, raises=False):
    """The call as worker/candidate.py makes it: marked on its stream just before, and just after it returns."""
    fake = fake or FakeCuda()
    stand_in = worker(fake)
    with perturb.perturbed(stand_in, spec, 0.010) as done:
        perturb.begin_call(stand_in)
        fake.log.append("call")
        if not raises:
            perturb.end_call(stand_in)
    return done, fake.log


def test_the_sm_hold_takes_its_share_of_the_sms_from_the_calls_start_on_its_stream_to_its_end():
    done, log = called_as_the_worker_calls({"kind": "sm_hold", "share": 0.5, "factor": 1.5})
    assert done == {"applied": "sm_hold", "blocks": 66, "sms": 132, "hold_cycles": 15000}
    # 1.5 x the previous 10 ms counted from the mark before the call, bounded by MAX_HOLD_MS from the launch; the
    # marks zeroed on the hold's stream before the call's stream may mark them
    assert log == [
        f"shared {227 * 1024}",
        "2 zeros",
        "event recorded",
        "call waits",
        f"hold 66 blocks 15000 cycles, at most {int(perturb.MAX_HOLD_MS * 1000)}",
        "mark 0",
        "call",
        "mark 1",
        "side waited",
    ]


def test_a_hold_whose_call_never_returns_is_released_on_a_stream_of_its_own_and_nothing_is_left_pending():
    fake = FakeCuda()
    with pytest.raises(RuntimeError):
        with perturb.perturbed(worker(fake), {"kind": "sm_hold", "share": 0.5, "factor": 1.5}, 0.010):
            raise RuntimeError("the candidate's call raised")
    assert fake.log[-2:] == ["mark -1 on its own stream", "side waited"]
    _, log = called_as_the_worker_calls({"kind": "sm_hold", "share": 0.9, "factor": 1.0}, raises=True)
    assert log[-3:] == ["call", "mark -1 on its own stream", "side waited"]
    # the next replay's other kind finds no hold pending: its call is not marked
    _, log = called_as_the_worker_calls({"kind": "launch_order", "flush_bytes": 0, "delay_ms": 1.0})
    assert not [entry for entry in log if entry.startswith("mark")], log


def test_a_staggered_release_gates_the_call_and_releases_products_within_it():
    spec = {"kind": "staggered_release", "side": 64, "delay_ms": 0.5, "release": 0.5, "factor": 1.0}
    done, log = made(spec)
    assert done == {"applied": "staggered_release", "delay_cycles": 500, "release_cycles": 5500, "products": 20}
    queued = log[: log.index("call")]
    # measured first, then the release's delay ahead of the products, then the gate the call waits behind
    assert queued[:2] == ["mm", "mm"] and queued[2] == "sleep 5500" and queued[3:23] == ["mm"] * 20
    assert queued[23:] == ["sleep 500", "event recorded", "call waits"]


@pytest.mark.parametrize("kind", perturb.KINDS)
def test_the_parent_accepts_what_an_honest_worker_reports(kind):
    spec = next(
        p for p in perturbations(hello_frame(l2_cache_bytes=1 << 20), random.Random(5), True) if p["kind"] == kind
    )
    spec = {**spec, "side": 64}
    done, _ = made(spec)
    counts, problem = replays.check_report(spec, done)
    assert problem is None and counts == {k: v for k, v in done.items() if k != "applied"}


def test_a_perturbation_that_cannot_be_set_up_is_left_out_and_said_so():
    done, log = made({"kind": "gpu_load"}, fake=FakeCuda(fail=True))
    assert done["error"].startswith("RuntimeError: CUDA out of memory") and "mm" not in log and log[0] == "call"
    assert replays.check_report({"kind": "gpu_load"}, done) == (None, None)


def test_no_perturbation_asked_or_none_known_changes_nothing():
    for spec in (None, {"kind": "bogus"}):
        done, log = made(spec)
        assert done == {} and log == ["call"]


ORDER = {"kind": "launch_order", "flush_bytes": 100}
COPIES = {"kind": "copy_traffic", "bytes": 4 << 20}
HOLD = {"kind": "sm_hold", "share": 0.5}


@pytest.mark.parametrize(
    ("asked", "report", "says"),
    [
        ({"kind": "gpu_load"}, None, "no report"),
        ({"kind": "gpu_load"}, {}, "no report"),
        ({"kind": "gpu_load"}, {"applied": "launch_order", "flushed_bytes": 0, "delay_cycles": 1}, "asked for"),
        ({"kind": "gpu_load"}, {"applied": "gpu_load", "products": 8, "skipped": 1}, "fields"),
        ({"kind": "gpu_load"}, {"applied": "gpu_load", "products": True}, "not a count"),
        ({"kind": "gpu_load"}, {"applied": "gpu_load", "products": 0}, "products"),
        ({"kind": "gpu_load"}, {"error": "x" * 301}, "asked for"),
        ({"kind": "gpu_load"}, {"error": "oom", "applied": "gpu_load"}, "fields"),
        (ORDER, {"applied": "launch_order", "flushed_bytes": 7, "delay_cycles": 1}, "flushed"),
        (COPIES, {"applied": "copy_traffic", "copies": 8, "copy_bytes": 1 << 20}, "bytes"),
        (COPIES, {"applied": "copy_traffic", "copies": 1, "copy_bytes": 4 << 20}, "copies"),
        (HOLD, {"applied": "sm_hold", "blocks": 1, "sms": 132, "hold_cycles": 9}, "blocks"),
        (HOLD, {"applied": "sm_hold", "blocks": 66, "sms": 132, "hold_cycles": 2**33}, "hold_cycles"),
    ],
)  # fmt: skip
def test_a_report_no_honest_worker_gives_is_refused(asked, report, says):
    counts, problem = replays.check_report(asked, report)
    assert counts is None and problem is not None and says in problem, problem


# The replays in a judgment: a refused report fails the candidate; the budget ends the extra replays


def judged(monkeypatch, report_for, policy="strict", seconds_each=0.0):
    state = state_for(policy)
    state.plan = SimpleNamespace(perturbed_at=6)
    state.calls.draws_random, state.calls.call_seed, state.findings = False, None, []
    clock = [0.0]
    asked = []

    def call(state, inputs, phase, keep_inputs, perturb):
        clock[0] += seconds_each
        asked.append(perturb)
        report = report_for(perturb) if perturb else None
        return protocol.Output(container="Tensor", items=[], evidence={}, perturbed=report)

    same = [{"passed": True, "summary": "bitwise identical", "metrics": {"differing_elements": 0}}]
    monkeypatch.setattr(replays, "call_candidate", call)
    monkeypatch.setattr(replays, "compare", lambda *args: same)
    monkeypatch.setattr(replays.time, "monotonic", lambda: clock[0])
    return state, asked


def honest(spec):
    done, _ = made({**spec, "side": 64})
    return done


def test_every_drawn_perturbation_is_replayed_and_recorded_with_its_conditions(monkeypatch):
    state, asked = judged(monkeypatch, honest)
    assert replays.replay(state, state.replays, 6, inputs=None)
    assert asked[0] is None and [p["kind"] for p in asked[1:]] == [
        p["kind"] for p in state.replays.as_record()["perturbations"]
    ]
    entries = state.replays.as_record()["trials"]
    assert [e.get("perturbation") for e in entries[1:]] == [p["kind"] for p in asked[1:]]
    assert all(e["conditions"] for e in entries[1:]) and state.replays.as_record()["bitwise_identical"]
    plain, _ = judged(monkeypatch, honest)
    assert (
        replays.replay(plain, plain.replays, 2, inputs=None) and len(plain.replays.as_record()["trials"]) == 1
    )  # not the perturbed trial


def test_a_report_that_is_not_what_was_asked_fails_the_candidate(monkeypatch):
    state, _ = judged(monkeypatch, lambda spec: {"applied": spec["kind"]})
    with pytest.raises(CandidateFailed) as failed:
        replays.replay(state, state.replays, 6, inputs=None)
    assert failed.value.failure.kind == "integrity_violation" and "under" in failed.value.failure.phase


def test_a_perturbation_the_worker_could_not_make_is_recorded_not_charged(monkeypatch):
    state, _ = judged(monkeypatch, lambda spec: {"error": "OutOfMemoryError: short"})
    assert replays.replay(state, state.replays, 6, inputs=None)
    assert {e["perturbation"] for e in state.replays.as_record()["trials"][1:]} == {
        "not applied: OutOfMemoryError: short"
    }


def test_past_the_practical_count_the_budget_ends_the_perturbed_replays(monkeypatch):
    state, asked = judged(monkeypatch, honest, seconds_each=replays.PERTURBED_BUDGET_S / 3 + 1)
    assert replays.replay(state, state.replays, 6, inputs=None)
    assert len(asked) == 1 + 3  # the plain replay, the practical two, and one more begun within the budget
    assert len(state.replays.as_record()["perturbations_skipped"]) == len(perturb.KINDS) - 3
    practical, asked = judged(monkeypatch, honest, policy="practical")
    assert replays.replay(practical, practical.replays, 6, inputs=None) and len(asked) == 1 + replays.PRACTICAL_COUNT


def test_the_reach_benchmark_imports_and_says_in_one_line_that_it_needs_cuda(capsys):
    """benchmarks/perturb_reach.py (docs/benchmarks/redteam.md) runs only where the perturbations can be made."""
    import sys

    from helpers import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import perturb_reach

    if perturb_reach.torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the benchmark runs for real (scripts/gpu_suite.sh run reach)")
    assert perturb_reach.main([]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert perturb_reach.row("sm_hold", 20, 30, [0.001, 0.003, 0.002]) == {
        "replay": "sm_hold",
        "calls": 30,
        "differing": 20,
        "share": 20 / 30,
        "median_ms": 2.0,
    }
