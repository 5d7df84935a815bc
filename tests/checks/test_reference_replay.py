"""The reference's own replay from another random state (KJ-T003): its figures over tensors, the finding drawn
from figures, the oracle's random state, and two judgments on the CPU (a noisy reference, an honest task)."""

from __future__ import annotations

import torch

from helpers import CANDIDATES, TASKS, run_judge
from kerneljudge.checks.correctness import tolerance_for
from kerneljudge.checks.reference_replay import replay_figures
from kerneljudge.checks.screening import nondeterministic_reference
from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.tasks.load import load_task
from kerneljudge.worker.correctness.oracle import ReferenceRuns
from kerneljudge.worker.correctness.seeded import load_text

FP32, FP16 = tolerance_for(torch.float32), tolerance_for(torch.float16)


def noisy(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """relu(x) plus noise of 0.5, three draws of the noise: the reference's first run, its replay, the oracle's."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 64, generator=g)
    first, again, oracle = (torch.relu(x) + 0.5 * torch.randn(32, 64, generator=g) for _ in range(3))
    return x, first, again, oracle


def test_noise_the_oracle_does_not_draw_moves_beyond_rounding_and_passes_the_comparison():
    _, first, again, oracle = noisy()
    figures = replay_figures(first, again, oracle, FP32)
    assert figures["beyond_rounding"] > 0.9 * first.numel() and figures["replay_passes"] is True
    [found] = nondeterministic_reference([figures])
    assert found.code == "KJ-T003" and found.severity == "warning"  # SUSPICIOUS, as KJ-T001
    assert found.evidence["outputs"][0]["output"] == 0


def test_noise_the_oracle_draws_too_is_told_apart_by_the_comparison():
    """A reference whose oracle draws the same numbers (KernelBench's LSTM): a candidate must draw them too."""
    _, first, again, _ = noisy()
    figures = replay_figures(first, again, first.double().float(), FP32)
    assert figures["beyond_rounding"] and figures["replay_passes"] is False
    assert nondeterministic_reference([figures]) == []


def test_another_summation_order_is_rounding():
    """Float atomics in a GPU reference: the same sum in another order moves values in their last bits."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(64, 4096, generator=g), torch.randn(4096, 64, generator=g)
    first = a @ b
    again = sum(a[:, k : k + 256] @ b[k : k + 256] for k in range(0, 4096, 256))
    assert not torch.equal(first, again)
    figures = replay_figures(first, again, (a.double() @ b.double()).float(), FP32)
    assert figures["differing_elements"] and figures["beyond_rounding"] == 0
    half = first.half()
    moved = (half.float() * (1 + 2 * torch.finfo(torch.float16).eps)).half()  # two units in the last place
    assert replay_figures(half, moved, half, FP16)["beyond_rounding"] == 0
    assert nondeterministic_reference([figures]) == []


def test_identical_runs_integer_outputs_and_changed_structures():
    x = torch.randn(8, 8)
    x[0, 0] = float("nan")
    same = replay_figures(x, x.clone(), x, FP32)
    assert same["differing_elements"] == 0 and same["beyond_rounding"] == 0
    labels = torch.randint(0, 10, (100,), generator=torch.Generator().manual_seed(0))
    drawn = replay_figures(labels, (labels + 1) % 10, labels, FP32)
    assert drawn["beyond_rounding"] == 100 and drawn["replay_passes"] is False  # integers are compared exactly
    assert replay_figures(x, x[:4], x, FP32)["comparable"] is False
    assert replay_figures(x, x, x, FP32)["shared_storage"] is True  # a buffer the reference writes again
    assert nondeterministic_reference([drawn, None, {"beyond_rounding": 5, "replay_passes": None}]) == []


class CpuRuns(ReferenceRuns):
    """The reference worker's runs without its process: a model on the CPU."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.torch, self.device, self.model = torch, torch.device("cpu"), model
        self.oracle, self.oracle_dtype, self.no_oracle, self.task_check = None, None, None, None

    def set_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def synchronize(self) -> None:
        pass


def test_the_oracle_draws_what_the_reference_draws_after_a_failed_float64_attempt():
    """The task draws its initial state in float32 in its forward: the float64 attempt draws it and fails
    (a float32 state against float64 weights); the float32 oracle must draw the reference's, not the next."""
    module = load_text((TASKS / "random_state.py").read_text(), "kj_random_state_test")
    torch.manual_seed(42)
    runs = CpuRuns(module.Model(*module.get_init_inputs()).eval())
    [x] = module.get_inputs()
    torch.manual_seed(7)
    oracle = runs.run_oracle([x])
    torch.manual_seed(7)
    with torch.no_grad():
        reference = runs.model(x)
    assert runs.oracle_dtype == "float32"
    torch.testing.assert_close(oracle, reference)


def test_a_noisy_reference_verifies_nothing():
    record = run_judge(TASKS / "noisy_reference.py", CANDIDATES / "noisy_reference_relu.py")
    assert record.status == "SUSPICIOUS" and not record.verified, (record.status, record.failure)
    [found] = [f for f in record.findings if f.code == "KJ-T003"]
    assert "cannot verify any candidate" in found.summary


def test_an_honest_task_is_replayed_and_verified():
    task = load_task(TASKS / "bias_relu.py")
    record = run_judge(task, reference_as_candidate(task))
    assert record.status == "PASS" and record.verified, [f.code for f in record.findings]
    assert "correctness.reference.rerun" in record.stages_s  # the replay ran, and found nothing
    assert "KJ-T003" not in {f.code for f in record.findings}
