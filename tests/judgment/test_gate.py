"""The lane gate's device-memory reservations, and the task footprint they are worked out from."""

from __future__ import annotations

import threading
import time
import types

import pytest
import torch

from helpers import run_all
from kerneljudge.judgment.gate import (
    CONTEXT_BYTES,
    GIB,
    OPEN_GATE,
    LaneGate,
    PastDeadline,
    memory_need,
    timing_pool_sets,
)
from kerneljudge.worker import footprint

TOTAL = 100 * GIB  # a GPU of 100 GiB; one lane on it may reserve USABLE * TOTAL less three contexts


def hold(gate, need, log, name, seconds, started=None, gpu="0"):
    with gate.work(), gate.admit(gpu, need, TOTAL):
        log.append(f"{name} in")
        if started is not None:
            started.set()
        time.sleep(seconds)
        log.append(f"{name} out")


def test_a_need_that_does_not_fit_beside_another_waits_for_it():
    gate, log, first = LaneGate(["0", "0"]), [], threading.Event()
    room = gate.reservable("0", TOTAL)
    run_all(
        lambda: hold(gate, int(0.6 * room), log, "A", 0.3, first),
        lambda: (first.wait(), hold(gate, int(0.6 * room), log, "B", 0.0)),
    )
    assert log == ["A in", "A out", "B in", "B out"]
    assert gate.waits[1][2] >= 0.2  # B's wait is kept, for the record's stages_s["waiting"]


def test_needs_that_fit_together_run_together_and_other_gpus_are_apart():
    gate, log, first = LaneGate(["0", "0", "1"]), [], threading.Event()
    room = gate.reservable("0", TOTAL)
    run_all(
        lambda: hold(gate, int(0.45 * room), log, "A", 0.3, first),
        lambda: (first.wait(), hold(gate, int(0.45 * room), log, "B", 0.0)),
        lambda: (first.wait(), hold(gate, int(0.9 * room), log, "C", 0.0, gpu="1")),
    )
    assert log.index("B in") < log.index("A out") and log.index("C in") < log.index("A out")


