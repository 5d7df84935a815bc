"""The red-team suite's runner: each fixture of redteam/suite.py judged against its task, the record held
against what the fixture expects, and the run's outcomes as JSON (`kerneljudge redteam`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kerneljudge.checks.catalog import CATALOG
from kerneljudge.config import JudgeConfig, enforcing_mode
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.sanitizer import sanitizer_path
from kerneljudge.redteam import FIXTURES_DIR, TASKS_DIR
from kerneljudge.redteam.suite import FIXTURES, Fixture
from kerneljudge.results.verdict import Record
from kerneljudge.timing.plan import CUDA_GRAPH


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
    codes: tuple[str, ...] = ()  # every finding code in the record, info included


def evidence_of(record: Record) -> list[str]:
    seen = [f.code for f in record.findings if f.severity != "info"]
    return seen + ([record.failure_kind] if record.failure_kind else [])


def inert_in_graph_timing(record: Record) -> bool:
    """Verified, timed by graph replays, and its plain calls after the replays were checked and right.

    Those calls come last, after every capture and replay: a hack that switches on after some number of
    calls, or some time, and stays on would answer them wrong. Right there, it was off when the graph was
    captured too, so the replays timed honest work.
    """
    t = record.timing
    return record.verified and t is not None and t.launch_regime == CUDA_GRAPH and t.graph_rechecks > 0


def ended_by_another(fixture: Fixture, record: Record, mode: str) -> bool:
    """In enforce mode a judgment ends at its first integrity violation: one of the fixture's other codes
    (gpu_side_stream_short's replay seeing the output change after return, KJ-R020) caught it before the stage
    that raises its CUDA evidence (the kernel trace's unjoined stream, KJ-R024) could run."""
    others = [c for c in fixture.evidence if c not in fixture.cuda_evidence]
    evidence = evidence_of(record)
    return enforcing_mode(mode) and record.failure_kind == "integrity_violation" and any(c in evidence for c in others)


def judge_fixture(
    fixture: Fixture,
    device: str,
    mode: str,
    timeout_s: float,
    timing: dict[str, bool] | None = None,
    records: Path | None = None,
) -> Outcome:
    """`fixture` judged and set against its expectation; its whole record written to `records`/NAME.json if given."""
    config = JudgeConfig(device=device, mode=mode, policy=fixture.policy, timing=fixture.timing, timeout_s=timeout_s)
    config = config.with_(**(timing or {}))
    record = judge(TASKS_DIR / f"{fixture.task}.py", FIXTURES_DIR / f"{fixture.name}.py", config)
    if records is not None:
        (records / f"{fixture.name}.json").write_text(record.to_json())
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
                or (config.enforcing and record.failure_kind == "integrity_violation")
            )
        )
        if not matched and fixture.inert_under_graphs and inert_in_graph_timing(record):
            matched, expected = True, expected + ", or timed honestly (inert under CUDA graphs)"
    rejected = record.failure is not None and record.failure.phase == "preflight"
    if device == "cuda" and fixture.cuda_evidence and not rejected and not ended_by_another(fixture, record, mode):
        missing = [c for c in fixture.cuda_evidence if c not in evidence]
        expected += "; on CUDA also " + ", ".join(fixture.cuda_evidence)
        matched = matched and not missing
    note = "" if matched else (record.failure.summary if record.failure else "")
    codes = tuple(dict.fromkeys(f.code for f in record.findings))
    return Outcome(
        fixture.name, fixture.attack, expected, record.status, record.verified, evidence, matched, note, codes
    )


def run_suite(
    device: str = "cpu",
    mode: str = "audit",
    only: list[str] | None = None,
    timeout_s: float = 120.0,
    jobs: int = 1,
    on_outcome: Callable[[Outcome, list[Outcome]], None] | None = None,
    timing: dict[str, bool] | None = None,
    records: Path | None = None,
) -> tuple[list[Outcome], list[str]]:
    """Judge every fixture, `jobs` at a time; returns the outcomes (in suite order) and the names
    skipped for want of CUDA. Each judgment has its own worker processes, so they run side by side.
    `on_outcome` hears of each outcome as it comes, with all that came so far (a run cut short by a
    machine's limit still leaves them). `timing`: how every timed fixture is timed, as JudgeConfig fields
    (`timing_carry`: the compiler caches carried to its timing worker; `timing_ahead`: its timing pair made
    ready while correctness runs). `records`: a folder for each fixture's whole record (NAME.json)."""
    selected = [f for f in FIXTURES if not only or f.name in only]
    skipped = [
        f.name
        for f in selected
        if (f.cuda_only and device != "cuda") or (f.needs_sanitizer and (device != "cuda" or sanitizer_path() is None))
    ]
    runnable = [f for f in selected if f.name not in skipped]
    done: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(judge_fixture, f, device, mode, timeout_s, timing, records): f.name for f in runnable}
        for future in as_completed(futures):
            done[futures[future]] = outcome = future.result()
            if on_outcome is not None:
                on_outcome(outcome, [done[f.name] for f in runnable if f.name in done])
    return [done[f.name] for f in runnable], skipped


def codes_not_raised(outcomes: list[Outcome]) -> list[str]:
    """Catalog codes that no fixture's record carried."""
    raised = {code for o in outcomes for code in o.codes}
    return sorted(set(CATALOG) - raised)


def to_json(
    outcomes: list[Outcome], skipped: list[str], device: str, mode: str, complete: bool = True
) -> dict[str, Any]:
    """The run's outcomes as JSON; `complete` False while fixtures are still being judged."""
    return {
        "device": device,
        "mode": mode,
        "complete": complete,
        "matched": sum(o.matched for o in outcomes),
        "run": len(outcomes),
        "skipped": skipped,
        "codes_raised": sorted({code for o in outcomes for code in o.codes}),
        "catalog_codes_not_raised": codes_not_raised(outcomes),
        "outcomes": [asdict(o) for o in outcomes],
    }
