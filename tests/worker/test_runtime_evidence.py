"""Runtime evidence: caches, late writers, input mutation, tampering and hooks are caught while the candidate runs."""

import pytest

from helpers import CANDIDATES, run_judge
from kerneljudge.checks.runtime import call_findings, import_findings


def codes(record):
    return {f.code: f.severity for f in record.findings}


@pytest.mark.parametrize(
    "fixture, code, status",
    [
        ("cache_by_pointer.py", None, "FAIL"),  # the storage-reuse canary makes its stale answer wrong
        ("cache_by_content.py", "KJ-R022", "FAIL"),  # the replay gets the previous output object back
        ("late_writer.py", "KJ-R020", "FAIL"),  # the output changes after return
        ("mutate_inputs.py", "KJ-R023", "FAIL"),
        ("patch_timer.py", "KJ-R001", "FAIL"),
        ("flag_flip.py", "KJ-R002", "SUSPICIOUS"),
        ("profile_hook.py", "KJ-R003", "SUSPICIOUS"),
        ("spawn_child.py", "KJ-R011", "SUSPICIOUS"),
    ],
)
def test_runtime_hack_is_caught(tiny_task, fixture, code, status):
    record = run_judge(tiny_task, CANDIDATES / fixture)
    assert record.status == status, (record.status, record.failure, codes(record))
    assert not record.verified
    if code:
        assert code in codes(record), codes(record)


def test_a_static_output_buffer_passes_under_practical_and_a_cache_in_one_fails_by_its_values(tiny_task):
    honest = run_judge(tiny_task, CANDIDATES / "static_output_buffer.py", mode="enforce")
    assert honest.status == "PASS" and honest.verified, (honest.failure, codes(honest))
    assert codes(honest).get("KJ-R022") == "info"
    cache = run_judge(tiny_task, CANDIDATES / "cache_in_static_buffer.py", mode="enforce")
    assert cache.status == "FAIL" and cache.failure.kind in ("tolerance", "nondeterministic"), cache.failure


def test_pointer_cache_fails_a_correctness_trial(tiny_task):
    # Whether a public trial's input lands where an earlier one's did (and the stale answer shows there), a
    # replay's does (the same inputs answered otherwise: nondeterministic), or only the hidden trials'
    # storage-reuse canary exposes it depends on the allocator: all were seen, with and without the sandbox,
    # so the test asks only that some correctness trial or its replay fails it.
    record = run_judge(tiny_task, CANDIDATES / "cache_by_pointer.py")
    assert record.failure.kind in ("tolerance", "nondeterministic"), record.failure
    assert record.failure.phase.startswith(("correctness (", "replay of trial")), record.failure


@pytest.mark.parametrize("fixture", ["honest_torch.py", "honest_init_packing.py"])
def test_honest_candidates_raise_no_runtime_findings(tiny_task, fixture):
    record = run_judge(tiny_task, CANDIDATES / fixture)
    assert record.status == "PASS" and record.verified, (record.failure, codes(record))
    assert not [c for c in codes(record) if c.startswith("KJ-R")]


def test_off_mode_gathers_no_findings(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "flag_flip.py", mode="off", hidden_trials=0)
    assert record.status == "PASS" and record.findings == []


