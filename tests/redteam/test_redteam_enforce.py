"""The red-team suite on the CPU, in enforce mode: every hack fixture is caught with its evidence, every honest one
verified. One file per mode, so that the two runs (the longest of the tests) go to the two test processes at once."""

from helpers import cpu_red_team


def test_suite_matches_every_expectation_on_cpu_in_enforce_mode():
    cpu_red_team("enforce")
