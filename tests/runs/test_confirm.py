"""`kerneljudge confirm`: fresh process pairs, the ladder on what every run supports."""

import json
from types import SimpleNamespace

from helpers import CANDIDATES, TASKS
from kerneljudge.cli import main
from kerneljudge.config import JudgeConfig
from kerneljudge.runs.confirm import confirm


def fake_record(verified, speedup=None, low=None, high=None, vs_compile=None):
    timing = SimpleNamespace(
        speedup_vs_compile=vs_compile[0] if vs_compile else None,
        speedup_vs_compile_interval=list(vs_compile[1:]) if vs_compile else None,
        measured=speedup is not None,
        speedup=speedup,
        speedup_interval=[low, high] if speedup is not None else None,
        interval_level=0.95,
        speedup_rse=0.004,
        block_ratios=[speedup] * 6 if speedup else [],
        stop_reason="precision_reached",
    )
    failure = None if verified else SimpleNamespace(summary="3 of 528 elements outside tolerance")
    return SimpleNamespace(verified=verified, status="PASS" if verified else "FAIL", timing=timing, failure=failure)


def judged(*records):
    queue = list(records)
    calls = []

    def judge_once(task, candidate, config):
        calls.append(config)
        return queue.pop(0)

    return judge_once, calls


def test_every_fresh_pair_clearing_the_margin_confirms_the_claim():
    judge_once, calls = judged(*[fake_record(True, 1.5, 1.45, 1.55) for _ in range(3)])
    result = confirm(None, None, JudgeConfig(timing=False), runs=3, judge_once=judge_once)
    assert result.claim == "confirmed_fresh_processes" and len(result.runs) == 3
    assert all(c.timing for c in calls)  # confirming always times, whatever the configuration said
    assert result.spread == 0.0


def test_one_fresh_pair_that_does_not_clear_the_margin_stops_below_confirmed():
    judge_once, _ = judged(fake_record(True, 1.5, 1.45, 1.55), fake_record(True, 1.02, 1.0, 1.04))
    result = confirm(None, None, JudgeConfig(), runs=2, judge_once=judge_once)
    assert result.claim == "faster_than_eager"
    assert result.spread is not None and result.spread > 0.3


def test_a_run_that_is_not_verified_ends_the_claim_early():
    judge_once, calls = judged(fake_record(True, 1.5, 1.45, 1.55), fake_record(False), fake_record(True, 2, 1.9, 2.1))
    result = confirm(None, None, JudgeConfig(), runs=3, judge_once=judge_once)
    assert result.claim is None and len(calls) == 2 and result.runs[1].failure.startswith("3 of 528")


def test_the_compile_rung_is_measured_in_the_first_run_on_cuda_and_can_stop_the_claim():
    slower_than_compile = (0.9, 0.88, 0.92)
    judge_once, calls = judged(*[fake_record(True, 1.5, 1.45, 1.55, slower_than_compile) for _ in range(2)])
    result = confirm(None, None, JudgeConfig(device="cuda"), runs=2, judge_once=judge_once)
    assert [c.timing_compile for c in calls] == [True, False]
    rungs = {r.name: r for r in result.rungs}
    assert rungs["faster_than_compile"].holds is False and "0.9x" in rungs["faster_than_compile"].detail
    assert result.claim == "correct"  # faster than eager, but the ladder stops below torch.compile
    judge_once, calls = judged(*[fake_record(True, 1.5, 1.45, 1.55, (1.3, 1.25, 1.35)) for _ in range(2)])
    assert confirm(None, None, JudgeConfig(device="cuda"), runs=2, judge_once=judge_once).claim == (
        "confirmed_fresh_processes"
    )
    judge_once, calls = judged(fake_record(True, 1.5, 1.45, 1.55))
    confirm(None, None, JudgeConfig(device="cpu"), runs=1, judge_once=judge_once)
    assert calls[0].timing_compile is False  # not on the CPU


def test_confirm_command_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "confirm.json"
    code = main(
        [
            "confirm",
            str(TASKS / "tiny_bias_relu.py"),
            str(CANDIDATES / "honest_torch.py"),
            "--device",
            "cpu",
            "--policy",
            "practical",
            "--runs",
            "2",
            "--json",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert [r["verified"] for r in result["runs"]] == [True, True]
    assert all(r["interval"] and r["stop_reason"] == "max_blocks" for r in result["runs"])
    # The same torch code on the CPU is not faster than itself by 2%: correct, but no speed rung.
    assert code == 2 and result["claim"] in ("correct", "faster_than_eager")
    assert "claim:" in capsys.readouterr().out


def test_confirm_rejects_bad_arguments(capsys):
    assert main(["confirm", "a.py", "b.py", "--runs", "0"]) == 1
    assert "--runs must be at least 1" in capsys.readouterr().err
