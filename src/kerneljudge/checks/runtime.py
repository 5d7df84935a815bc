"""Runtime observations from a worker, turned into findings. Pure: data in, findings out.

The observations come from the candidate's own process and may have been
tampered with; malformed or missing evidence is itself a finding (KJ-R030), and
nothing here can make a verdict better, only worse.
"""

from __future__ import annotations

import re
from typing import Any

from kerneljudge.checks.catalog import finding, severity
from kerneljudge.results.verdict import Finding

# numerics_flags() names (worker/evidence.py) and the values that only make numerics stricter than pinned.
STRICTER_FLAGS = {
    "cuda_matmul_allow_tf32": False,
    "cudnn_allow_tf32": False,
    "float32_matmul_precision": "highest",
    "cudnn_benchmark": False,
    "cudnn_deterministic": True,
    "deterministic_algorithms": True,
}
# Service threads that libraries start on their own, by class (worker/evidence.thread_kinds): tqdm's monitor,
# which a progress bar starts (torch.compile's autotuning shows one) and which only watches progress bars.
# Under the practical policy a call that leaves only these alive is recorded, not held against it (KJ-R010's
# "library" case in the catalog).
LIBRARY_THREADS = frozenset({"tqdm._monitor.TMonitor"})
# Native threads that libraries start at first use and name (worker/evidence.native_threads_added): LLVM's pool
# (Triton's compiler), CUDA's event handler, torch's autograd device threads. A name is the creator's choice, so
# these are recorded only; what any thread does after a call returns is measured apart (`busy_after_return`).
SERVICE_NATIVE_THREADS = re.compile(r"llvm-worker-\d+|cuda-EvtHandlr|cuda\d+|pt_autograd_\d+")
# A thread other than the calling one that used this much CPU between the call's return and the end of the
# re-read, and this share of that window, was working for the call after it returned. Below: an OpenMP
# thread's spin after a parallel region (libgomp spins about 300,000 turns, well under a millisecond).
BUSY_FLOOR_MS = 5.0
BUSY_SHARE = 0.25
INDEX_LISTS = ("changed_after_return", "inputs_mutated", "aliases_input", "aliases_previous_output")
IMPORT_KEYS = {
    "threads_started": int,
    "native_threads": list,
    "children": list,
    "flags_changed": dict,
    "hooks": list,
    "apis_replaced": list,
}
CALL_KEYS = {**IMPORT_KEYS, **{k: list for k in INDEX_LISTS}, "streams": dict, "busy_after_return": dict}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _well_formed(evidence: Any, keys: dict[str, type]) -> bool:
    return isinstance(evidence, dict) and all(isinstance(evidence.get(k), t) for k, t in keys.items())


def _replaced(apis: list[Any], where: str) -> list[Finding]:
    if not apis:
        return []
    return [finding("KJ-R001", "error", f"{where}: replaced {', '.join(map(str, apis[:8]))}", {"apis": apis[:50]})]


def _common(evidence: dict[str, Any], where: str, policy: str = "strict") -> list[Finding]:
    found = _replaced(evidence["apis_replaced"], where)
    if evidence["flags_changed"]:
        # Flags only made stricter (TF32 off, exact matmuls, determinism) change nothing a reward depends on.
        looser = {k: v for k, v in evidence["flags_changed"].items() if STRICTER_FLAGS.get(k, object()) != v}
        found.append(
            finding(
                "KJ-R002",
                "warning" if looser else "info",
                f"{where}: changed {', '.join(map(str, evidence['flags_changed']))}",
                {"flags": evidence["flags_changed"]},
            )
        )
    if evidence["hooks"]:
        found.append(
            finding(
                "KJ-R003",
                "warning",
                f"{where}: {', '.join(map(str, evidence['hooks'][:8]))}",
                {"hooks": evidence["hooks"][:50]},
            )
        )
    if evidence["threads_started"] > 0:
        kinds = [str(k)[:120] for k in _listed(evidence.get("thread_kinds"))][:8]
        libraries_only = len(kinds) == evidence["threads_started"] and set(kinds) <= LIBRARY_THREADS
        level = severity("KJ-R010", policy, case="library" if libraries_only else "")
        library = level == "info"  # only a library's own threads, and the policy records them only
        found.append(
            finding(
                "KJ-R010",
                level,
                f"{where}: {evidence['threads_started']} thread(s) still alive"
                + (f" (a library's own: {', '.join(sorted(set(kinds)))})" if library else ""),
                {
                    "threads": evidence["threads_started"],
                    "names": [str(n)[:80] for n in _listed(evidence.get("thread_names"))][:8],
                    "kinds": kinds,
                },
            )
        )
    if evidence["children"]:
        found.append(
            finding(
                "KJ-R011",
                "warning",
                f"{where}: {len(evidence['children'])} child process(es)",
                {"children": evidence["children"][:50]},
            )
        )
    found += _native_threads(evidence["native_threads"], where)
    return found


def _native_threads(names: list[Any], where: str) -> list[Finding]:
    """KJ-R012 from native threads started since the worker's own were counted: a warning, or info where every
    one bears the name of a library's service thread."""
    if not names:
        return []
    names = [str(n)[:40] for n in names[:16]]
    service = all(SERVICE_NATIVE_THREADS.fullmatch(n) for n in names)
    return [
        finding(
            "KJ-R012",
            "info" if service else "warning",
            f"{where}: {len(names)} native thread(s) alive that no Python thread runs"
            + (" (a library's service threads, by name)" if service else ""),
            {"native_threads": names},
        )
    ]


