"""The findings catalog: every code kerneljudge can raise, in one table.

A finding's severity decides its effect on the status: `error` makes the
verdict FAIL, `warning` makes it SUSPICIOUS (correct but not verified), `info`
is recorded only. docs/findings.md describes each code; a test keeps the two in
step.

Where the judge's settings decide a code's severity, the catalog holds it: an entry's `by_policy` gives its
severity under each policy (by case, where the evidence makes more than one), and a high-risk construct's
follows the mode (`HIGH_RISK_BY_MODE`). The checks ask `severity`, never a setting's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kerneljudge.results.verdict import Finding

# A high-risk construct's severity in each hardened mode (preflight/; in `off` the scan only finds the kernels).
HIGH_RISK_BY_MODE = {"audit": "warning", "enforce": "error"}


def policies(strict: str, practical: str) -> dict[str, str]:
    """A severity under each policy (config.POLICIES)."""
    return {"strict": strict, "practical": practical}


@dataclass(frozen=True)
class Entry:
    code: str
    detector: str
    title: str
    remediation: str
    attacks: tuple[str, ...] = ()
    high_risk: bool = False  # rejected before import in enforce mode
    # Where the policy decides the severity: {case: {policy: severity}}; "" names the case of a code with one.
    by_policy: dict[str, dict[str, str]] = field(default_factory=dict, hash=False)


CATALOG: dict[str, Entry] = {
    e.code: e
    for e in [
        # ---- static preflight (what the source says; supports runtime evidence, never replaces it)
        Entry(
            "KJ-S001",
            "preflight",
            "assigns to or deletes an attribute of torch, triton, the judge or the runtime",
            "Do not patch library or judge objects; write your own functions instead.",
            ("H30", "H31", "H33"),
            True,
        ),
        Entry(
            "KJ-S002",
            "preflight",
            "changes global numerics flags (TF32, cuDNN, matmul precision, determinism)",
            "Leave global flags as the judge pins them; choose precision inside your kernel.",
            ("H33", "H42"),
            True,
        ),
        Entry(
            "KJ-S003",
            "preflight",
            "imports the judge's own modules",
            "A candidate has no use for kerneljudge; remove the import.",
            ("H31", "H32"),
            True,
        ),
        Entry(
            "KJ-S004",
            "preflight",
            "imports a module outside the allow-list",
            "Import only the kernel languages and the standard modules docs/findings.md lists.",
            ("H30", "H31", "H34"),
            True,
        ),
        Entry(
            "KJ-S054",
            "preflight",
            "reaches a module, builtin or attribute outside the allowed forms",
            "Use modules through plain attribute chains and only the allowed attributes; pass no module, "
            "getattr or namespace around as a value.",
            ("H05", "H30", "H31", "H34"),
            True,
        ),
        Entry(
            "KJ-S010",
            "preflight",
            "starts threads or processes, or runs commands",
            "Do all work inside forward on the calling thread.",
            ("H21", "H34"),
            True,
        ),
        Entry(
            "KJ-S011",
            "preflight",
            "installs interpreter hooks (profile/trace, atexit, signals, finalizers)",
            "Remove the hook; work must happen inside forward.",
            ("H21",),
            True,
        ),
        Entry("KJ-S020", "preflight", "uses CUDA streams", "Synchronise side streams before returning.", ("H20",)),
        Entry("KJ-S021", "preflight", "uses CUDA graphs", "Graph replays are re-checked with new inputs.", ("H23",)),
        Entry(
            "KJ-S030",
            "preflight",
            "loads native code through ctypes, cffi or mmap",
            "Build kernels with Triton or torch.utils.cpp_extension so the judge can see them.",
            ("H34", "H40"),
            True,
        ),
        Entry(
            "KJ-S040",
            "preflight",
            "reads or writes files",
            "A kernel needs no files; keep data in memory.",
            ("H05", "H26", "H34"),
            True,
        ),
        Entry(
            "KJ-S041",
            "preflight",
            "opens network connections or imports network libraries",
            "Candidates run offline; remove network access.",
            ("H34",),
            True,
        ),
        Entry(
            "KJ-S050",
            "preflight",
            "inspects frames, the garbage collector or other objects' internals",
            "Compute the output from the inputs; the expected output is never in your process.",
            ("H05",),
            True,
        ),
        Entry(
            "KJ-S051",
            "preflight",
            "runs code built at run time (exec, eval, compile, __import__, importlib)",
            "Write the code directly so that it can be checked.",
            ("H30", "H31"),
            True,
        ),
        Entry("KJ-S052", "preflight", "changes the process environment", "Do not modify os.environ.", ("H33",), True),
        Entry(
            "KJ-S053",
            "preflight",
            "reaches a protected module's attribute through a computed name, or reads sys.modules",
            "Use plain attribute access.",
            ("H30", "H31"),
            True,
        ),
        Entry(
            "KJ-S060",
            "preflight",
            "mentions reduced precision (fp16, bf16, TF32, autocast)",
            "Match the task's precision; accumulate in fp32 at least.",
            ("H42",),
        ),
        Entry(
            "KJ-S070",
            "preflight",
            "declares no custom kernel",
            "Write the computation as a Triton or CUDA kernel.",
            ("H40",),
            by_policy={"": policies("error", "info")},
        ),
        Entry(
            "KJ-S071",
            "preflight",
            "calls high-level PyTorch compute in the model",
            "Under the strict policy only allocation, views and reshapes may use torch.",
            ("H40", "H41"),
            by_policy={"": policies("warning", "info")},
        ),
        # ---- runtime evidence gathered in the worker (observations; the parent decides)
        Entry(
            "KJ-R001",
            "runtime",
            "timer, synchronisation or comparison APIs, or the worker's own copy of a timed output, were replaced "
            "in the worker",
            "Do not patch library functions; the judge never uses the worker's copies anyway.",
            ("H30", "H31"),
        ),
        Entry(
            "KJ-R002",
            "runtime",
            "numerics flags differ from the pinned values after import or a call",
            "Leave TF32, cuDNN, matmul precision, determinism and autocast as pinned.",
            ("H33", "H42"),
        ),
        Entry(
            "KJ-R003",
            "runtime",
            "interpreter hooks or signal handlers were installed",
            "Remove trace/profile hooks and signal handlers.",
            ("H21",),
        ),
        Entry(
            "KJ-R010",
            "runtime",
            "threads started by the candidate were still alive after it returned",
            "Finish all work inside forward, on the calling thread.",
            ("H21",),
            # "library": every thread left alive is a library's own service thread (checks/runtime.py).
            by_policy={"": policies("warning", "warning"), "library": policies("warning", "info")},
        ),
        Entry("KJ-R011", "runtime", "the candidate started child processes", "Do not start processes.", ("H21", "H34")),
        Entry(
            "KJ-R012",
            "runtime",
            "a native thread the worker did not start was alive after import or a call, or a thread other than the "
            "calling one used CPU after the call returned",
            "Do all work inside forward, on the calling thread; start no threads from native code.",
            ("H21",),
        ),
        Entry(
            "KJ-R020",
            "runtime",
            "the output changed after the call returned",
            "Synchronise every stream and finish all writes before returning.",
            ("H20", "H21"),
        ),
        Entry(
            "KJ-R021",
            "runtime",
            "the output shares storage with an input (the reference's does not)",
            "Return a new tensor.",
            ("H07", "H22"),
        ),
        Entry(
            "KJ-R022",
            "runtime",
            "the output shares storage with a previous call's output",
            "Compute a fresh output on every call; do not cache.",
            ("H01", "H23"),
            by_policy={"": policies("error", "info")},
        ),
        Entry(
            "KJ-R023",
            "runtime",
            "the candidate modified its inputs (the reference does not)",
            "Treat inputs as read-only.",
            ("H07",),
        ),
        Entry(
            "KJ-R024",
            "trace",
            "work the call launched on another stream was never waited for by the call's stream",
            "Make the current stream wait for every side stream (wait_stream or an event) before returning.",
            ("H20", "H21"),
        ),
        Entry(
            "KJ-R025",
            "trace",
            "the call replayed a CUDA graph",
            "None needed: replays are checked with new inputs like every call.",
            ("H23",),
        ),
        Entry(
            "KJ-R026",
            "runtime",
            "code of the candidate's was left to run between a timed sample and the copy of its checked output "
            "(a hook, a signal handler or timer, a thread, a torch mode or kernel, a patched namespace)",
            "Leave nothing behind a call: no hooks, handlers, threads, modes or patches.",
            ("H03", "H21"),
        ),
        Entry(
            "KJ-R027",
            "timing",
            "the candidate's worker took longer than the reference's to commit to a checked sample's outputs, by more "
            "than its calls claim to take: work done where no timer sees it",
            "Do a call's work in the call; leave nothing to run after it.",
            ("H03", "H21"),
        ),
        Entry(
            "KJ-R028",
            "runtime",
            "the call left another stream current than the one it was called on",
            "Restore the caller's stream before returning (use `with torch.cuda.stream(s):`, not `set_stream`).",
            ("H20",),
        ),
        Entry(
            "KJ-R040",
            "trace",
            "none of the declared custom kernels ran in the traced calls",
            "Launch your kernels in forward; a kernel that is defined but never launched does no work.",
            ("H40", "H41"),
            by_policy={"": policies("error", "info")},
        ),
        Entry(
            "KJ-R041",
            "trace",
            "kernels other than the declared ones (torch, cuBLAS, cuDNN) did compute in the traced calls",
            "Under the strict policy do the computation in your own kernels; torch may allocate and reshape.",
            ("H40", "H41"),
            # "bulk": the other kernels took at least the declared ones' device time; "share": less.
            by_policy={"bulk": policies("error", "info"), "share": policies("warning", "info")},
        ),
        Entry(
            "KJ-R030",
            "runtime",
            "runtime evidence from the worker is missing or malformed",
            "Do not tamper with the judge's worker.",
            ("H31", "H32"),
        ),
        Entry(
            "KJ-R050",
            "timing",
            "the candidate worker's timings claim far less time than the parent's clock saw",
            "Do not touch timers or events; the parent times every request with its own clock.",
            ("H20", "H30"),
        ),
        Entry(
            "KJ-R051",
            "timing",
            "the timed calls took far less device time than the kernels of the traced calls did",
            "Do the same work in every call; outputs cached or skipped while timed are measured, not hidden.",
            ("H01", "H03", "H23"),
        ),
        # ---- compute-sanitizer on one call (checks/sanitizer.py, docs/sanitizer.md)
        Entry(
            "KJ-R060",
            "sanitizer",
            "racecheck: a shared-memory data race in the candidate's kernel (warp-synchronous code included)",
            "Order every shared-memory exchange: __syncthreads() between a block's steps, __syncwarp() or warp "
            "shuffles between a warp's.",
            ("H10",),
        ),
        Entry(
            "KJ-R061",
            "sanitizer",
            "memcheck: an out-of-bounds or misaligned access, or a device fault, in the candidate's kernel",
            "Bound every access by the tensor's size (mask the tail) and align vector loads.",
            ("H09", "H10"),
        ),
        Entry(
            "KJ-R062",
            "sanitizer",
            "initcheck: the candidate's kernel read device memory that nothing had written",
            "Write every element before reading it; do not read past what was written.",
            ("H06", "H10"),
            # An uninitialised read whose value the kernel discards is harmless; a wrong value fails the comparison.
            by_policy={"": policies("warning", "info")},
        ),
        Entry(
            "KJ-R063",
            "sanitizer",
            "synccheck: a barrier used wrongly (not reached by every thread it names, or a wrong mask)",
            "Call __syncthreads() where every thread of the block reaches it, __syncwarp(mask) with the threads "
            "that do.",
            ("H10",),
        ),
        # ---- what the candidate's workers left behind (checks/workspace.py, sandbox/tree.py)
        Entry(
            "KJ-R070",
            "workspace",
            "the candidate left more in its workspace than the judge reads",
            "Keep the workspace to what your build needs: at most 64 levels deep and 50,000 entries, short names.",
            ("H34",),
        ),
        # ---- precision forensics
        Entry(
            "KJ-P001",
            "precision",
            "the error is consistent with reduced-precision arithmetic (bf16, fp16 or TF32) on a full-precision task",
            "Compute and accumulate in the task's precision (fp32: tl.dot(..., input_precision='ieee'), no casts).",
            ("H42",),
        ),
        # ---- task screening
        Entry(
            "KJ-T001",
            "task",
            "the task's output does not depend on its inputs (constant, or identical across trials)",
            "Fix the task: choose inputs and operations whose output varies, or a trivial kernel passes.",
            ("H08",),
        ),
        Entry(
            "KJ-T002",
            "task",
            "the reference draws random numbers in its forward (initial states, dropout in training mode)",
            "Pass random tensors as inputs instead: a kernel that draws its own numbers cannot match the reference.",
        ),
        Entry(
            "KJ-T003",
            "task",
            "the reference's own replays on identical inputs disagree beyond rounding, and the comparison passes "
            "either: it cannot verify any candidate",
            "Pass the random tensors as inputs, or drop the random op: the output must follow from the inputs.",
            ("H08",),
        ),
        # ---- correctness
        Entry(
            "KJ-C001",
            "replay",
            "two runs on identical inputs differ at rounding level (atomics, reduction order)",
            "None needed for correctness; a deterministic reduction makes results reproducible.",
            ("H10",),
        ),
        Entry(
            "KJ-C002",
            "task_check",
            "the task's own check of the output and the float64 oracle disagree (the task's check decides)",
            "Read both: a check of properties (QR, eigenvectors) accepts answers an elementwise oracle cannot; "
            "a loose check accepts what the oracle shows wrong.",
        ),
        Entry(
            "KJ-C003",
            "shape_trial",
            "the candidate refused a shape derived from the task's size globals (an error at build or call)",
            "Handle every size the task's globals allow: derive grids and blocks from the inputs' shapes and mask "
            "the tail.",
            ("H09",),
        ),
    ]
}


def severity(code: str, policy: str = "strict", mode: str = "audit", case: str = "") -> str:
    """The severity of a finding of `code` where the judge's settings decide it: a high-risk construct's by the
    mode (a hardened one), any other code's by the policy, in `case` where its entry has several."""
    entry = CATALOG[code]
    if entry.high_risk:
        return HIGH_RISK_BY_MODE[mode]
    return entry.by_policy[case][policy]


def finding(code: str, severity: str, summary: str | None = None, evidence: dict[str, Any] | None = None) -> Finding:
    """A Finding for a catalog code; the summary defaults to the catalog's title."""
    entry = CATALOG[code]
    return Finding(
        code=code,
        detector=entry.detector,
        severity=severity,  # type: ignore[arg-type]
        summary=summary or entry.title,
        evidence={"attacks": list(entry.attacks), **(evidence or {})},
        remediation=entry.remediation,
    )
