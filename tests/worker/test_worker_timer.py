"""The worker's precursor sleep stays bounded whatever the CUDA events it is calibrated by report."""

from types import SimpleNamespace

from kerneljudge.worker.timing.timer import CYCLES_PER_MS, Timer


def fake_torch(elapsed_ms):
    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return elapsed_ms

    slept = []
    cuda = SimpleNamespace(Event=Event, _sleep=slept.append)
    return SimpleNamespace(cuda=cuda), slept


def calibrated(elapsed_ms):
    timer = Timer()
    timer.torch, _ = fake_torch(elapsed_ms)
    return timer.sleep_cycles(1.0)


def test_an_honest_clock_sets_the_sleep_to_the_gpu_s_rate():
    # 2,000,000 probe cycles in 1 ms: a 2 GHz GPU; a 1 ms precursor sleeps that many.
    assert calibrated(1.0) == 2_000_000


def test_events_patched_to_report_no_time_cannot_make_the_sleep_last_seconds():
    # H30: a candidate made every event pair say 0 ms. Unbounded, the rate came out at 2e9 cycles a ms
    # and a 1 ms precursor slept about a second per sample; the worker timed out before the parent's
    # clock check could see the lie.
    assert calibrated(0.0) == CYCLES_PER_MS[1]
    assert calibrated(1e9) == CYCLES_PER_MS[0]


def test_no_precursor_sleeps_nothing():
    timer = Timer()
    timer.torch, slept = fake_torch(1.0)
    assert timer.sleep_cycles(0.0) == 0 and slept == []
