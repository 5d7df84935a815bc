"""Perturbed replays on the CPU: what the parent asks for, and what the worker's code queues around the call,
with a stand-in for torch's CUDA calls (tests/gpu/test_gpu_sanitizer.py sees them in a real record)."""

from contextlib import nullcontext
from types import SimpleNamespace

from kerneljudge.pipeline import MIN_FLUSH_BYTES, perturbations
from kerneljudge.worker import perturb


class FakeCuda:
    """Records what the worker queues: products, stream waits, sleeps."""

    def __init__(self, fail: bool = False):
        self.log: list[str] = []
        self.fail = fail
        cuda = SimpleNamespace(
            Stream=lambda device=None: SimpleNamespace(synchronize=lambda: self.log.append("side waited")),
            stream=lambda s: nullcontext(),
            Event=lambda enable_timing=False: SimpleNamespace(
                record=lambda stream=None: None, synchronize=lambda: None, elapsed_time=lambda end: 0.5
            ),
            _sleep=lambda cycles: self.log.append(f"sleep {cycles}"),
        )
        self.torch = SimpleNamespace(cuda=cuda, full=self.full, empty_like=lambda a: object(), mm=self.mm)

    def full(self, shape, value, device=None):
        if self.fail:
            raise RuntimeError("CUDA out of memory")
        return object()

    def mm(self, a, b, out=None):
        self.log.append("mm")


def worker(fake):
    flush = SimpleNamespace(zero_=lambda: fake.log.append("flushed"))
    return SimpleNamespace(
        torch=fake.torch,
        device=SimpleNamespace(type="cuda"),
        product_ms=None,
        flush_buffer=lambda nbytes: flush if nbytes else None,
        sleep_cycles=lambda ms: int(ms * 1000),
    )


def test_the_parent_asks_for_a_loaded_gpu_and_another_launch_order():
    kinds = perturbations({"l2_cache_bytes": 60 * 2**20})
    assert [p["kind"] for p in kinds] == ["gpu_load", "launch_order"]
    assert kinds[1]["flush_bytes"] == 120 * 2**20 and kinds[0]["factor"] == 3.0
    assert perturbations(None)[1]["flush_bytes"] == MIN_FLUSH_BYTES


def test_a_load_lasts_about_three_calls_and_is_waited_for_after_the_call():
    fake = FakeCuda()
    with perturb.perturbed(worker(fake), {"kind": "gpu_load", "side": 64, "factor": 3.0}, 0.010) as done:
        fake.log.append("call")
    assert done == {"applied": "gpu_load"}
    queued = fake.log[: fake.log.index("call")]
    assert queued.count("mm") == 2 + 60  # two to measure one product (0.5 ms), then 3 x 10 ms of them
    assert fake.log[-1] == "side waited"
    fake.log.clear()
    with perturb.perturbed(worker(fake), {"kind": "gpu_load", "side": 64}, 0.0):  # bounded below
        pass
    assert fake.log.count("mm") == 2 + perturb.MIN_PRODUCTS


def test_another_launch_order_flushes_and_delays_ahead_of_the_call():
    fake = FakeCuda()
    spec = {"kind": "launch_order", "flush_bytes": 1 << 20, "delay_ms": 1.0}
    with perturb.perturbed(worker(fake), spec, 0.01) as done:
        fake.log.append("call")
    assert done == {"applied": "launch_order"} and fake.log == ["flushed", "sleep 1000", "call"]


def test_a_perturbation_that_cannot_be_set_up_is_left_out_and_said_so():
    fake = FakeCuda(fail=True)
    with perturb.perturbed(worker(fake), {"kind": "gpu_load"}, 0.01) as done:
        fake.log.append("call")
    assert done["error"].startswith("RuntimeError: CUDA out of memory") and fake.log == ["call"]


def test_no_perturbation_asked_or_none_known_changes_nothing():
    fake = FakeCuda()
    for spec in (None, {"kind": "bogus"}):
        with perturb.perturbed(worker(fake), spec, 0.01) as done:
            assert done == {}
    assert fake.log == []