def test_a_need_larger_than_the_gpu_runs_alone_and_small_ones_do_not_starve_it():
    gate, log, first = LaneGate(["0"] * 4), [], threading.Event()
    room = gate.reservable("0", TOTAL)
    big_waiting = threading.Event()

    def big():
        first.wait()
        big_waiting.set()
        hold(gate, 2 * room, log, "big", 0.1)

    def middle():  # asks after the big one: waits its turn although it would fit beside A
        big_waiting.wait()
        time.sleep(0.05)
        hold(gate, room // 4 + 1, log, "middle", 0.0)

    def small():  # up to 1/8 of the room: goes ahead beside A at once
        big_waiting.wait()
        time.sleep(0.05)
        hold(gate, room // 8, log, "small", 0.0)

    run_all(lambda: hold(gate, room // 2, log, "A", 0.4, first), big, middle, small)
    assert log.index("small in") < log.index("A out")
    assert log.index("A out") < log.index("big in") < log.index("big out") < log.index("middle in")


def test_a_lane_waiting_for_memory_does_not_keep_another_from_measuring():
    gate, log = LaneGate(["0", "0"]), []
    room = gate.reservable("0", TOTAL)
    holding, asking = threading.Event(), threading.Event()

    def first():  # holds most of the memory, then measures: must not wait for the lane that waits for memory
        with gate.work():
            cm = gate.admit("0", int(0.8 * room), TOTAL)
            cm.__enter__()
            holding.set()
        asking.wait()
        time.sleep(0.1)
        with gate.measure("0"):
            log.append("A measures")
        cm.__exit__(None, None, None)

    def second():
        holding.wait()
        asking.set()
        hold(gate, int(0.8 * room), log, "B", 0.0)

    run_all(first, second)
    assert log == ["A measures", "B in", "B out"]


def test_a_judgment_still_waiting_at_the_deadline_gives_up_and_leaves_the_gate_as_it_was():
    gate, log, first = LaneGate(["0", "0"], deadline=time.monotonic() + 0.3), [], threading.Event()
    room = gate.reservable("0", TOTAL)
    gave_up = []

    def late():
        first.wait()
        try:
            hold(gate, int(0.6 * room), log, "B", 0.0)
        except PastDeadline as exc:
            gave_up.append(str(exc))

    run_all(lambda: hold(gate, int(0.6 * room), log, "A", 1.0, first), late)
    assert log == ["A in", "A out"] and gave_up and "at the deadline" in gave_up[0]
    # past the deadline no need is let in, even one that fits at once; B's turn was given back
    with pytest.raises(PastDeadline, match="after the deadline"), gate.work(), gate.admit("0", GIB, TOTAL):
        pass
    assert gate._asking["0"] == [] and gate._reserved["0"] == 0


def test_no_need_and_the_open_gate_wait_for_nothing():
    gate = LaneGate(["0"])
    with gate.work(), gate.admit("0", 0, TOTAL), OPEN_GATE.admit("0", 10 * TOTAL, TOTAL):
        pass
    assert gate.waits == []


def test_the_need_counts_both_workers_copies_and_is_zero_when_the_inputs_are_unknown():
    assert memory_need(None) == 0 and memory_need({"input_bytes": None}) == 0
    sized = memory_need({"input_bytes": GIB, "parameter_bytes": 0, "output_bytes": GIB})
    # reference 4I + 2O + 2A, candidate 2I + A + 4O; the working set as large as the output; margin and overhead
    assert sized == int(1.1 * 15 * GIB) + 3 * GIB
    unsized = memory_need({"input_bytes": GIB, "parameter_bytes": 2 * GIB, "output_bytes": None})
    assert unsized == int(1.1 * (4 * 2 + 15) * GIB) + 3 * GIB  # an output the meta device could not size: as the inputs


# (I, O, A) and NVML's peaks of the reference's and the candidate's workers (GiB), on an H200 on 2026-12-02 (judge
# 0.1.0) once the channels freed what they carried: KernelBench level 1's cumsum_exclusive, 19_ReLU,
# 63_conv_standard_2D, 42_Max_Pooling_2D, 99_TripletMarginLoss, 9_Tall_skinny, and level 2's
# 90_Conv3d_LeakyReLU_Sum_Clamp_GELU; then, in a later run that day, level 1's 25_Swish, 34_InstanceNorm, 39_L2Norm, 45
# and 46 (average pooling), 47 and 49 (reductions), 76_conv_standard_1D, 87_conv_pointwise_2D, 94_MSELoss, 96_HuberLoss
# (whose meta working set is 0 bytes) and 97_ScaledDotProductAttention.
HELD = [
    ((4, 4, 12), 33.0, 24.7),
    ((6, 6, 6), 37.3, 36.7),
    ((1, 7.97, 7.97), 36.8, 48.5),
    ((2, 1.99, 5.98), 19.2, 12.7),
    ((0.25, 1.64, 3.28), 8.5, 10.6),
    ((3, 0, 2), 17.0, 6.7),
    ((0.01, 4, 4), 17.3, 24.7),
    ((6, 6, 12), 49.1, 36.7),
    ((7, 7, 14), 43.2, 42.7),
    ((8, 8, 8), 49.2, 48.7),
    ((16, 0.13, 0.13), 65.0, 33.3),
    ((8, 1, 1), 33.0, 18.7),
    ((8, 0, 0), 33.0, 17.3),
    ((8, 0, 0.01), 33.0, 25.1),
    ((8, 5.33, 5.33), 43.6, 38.1),
    ((4, 8, 8), 45.2, 48.7),
    ((8, 0, 8), 49.0, 25.0),
    ((8, 0, 0), 49.0, 21.2),
    ((6, 2, 9), 33.2, 22.7),
]
# The same for the fresh pair that timed them (reference, candidate), beside the checked pair's: level 1's
# 9_Tall_skinny, 82_conv_depthwise_2D, 99_TripletMarginLoss, 59_conv_standard_3D, 95_CrossEntropyLoss.
TIMED = [
    ((0.01, 4, 4), (17.3, 24.7), (37.7, 9.0)),
    ((1, 0.99, 0.99), (7.2, 6.7), (16.8, 8.9)),
    ((3, 0, 2), (17.0, 6.7), (23.2, 22.9)),
    ((0.12, 2.46, 2.46), (11.7, 15.5), (24.5, 6.6)),
    ((0.5, 0, 0.5), (4.0, 2.2), (4.4, 4.9)),
]
H200 = 150_109_880_320


def footprint_of(inputs, outputs, working):
    return {"input_bytes": inputs * GIB, "output_bytes": outputs * GIB, "activation_bytes": working * GIB}


def test_the_need_covers_what_both_workers_were_seen_to_hold():
    for (inputs, outputs, working), reference, candidate in HELD:
        need = memory_need(footprint_of(inputs, outputs, working))
        assert (reference + candidate) * GIB < need < 1.7 * (reference + candidate) * GIB


def test_a_timed_judgment_reserves_for_its_timing_pair_too():
    for sizes, checked, timing in TIMED:
        held = max(sum(checked), sum(timing)) * GIB
        assert held < memory_need(footprint_of(*sizes), timed=True) < 1.5 * held


def test_a_timing_pool_too_large_for_the_gpu_keeps_two_sets():
    """Three 6 GiB sets, each with its output and the float64 oracle's, and the candidate's graph buffers
    would need about 180 GiB; two still rotate the inputs between consecutive calls."""
    relu = footprint_of(6, 6, 6)
    assert timing_pool_sets(relu, H200) == 2 and timing_pool_sets(footprint_of(1, 1, 1), H200) == 3
    assert timing_pool_sets(relu, 0) == 3 and timing_pool_sets(None, H200) == 3  # nothing known: as before
    assert memory_need(relu, timed=True, pool_sets=2) < memory_need(relu, timed=True)


def test_a_working_set_larger_than_the_output_raises_the_need():
    plain = {"input_bytes": 4 * GIB, "parameter_bytes": 0, "output_bytes": 4 * GIB}
    chained = {**plain, "activation_bytes": 12 * GIB}
    assert abs(memory_need(chained) - memory_need(plain) - 1.1 * 3 * 8 * GIB) <= 1  # 2A and A, 8 GiB more


def task(source):
    module = types.ModuleType("task")
    exec(source, module.__dict__)  # noqa: S102  # a test's own trusted task
    return module


def test_the_footprint_is_read_on_the_meta_device_without_making_the_tensors():
    module = task(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Linear(n, 2 * n)\n"
        "    def forward(self, x, labels):\n"
        "        return self.w(x), labels.sum()\n"
        "def get_inputs():\n"
        "    return [torch.randn(1 << 20, 1024), torch.randint(0, 5, (1 << 20,))]\n"
        "def get_init_inputs():\n"
        "    return [1024]\n"
    )
    before = torch.get_rng_state()
    found = footprint.describe(torch, module, [1024])
    assert torch.equal(before, torch.get_rng_state())  # no random numbers drawn
    assert found == {
        "input_bytes": (1 << 20) * 1024 * 4 + (1 << 20) * 8,  # 4 GiB that were never made
        "parameter_bytes": (1024 * 2048 + 2048) * 4,
        "output_bytes": (1 << 20) * 2048 * 4 + 8,
        "activation_bytes": found["activation_bytes"],
    }
    # the output, and what the ops made on the way (the integer sum's own temporary, the labels' size)
    assert found["output_bytes"] <= found["activation_bytes"] <= found["output_bytes"] + (1 << 20) * 8


def test_the_working_set_counts_intermediates_alive_at_once_not_views_or_in_place_ops():
    module = task(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        y = torch.cumsum(x.flip(1), dim=1).flip(1)\n"  # two of x's size alive at once, at most
        "        return y.view(-1).relu_().reshape(x.shape)\n"  # a view and an in-place op: nothing new
        "def get_inputs():\n"
        "    return [torch.randn(1 << 14, 1 << 16)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    found = footprint.describe(torch, module, [])
    assert found["output_bytes"] == 4 << 30 and found["activation_bytes"] == 8 << 30


def test_what_the_meta_device_cannot_run_is_left_unknown():
    item = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * x.sum().item()\n"
    module = task(item + "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    unknown = {"output_bytes": None, "activation_bytes": None}
    assert footprint.describe(torch, module, []) == {"input_bytes": 32, "parameter_bytes": 0, **unknown}
    broken = task(item + "def get_inputs():\n    return [torch.randn(int(torch.randn(1).item()))]\n")
    assert footprint.describe(torch, broken, []) == {"input_bytes": None, "parameter_bytes": None, **unknown}


def test_a_lane_that_asks_to_measure_waits_for_the_others_current_step_not_their_whole_stage():
    gate, log, lock = LaneGate(["0", "0"]), [], threading.Lock()
    asked = threading.Event()

    def note(what):
        with lock:
            log.append(what)

    def worker():  # a correctness stage of five trials, letting a measurement in between two
        with gate.work():
            for trial in range(5):
                if trial == 2:
                    asked.set()  # the other lane asks to measure now, inside this lane's stage
                    time.sleep(0.2)
                paused = gate.let_measure()
                note(f"trial {trial}" + (" after a pause" if paused > 0 else ""))
                time.sleep(0.02)

    def measurer():
        asked.wait(5)
        with gate.measure("0"):
            note("measures")
            time.sleep(0.1)

    run_all(worker, measurer)
    assert log.index("measures") < log.index("trial 2 after a pause"), log
    assert log[:2] == ["trial 0", "trial 1"] and log[-2:] == ["trial 3", "trial 4"], log
    assert gate.let_measure() == 0.0  # nobody waits: no pause
    assert OPEN_GATE.let_measure() == 0.0


def test_spare_pairs_kept_for_the_lanes_come_off_what_the_lanes_may_reserve():
    """Spares wait outside any judgment's reservation, each holding two CUDA contexts (spare_pairs.py)."""
    plain, with_spares = LaneGate(["0", "0"]), LaneGate(["0", "0"], spare_pairs=2)
    assert plain.reservable("0", TOTAL) - with_spares.reservable("0", TOTAL) == 2 * 2 * CONTEXT_BYTES