def busy_after_return(busy: Any, where: str) -> list[Finding]:
    """KJ-R012 (error) from the threads other than the calling one that used CPU after the call returned
    (worker/evidence.ThreadClocks), past `BUSY_FLOOR_MS` and `BUSY_SHARE` of the window."""
    if not isinstance(busy, dict) or not isinstance(busy.get("threads"), list):
        return []
    window_ms = busy.get("window_ms")
    window_ms = float(window_ms) if isinstance(window_ms, (int, float)) and not isinstance(window_ms, bool) else 0.0
    floor_ms = max(BUSY_FLOOR_MS, BUSY_SHARE * window_ms)
    working = [
        {"name": str(t.get("name"))[:40], "cpu_ms": t["cpu_ms"]}
        for t in busy["threads"]
        if isinstance(t, dict) and isinstance(t.get("cpu_ms"), (int, float)) and t["cpu_ms"] >= floor_ms
    ]
    if not working:
        return []
    return [
        finding(
            "KJ-R012",
            "error",
            f"{where}: {len(working)} thread(s) other than the calling one used CPU after the call returned "
            f"({working[0]['cpu_ms']:.1f} ms of a {window_ms:.0f} ms window): work the call did not finish",
            {"threads": working[:16], "window_ms": window_ms},
        )
    ]


def stream_left(streams: Any, where: str) -> list[Finding]:
    """KJ-R028 where the current stream (or device) as the call returned is not the one it was called on."""
    if not isinstance(streams, dict) or streams.get("before") == streams.get("after"):
        return []
    return [
        finding(
            "KJ-R028",
            "error",
            f"{where}: the call left another stream current than the one it was called on",
            {"before": streams.get("before"), "after": streams.get("after")},
        )
    ]


def import_findings(evidence: Any, policy: str = "strict") -> list[Finding]:
    """Findings from what the worker saw after importing and building the candidate."""
    if not _well_formed(evidence, IMPORT_KEYS):
        return [finding("KJ-R030", "warning", "after import: evidence missing or malformed")]
    return _common(evidence, "after import", policy)


def timed_findings(evidence: Any, policy: str = "strict") -> list[Finding]:
    """Findings from what a candidate's measured `time` request left (threads, children, flags, hooks, replaced
    functions: those of the worker's own copy path among them, worker/evidence.WORKER_PATHS, looked at before each
    kept copy too)."""
    if not _well_formed(evidence, IMPORT_KEYS):
        return [finding("KJ-R030", "warning", "a timed request: evidence missing or malformed")]
    return _common(evidence, "a timed request", policy) + stream_left(evidence.get("streams"), "a timed request")


def call_findings(
    evidence: Any,
    reference: Any,
    where: str,
    policy: str = "strict",
    inputs_writable: bool = False,
    busy_read: bool = True,
) -> list[Finding]:
    """Findings from one call; `reference` is the reference worker's evidence for the same inputs.

    Under the practical policy an output that reuses the previous call's storage is recorded, not held
    against the candidate: torch.compile's CUDA graphs (mode="reduce-overhead") return every call's output
    in one static buffer, and each call's values are checked before the next call anyway, on new inputs
    (a stale output fails there). A task that declares its inputs writable (`INPUTS_WRITABLE = True`: GPU
    MODE's harness hands each call a copy, and some problems pass the output's buffer among the inputs)
    lets the candidate write into them and return them.

    `busy_read` False: a replay under a kind whose own host work goes on past the return
    (`protocol.limits.HOST_BUSY_KINDS`), after which the threads' CPU is neither clocked nor read.
    """
    keys = CALL_KEYS if busy_read else {k: t for k, t in CALL_KEYS.items() if k != "busy_after_return"}
    if not _well_formed(evidence, keys):
        return [finding("KJ-R030", "warning", f"{where}: evidence missing or malformed")]
    reference = reference if isinstance(reference, dict) else {}
    found = _common(evidence, where, policy)
    found += stream_left(evidence["streams"], where)
    if busy_read:
        found += busy_after_return(evidence["busy_after_return"], where)
    if evidence["changed_after_return"]:
        found.append(
            finding(
                "KJ-R020",
                "error",
                f"{where}: output changed after the call returned",
                {"outputs": evidence["changed_after_return"]},
            )
        )
    # An output that is (a view of) this call's input may share the previous output's storage when the
    # canary reuses input storage; that case is judged as input aliasing instead.
    stale = [i for i in evidence["aliases_previous_output"] if i not in evidence["aliases_input"]]
    if stale:
        found.append(
            finding(
                "KJ-R022",
                severity("KJ-R022", policy),
                f"{where}: output shares storage with the previous output",
                {"outputs": stale},
            )
        )
    if evidence["inputs_mutated"] and not reference.get("inputs_mutated"):
        found.append(
            finding(
                "KJ-R023",
                "info" if inputs_writable else "error",
                f"{where}: inputs {evidence['inputs_mutated']} were modified",
                {"inputs": evidence["inputs_mutated"]},
            )
        )
    if evidence["aliases_input"] and not reference.get("aliases_input"):
        found.append(
            finding(
                "KJ-R021",
                "info" if inputs_writable else "warning",
                f"{where}: output shares storage with an input",
                {"outputs": evidence["aliases_input"]},
            )
        )
    return found
