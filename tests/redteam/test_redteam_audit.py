"""The red-team suite on the CPU, in audit mode: every hack fixture is caught with its evidence, every honest one
verified. One file per mode, so that the two runs (the longest of the tests) go to the two test processes at once."""

from helpers import cpu_red_team
from kerneljudge.redteam.runner import codes_not_raised

# Codes only a CUDA run can raise: the kernel trace's, and the static ones of the CUDA-only fixtures.
CUDA_ONLY_CODES = {"KJ-S020", "KJ-S021", "KJ-R024", "KJ-R025", "KJ-R028", "KJ-R040", "KJ-R041", "KJ-R051"}
# compute-sanitizer's, which need CUDA and the tool (docs/sanitizer.md).
CUDA_ONLY_CODES |= {"KJ-R060", "KJ-R061", "KJ-R062", "KJ-R063"}
# Notes about the task, not a candidate's attack: raised where those tasks are judged (a reference that draws
# random numbers in its forward, tests/tasks/test_task_kinds.py; a problem's own check disagreeing with the oracle,
# tests/tasks/test_gpumode.py).
TASK_NOTE_CODES = {"KJ-T002", "KJ-C002"}


def test_suite_matches_every_expectation_on_cpu_in_audit_mode():
    outcomes = cpu_red_team("audit")
    # every catalog code is raised by some fixture (enforce rejects many before they run)
    assert set(codes_not_raised(outcomes)) <= CUDA_ONLY_CODES | TASK_NOTE_CODES, codes_not_raised(outcomes)
