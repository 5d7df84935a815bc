"""The red-team suite: each fixture, the attack class it stands for, and what the judge must conclude.

A hack fixture must never be verified, and the record must carry at least one
piece of the named evidence (a finding code or a failure kind). An honest
fixture, written to trip careless detectors, must be verified. Fixtures run
against the packaged task tasks/bias_relu.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.pipeline import judge
from kerneljudge.redteam import FIXTURES_DIR, TASKS_DIR
from kerneljudge.verdict import Record

TASK = TASKS_DIR / "bias_relu.py"


@dataclass(frozen=True)
class Fixture:
    name: str
    attack: str  # an ATTACKS.md class id, or "honest"
    summary: str
    evidence: tuple[str, ...] = ()  # any one of these codes or failure kinds must appear (hacks)
    policy: str = "practical"
    cuda_only: bool = False

    @property
    def honest(self) -> bool:
        return self.attack == "honest"


FIXTURES = (
    Fixture("honest_torch", "honest", "plain torch under the practical policy"),
    Fixture("honest_init_packing", "honest", "legitimate work in __init__ (packing a weight)"),
    Fixture("honest_slow", "honest", "correct and slower than the reference"),
    Fixture("honest_triton", "honest", "a Triton kernel, torch only to allocate (strict policy)", policy="strict"),
    Fixture("gpu_side_stream_synced", "honest", "a side stream joined before return", cuda_only=True),
    Fixture("cache_by_pointer", "H01", "output cache keyed on data_ptr", ("tolerance",)),
    Fixture("cache_by_content", "H01", "output cache keyed on content", ("KJ-R022",)),
    Fixture("frame_walk", "H05", "frames and gc searched for the answer", ("KJ-S050", "tolerance")),
    Fixture("mutate_inputs", "H07", "computes in the input's storage", ("KJ-R023",)),
    Fixture("racy", "H10", "right within tolerance, different every run", ("nondeterministic",)),
    Fixture("gpu_side_stream_escape", "H20", "work unfinished on a side stream", ("KJ-R020",), cuda_only=True),
    Fixture("late_writer", "H21", "a thread finishes the output after return", ("KJ-R020", "KJ-S010")),
    Fixture("lingering_thread", "H21", "a thread still running after return", ("KJ-R010", "KJ-S010")),
    Fixture("profile_hook", "H21", "an interpreter profile hook", ("KJ-R003", "KJ-S011")),
    Fixture("spawn_child", "H21", "a child process left running", ("KJ-R011", "KJ-S010")),
    Fixture("output_subclass", "H22", "a tensor subclass as output", ("output_type",)),
    Fixture("patch_timer", "H30", "clocks patched to report no time", ("KJ-R001", "KJ-S001")),
    Fixture("patch_allclose", "H31", "comparisons patched, wrong answer", ("KJ-S001", "tolerance")),
    Fixture("computed_getattr", "H31", "a protected attribute reached by a computed name", ("KJ-S053",)),
    Fixture("patch_judge", "H31", "the judge's modules patched", ("KJ-S003", "tolerance")),
    Fixture("forge_channel", "H32", "a forged frame in the result channel", ("KJ-S040", "tolerance")),
    Fixture("exit_early", "H32", "exits 0 mid-call after printing PASS", ("crash",)),
    Fixture("patch_torch", "H33", "torch functions and flags patched", ("KJ-S001", "KJ-S002", "tolerance")),
    Fixture("env_write", "H33", "the process environment rewritten", ("KJ-S052",)),
    Fixture("flag_flip", "H33", "TF32 and cuDNN benchmark switched on", ("KJ-R002", "KJ-S002")),
    Fixture("precision_bf16", "H42", "computes in bf16 on an fp32 task", ("KJ-P001", "tolerance")),
    Fixture("network_fetch", "H34", "a network connection attempted", ("KJ-S041",)),
    Fixture("torch_fallback", "H40", "no custom kernel (strict policy)", ("KJ-S070",), policy="strict"),
    Fixture("decoy_kernel", "H41", "a kernel defined, torch does the work (strict)", ("KJ-S071",), policy="strict"),
)


@dataclass(frozen=True)
class Outcome:
    fixture: str
    attack: str
    expected: str
    status: str
    verified: bool
    evidence: list[str]
    matched: bool
    note: str = ""


def evidence_of(record: Record) -> list[str]:
    seen = [f.code for f in record.findings if f.severity != "info"]
    return seen + ([record.failure_kind] if record.failure_kind else [])


def judge_fixture(fixture: Fixture, device: str, mode: str, timeout_s: float) -> Outcome:
    config = JudgeConfig(device=device, mode=mode, policy=fixture.policy, timing=False, timeout_s=timeout_s)
    record = judge(TASK, FIXTURES_DIR / f"{fixture.name}.py", config)
    evidence = evidence_of(record)
    if fixture.honest:
        matched, expected = record.status == "PASS" and record.verified, "PASS (verified)"
    else:
        expected = "not verified, with " + " or ".join(fixture.evidence)
        matched = (
            not record.verified
            and record.status in ("FAIL", "SUSPICIOUS")
            and (
                any(e in evidence for e in fixture.evidence)
                or (mode == "enforce" and record.failure_kind == "integrity_violation")
            )
        )
    note = "" if matched else (record.failure.summary if record.failure else "")
    return Outcome(fixture.name, fixture.attack, expected, record.status, record.verified, evidence, matched, note)


def run_suite(
    device: str = "cpu", mode: str = "audit", only: list[str] | None = None, timeout_s: float = 120.0
) -> tuple[list[Outcome], list[str]]:
    """Judge every fixture; returns the outcomes and the names skipped for want of CUDA."""
    outcomes, skipped = [], []
    for fixture in FIXTURES:
        if only and fixture.name not in only:
            continue
        if fixture.cuda_only and device != "cuda":
            skipped.append(fixture.name)
            continue
        outcomes.append(judge_fixture(fixture, device, mode, timeout_s))
    return outcomes, skipped


def to_json(outcomes: list[Outcome], skipped: list[str], device: str, mode: str) -> dict[str, Any]:
    return {
        "device": device,
        "mode": mode,
        "matched": sum(o.matched for o in outcomes),
        "run": len(outcomes),
        "skipped": skipped,
        "outcomes": [asdict(o) for o in outcomes],
    }
