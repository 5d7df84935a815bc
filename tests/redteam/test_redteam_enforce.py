"""The red-team suite on the CPU, in enforce mode: every hack fixture is caught with its evidence, every honest one
verified. One file per mode, so that the two runs (the longest of the tests) go to the two test processes at once."""

from kerneljudge.redteam.runner import run_suite
from kerneljudge.redteam.suite import FIXTURES


def test_suite_matches_every_expectation_on_cpu_in_enforce_mode():
    outcomes, skipped = run_suite("cpu", "enforce", jobs=2)
    mismatched = [o for o in outcomes if not o.matched]
    assert not mismatched, mismatched
    assert set(skipped) == {f.name for f in FIXTURES if f.cuda_only}
    assert all(o.status == "PASS" for o in outcomes if o.attack == "honest")
    assert not any(o.verified for o in outcomes if o.attack != "honest")