def test_in_place_task_does_not_blame_a_candidate_that_matches_it(tmp_path):
    task = tmp_path / "inplace_task.py"
    task.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.relu_()\ndef get_inputs():\n    return [torch.randn(8, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    candidate = tmp_path / "inplace_candidate.py"
    candidate.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min_(0.0)\n"
    )
    record = run_judge(task, candidate)
    assert record.status == "PASS", (record.failure, codes(record))


CLEAN = {
    "threads_started": 0,
    "native_threads": [],
    "children": [],
    "flags_changed": {},
    "hooks": [],
    "apis_replaced": [],
    "changed_after_return": [],
    "inputs_mutated": [],
    "aliases_input": [],
    "aliases_previous_output": [],
    "streams": {"before": None, "after": None},
    "busy_after_return": {"window_ms": 20.0, "threads": []},
}


def test_malformed_or_missing_evidence_is_itself_a_finding():
    assert [f.code for f in call_findings(None, {}, "trial 0")] == ["KJ-R030"]
    assert [f.code for f in call_findings({**CLEAN, "hooks": "none"}, {}, "trial 0")] == ["KJ-R030"]
    assert [f.code for f in import_findings({"threads_started": "0"})] == ["KJ-R030"]
    assert call_findings(CLEAN, {}, "trial 0") == []


def test_reference_behaviour_excuses_mutation_and_aliasing():
    evidence = {**CLEAN, "inputs_mutated": [0], "aliases_input": [0]}
    assert {f.code for f in call_findings(evidence, {}, "t")} == {"KJ-R023", "KJ-R021"}
    assert call_findings(evidence, {"inputs_mutated": [0], "aliases_input": [0]}, "t") == []


def test_a_task_with_writable_inputs_records_writes_into_them_without_holding_them_against_the_candidate():
    evidence = {**CLEAN, "inputs_mutated": [2], "aliases_input": [0]}
    found = call_findings(evidence, {}, "t", inputs_writable=True)
    assert {(f.code, f.severity) for f in found} == {("KJ-R023", "info"), ("KJ-R021", "info")}


def test_reusing_the_previous_outputs_storage_is_an_error_under_strict_and_recorded_under_practical():
    """torch.compile's CUDA graphs return each call's output in one static buffer (GPU MODE's pmpp sort)."""
    evidence = {**CLEAN, "aliases_previous_output": [0]}
    [strict] = call_findings(evidence, {}, "t", "strict")
    [practical] = call_findings(evidence, {}, "t", "practical")
    assert (strict.code, strict.severity) == ("KJ-R022", "error")
    assert (practical.code, practical.severity) == ("KJ-R022", "info")


def test_flags_made_stricter_are_recorded_and_flags_loosened_are_a_warning():
    [stricter] = call_findings({**CLEAN, "flags_changed": {"cudnn_deterministic": True}}, {}, "t")
    [looser] = call_findings(
        {**CLEAN, "flags_changed": {"cudnn_deterministic": True, "cudnn_allow_tf32": True}}, {}, "t"
    )
    assert (stricter.code, stricter.severity) == ("KJ-R002", "info")
    assert (looser.code, looser.severity) == ("KJ-R002", "warning")


def test_a_librarys_own_service_thread_is_recorded_under_practical_and_any_other_thread_is_a_warning():
    """tqdm's monitor thread, which torch.compile's autotuning leaves alive (GPU MODE's pmpp sort, on an H200)."""
    monitor = {
        **CLEAN,
        "threads_started": 1,
        "thread_names": ["tqdm_monitor"],
        "thread_kinds": ["tqdm._monitor.TMonitor"],
    }
    [practical] = call_findings(monitor, {}, "t", "practical")
    [strict] = call_findings(monitor, {}, "t", "strict")
    assert (practical.code, practical.severity) == ("KJ-R010", "info") and "library" in practical.summary
    assert (strict.code, strict.severity) == ("KJ-R010", "warning")
    named_alike = {**monitor, "thread_kinds": ["threading.Thread"]}  # the name is the candidate's to choose
    assert [(f.code, f.severity) for f in call_findings(named_alike, {}, "t", "practical")] == [("KJ-R010", "warning")]
    one_more = {**monitor, "threads_started": 2, "thread_kinds": ["threading.Thread", "tqdm._monitor.TMonitor"]}
    assert [f.severity for f in call_findings(one_more, {}, "t", "practical")] == ["warning"]
    unnamed = {**monitor, "thread_kinds": None}  # older or tampered evidence: no classes, no excuse
    assert [f.severity for f in import_findings(unnamed, "practical")] == ["warning"]


def test_what_a_timed_request_left_is_judged_like_an_imports_and_missing_evidence_is_a_warning():
    from kerneljudge.checks.runtime import timed_findings

    clean = {
        "threads_started": 0,
        "native_threads": [],
        "children": [],
        "flags_changed": {},
        "hooks": [],
        "apis_replaced": [],
    }
    assert timed_findings(clean) == []
    (replaced,) = timed_findings({**clean, "apis_replaced": ["kerneljudge.worker.timing.timer.cloned"]})
    assert replaced.code == "KJ-R001" and replaced.severity == "error" and "timer.cloned" in replaced.summary
    (thread,) = timed_findings({**clean, "threads_started": 1, "thread_kinds": ["threading.Thread"]})
    assert thread.code == "KJ-R010" and thread.severity == "warning" and "a timed request" in thread.summary
    for malformed in (None, {**clean, "apis_replaced": "kerneljudge.protocol.wire.cloned"}, {"apis_replaced": []}):
        (missing,) = timed_findings(malformed)
        assert missing.code == "KJ-R030" and missing.severity == "warning"


def test_a_thread_started_in_a_timed_call_is_seen_after_its_request(tiny_task):
    """A thread begun in the timing worker (where no call's census runs) could read the parent's `keep` before the
    worker does; the measured request's evidence shows it (KJ-R010)."""
    record = run_judge(tiny_task, CANDIDATES / "thread_when_timed.py", mode="audit", timing=True)
    assert codes(record).get("KJ-R010") == "warning" and not record.verified, (record.failure, codes(record))
    assert any("a timed request" in f.summary for f in record.findings if f.code == "KJ-R010")


def test_the_workers_copy_path_is_watched_by_identity_and_by_code(monkeypatch):
    """A function rebound where the timer looks it up, or one whose code object was swapped in place (its identity
    kept), is reported; functions as they were are not (worker/evidence.WORKER_PATHS)."""
    import kerneljudge.worker.base  # noqa: F401  (the worker's modules, all imported as in a worker)
    from kerneljudge.worker import evidence
    from kerneljudge.worker.seal import sample as sample_seal
    from kerneljudge.worker.timing import timer

    monkeypatch.setattr(evidence, "ORIGINALS", dict(evidence.ORIGINALS))
    monkeypatch.setattr(evidence, "CODES", {})
    evidence.take_worker_originals()
    assert not set(evidence.replaced_apis()) & set(evidence.WORKER_PATHS)
    # Every watched path names something of the worker's (a stale one, renamed away, would watch nothing).
    assert [path for path in evidence.WORKER_PATHS if evidence.ORIGINALS[path] is None] == []
    monkeypatch.setattr(timer, "sample_seal", object())
    assert "kerneljudge.worker.timing.timer.sample_seal" in evidence.replaced_apis()
    monkeypatch.undo()
    monkeypatch.setattr(evidence, "ORIGINALS", dict(evidence.ORIGINALS))
    monkeypatch.setattr(evidence, "CODES", {})
    evidence.take_worker_originals()

    def forged(into, value):
        return into

    original = sample_seal.copy_kept.__code__
    try:
        sample_seal.copy_kept.__code__ = forged.__code__  # the same function object, another body
        assert "kerneljudge.worker.seal.sample.copy_kept" in evidence.replaced_apis()
    finally:
        sample_seal.copy_kept.__code__ = original
    assert "kerneljudge.worker.seal.sample.copy_kept" not in evidence.replaced_apis()


def test_a_static_output_buffer_is_timed_one_call_a_sample_and_passes(tiny_task):
    """Each call's output in the previous one's storage (KJ-R022, recorded under practical): timed, a later call of a
    sample would overwrite an earlier one's output before the parent named it (an honest candidate failed its
    timed check before 0.3.7), so every side is timed one call a sample and each kept output is its sample's only."""
    honest = run_judge(tiny_task, CANDIDATES / "static_output_buffer.py", mode="enforce", timing=True)
    assert honest.status == "PASS" and honest.verified and honest.timing.measured, honest.failure
    assert honest.timing.calls_per_sample == {"candidate": 1, "reference": 1}
    assert honest.timing.kept_calls and all(k["call"] == 0 for k in honest.timing.kept_calls[:-2])


def test_outputs_in_one_storage_only_when_timed_cannot_be_checked_and_fail(tiny_task):
    switched = run_judge(tiny_task, CANDIDATES / "static_buffer_when_timed.py", mode="audit", timing=True)
    assert switched.status == "FAIL" and switched.failure.kind == "integrity_violation", switched.failure
    assert switched.failure.phase == "timing" and "cannot be checked one by one" in switched.failure.summary
    assert any(f.code == "KJ-R022" and f.severity == "error" for f in switched.findings)


def test_shares_storage_sees_an_output_in_anothers_storage_tuples_included():
    import torch

    from kerneljudge.worker.seal.timed_outputs import call_spans, written_over

    def shares_storage(out, others, besides=()):
        return written_over(call_spans([out, *others], besides), 0)

    buffer = torch.zeros(8)
    view, fresh = buffer[2:4], torch.zeros(8)
    assert shares_storage(buffer, [fresh, view]) and shares_storage((fresh, view), [buffer])
    assert not shares_storage(fresh, [buffer, torch.zeros(8)]) and not shares_storage(buffer, [])
    # Views of an input (two calls on one input set) are no output written over.
    given = torch.zeros(4, 2)
    assert shares_storage(given.view(8), [given.t()]) and not shares_storage(given.view(8), [given.t()], [given])


def test_views_of_the_inputs_as_timed_outputs_are_no_storage_written_over():
    """Timed calls k and k + 3 use one input set (three sets): a transpose returns views of one storage, and the
    kept one is not overwritten (it failed as `integrity_violation` before views of inputs were left out)."""
    from helpers import TASKS

    record = run_judge(TASKS / "transpose_view.py", CANDIDATES / "transpose_view.py", mode="audit", timing=True)
    assert record.status == "PASS" and record.timing.measured, record.failure
    assert record.timing.calls_per_sample["candidate"] > 3 and record.timing.kept_calls


def test_a_timed_sample_whose_calls_answer_in_two_precisions_fails_whichever_call_is_named(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "half_when_timed.py", mode="audit", timing=True)
    assert record.status == "FAIL" and record.failure.kind == "dtype_mismatch", record.failure
    assert "answered unlike each other" in record.failure.summary and record.failure.phase == "timing"


def test_unlike_names_the_first_difference_between_a_samples_outputs():
    import torch

    from kerneljudge.worker.seal.timed_outputs import unlike

    a = torch.zeros(4, 6)
    assert unlike([a, torch.ones(4, 6), a.clone()]) is None and unlike([]) is None
    assert unlike([a, a.half()])[0] == "dtype" and unlike([a, torch.zeros(4, 5)])[0] == "shape"
    assert unlike([a, torch.zeros(6, 4).t()])[0] == "stride"
    assert unlike([(a, a), (a,)])[0] == "container" and unlike([(a,), [a]])[0] == "container"


def test_threads_the_judges_own_setup_starts_around_a_call_are_not_the_candidates(monkeypatch):
    """The kernel trace's profiler and a perturbed replay's CUDA work start native threads between the call's
    watch and the call (seen on an H100: three unnamed threads at the traced trial, every honest candidate
    KJ-R012). Those the worker takes as its own are neither "alive" after the call nor "busy" after its return;
    a thread started after them still is, and a replay under copy traffic is not read for busy threads at all."""
    from kerneljudge.worker import evidence

    alive = {"tids": {1, 2}}
    clocks = {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}
    monkeypatch.setattr(evidence, "native_thread_ids", lambda: set(alive["tids"]))
    monkeypatch.setattr(evidence, "thread_cpu_s", lambda tid: clocks.get(tid))
    monkeypatch.setattr(evidence, "thread_name", lambda tid: f"t{tid}")
    monkeypatch.setattr(evidence, "NATIVE_BASELINE", {"tids": {1, 2}})

    watch = evidence.CallWatch([], {}, None)
    alive["tids"] = {1, 2, 3}  # the judge's setup (a profiler, pinned buffers) started thread 3
    watch.judge_threads(evidence.native_thread_ids() - {1, 2})
    watch.returned()
    alive["tids"] = {1, 2, 3, 4}  # the call left thread 4 behind, busy
    clocks.update({3: 0.05, 4: 0.05})
    assert evidence.native_threads_added(watch.tids_before) == ["t4"]
    assert [t["name"] for t in watch.clocks.busy()["threads"]] == ["t4"]
    assert 3 in evidence.NATIVE_BASELINE["tids"]  # a later load's evidence counts it as the worker's too

    under_copies = evidence.CallWatch([], {}, None)
    under_copies.host_busy = True  # protocol.limits.HOST_BUSY_KINDS: the judge's own copies go on past the return
    under_copies.returned()
    assert under_copies.clocks is None


def test_a_replay_under_the_judges_own_host_work_is_not_read_for_busy_threads_and_every_other_call_is():
    """Under `copy_traffic` (protocol.limits.HOST_BUSY_KINDS) the worker clocks no thread after the return; the
    parent, which asked for that replay, reads no busy threads there and takes the missing clocks as no fault.
    Every other call's missing clocks are malformed evidence (KJ-R030), and its busy threads KJ-R012."""
    unclocked = {**CLEAN, "busy_after_return": None}
    busy = {**CLEAN, "busy_after_return": {"window_ms": 20.0, "threads": [{"name": "python3", "cpu_ms": 19.0}]}}
    assert call_findings(unclocked, {}, "replay of trial 6 under copy_traffic", busy_read=False) == []
    assert call_findings(busy, {}, "replay of trial 6 under copy_traffic", busy_read=False) == []
    assert [f.code for f in call_findings(unclocked, {}, "trial 6")] == ["KJ-R030"]
    assert [f.code for f in call_findings(busy, {}, "trial 6")] == ["KJ-R012"]
    assert [f.code for f in call_findings({**CLEAN, "streams": None}, {}, "t", busy_read=False)] == ["KJ-R030"]
