"""The severities the judge's settings decide, pinned: each policy-dependent code under strict and practical, and
a high-risk construct's in each hardened mode, read from the catalog and from the findings the checks make."""

import pytest
from test_runtime_evidence import CLEAN

from kerneljudge.checks import catalog, runtime, sanitizer
from kerneljudge.checks.trace import analyse, read_call
from kerneljudge.config import POLICIES
from kerneljudge.preflight import preflight

SEVERITIES = ("error", "warning", "info")

# (code, case) -> (severity under strict, under practical), as the verdicts have had them.
BY_POLICY = {
    ("KJ-S070", ""): ("error", "info"),
    ("KJ-S071", ""): ("warning", "info"),
    ("KJ-R010", ""): ("warning", "warning"),
    ("KJ-R010", "library"): ("warning", "info"),
    ("KJ-R022", ""): ("error", "info"),
    ("KJ-R040", ""): ("error", "info"),
    ("KJ-R041", "bulk"): ("error", "info"),
    ("KJ-R041", "share"): ("warning", "info"),
    ("KJ-R062", ""): ("warning", "info"),
}


def test_the_catalog_holds_each_policy_dependent_severity_as_it_was():
    held = {
        (code, case): (by["strict"], by["practical"])
        for code, entry in catalog.CATALOG.items()
        for case, by in entry.by_policy.items()
    }
    assert held == BY_POLICY
    for (code, case), (strict, practical) in BY_POLICY.items():
        assert catalog.severity(code, "strict", case=case) == strict
        assert catalog.severity(code, "practical", case=case) == practical


def test_every_entry_gives_a_severity_under_every_policy():
    for entry in catalog.CATALOG.values():
        for by in entry.by_policy.values():
            assert tuple(by) == POLICIES and set(by.values()) <= set(SEVERITIES), entry.code
        assert not (entry.high_risk and entry.by_policy), entry.code  # the mode decides a high-risk construct's


def test_a_high_risk_construct_is_a_warning_in_audit_and_an_error_in_enforce_under_either_policy():
    high_risk = [code for code, entry in catalog.CATALOG.items() if entry.high_risk]
    assert high_risk and all(code.startswith("KJ-S") for code in high_risk)
    for code in high_risk:
        for policy in POLICIES:
            assert catalog.severity(code, policy, "audit") == "warning"
            assert catalog.severity(code, policy, "enforce") == "error"


HEADER = "import torch\nimport triton\nimport triton.language as tl\n"
NO_KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
STREAMS = HEADER + "s = torch.cuda.Stream()\n"  # KJ-S020: a construct that is not high-risk


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("mode", ["audit", "enforce"])
def test_preflight_severities(mode, policy):
    strict = policy == "strict"
    risky = {f.code: f.severity for f in preflight(HEADER + "import socket\n", mode, policy).findings}
    assert risky["KJ-S041"] == ("error" if mode == "enforce" else "warning")
    assert {f.code: f.severity for f in preflight(STREAMS, mode, policy).findings}["KJ-S020"] == "info"
    no_kernel = {f.code: f.severity for f in preflight(NO_KERNEL, mode, policy).findings}
    assert no_kernel == {"KJ-S070": "error" if strict else "info", "KJ-S071": "warning" if strict else "info"}
    assert preflight(HEADER + "import socket\n", "off", policy).findings == []


@pytest.mark.parametrize("policy", POLICIES)
def test_runtime_severities(policy):
    strict = policy == "strict"
    [stale] = runtime.call_findings({**CLEAN, "aliases_previous_output": [0]}, {}, "t", policy)
    assert (stale.code, stale.severity) == ("KJ-R022", "error" if strict else "info")
    monitor = {**CLEAN, "threads_started": 1, "thread_kinds": ["tqdm._monitor.TMonitor"]}
    [library] = runtime.call_findings(monitor, {}, "t", policy)
    assert (library.code, library.severity) == ("KJ-R010", "warning" if strict else "info")
    assert ("library" in library.summary) is not strict
    [thread] = runtime.import_findings({**monitor, "thread_kinds": ["threading.Thread"]}, policy)
    assert (thread.code, thread.severity) == ("KJ-R010", "warning") and "library" not in thread.summary


def traced(kernels):
    """One traced call (checks/trace.py's events) whose kernels are `(name, device_us)`, each on the call's stream."""
    events = [
        {"cat": "user_annotation", "name": "kj::call", "ts": 100.0, "dur": 400.0},
        {"cat": "user_annotation", "name": "kj::sync", "ts": 500.0, "dur": 40.0},
    ]
    for correlation, (name, dur) in enumerate(kernels, start=1):
        ts = 100.0 + correlation
        events.append(
            {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1.0, "correlation": correlation}
        )
        events.append(
            {"cat": "kernel", "name": name, "ts": ts + 1, "dur": dur, "stream": 7, "correlation": correlation}
        )
    return [read_call({"events": events}, "trial 0")]


@pytest.mark.parametrize("policy", POLICIES)
def test_trace_severities(policy):
    strict = policy == "strict"
    declared = {"my_kernel"}
    _, never_ran = analyse(traced([("ampere_sgemm_128x64_nn", 50.0)]), declared, policy)
    assert {f.code: f.severity for f in never_ran} == {
        "KJ-R040": "error" if strict else "info",
        "KJ-R041": "error" if strict else "info",  # the other kernels did the bulk of the work
    }
    _, share = analyse(traced([("my_kernel", 90.0), ("ampere_sgemm_128x64_nn", 10.0)]), declared, policy)
    assert {f.code: f.severity for f in share} == {"KJ-R041": "warning" if strict else "info"}


@pytest.mark.parametrize("policy", POLICIES)
def test_sanitizer_severities(policy):
    assert sanitizer.severity("initcheck", policy) == ("warning" if policy == "strict" else "info")
    for tool in ("memcheck", "racecheck", "synccheck"):
        assert sanitizer.severity(tool, policy) == "error"
