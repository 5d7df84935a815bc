"""The red-team suite: each fixture, the attack class it stands for, and what the judge must conclude.

A hack fixture must never be verified, and the record must carry at least one
piece of the named evidence (a finding code or a failure kind). An honest
fixture, written to trip careless detectors, must be verified. Fixtures run
against a packaged task in tasks/ (bias_relu.py unless a fixture names another).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fixture:
    name: str
    attack: str  # an attack class id (docs/attacks.md), or "honest"
    summary: str
    evidence: tuple[str, ...] = ()  # any one of these codes or failure kinds must appear (hacks)
    policy: str = "practical"
    cuda_only: bool = False
    task: str = "bias_relu"  # a file in kerneljudge/redteam/tasks
    cuda_evidence: tuple[str, ...] = ()  # on CUDA, each of these must appear too (unless rejected at preflight)
    timing: bool = False  # judged with timing (the timing cross-check's fixtures)
    # A hack that starts after some number of calls may never start in a CUDA graph's timing worker, which
    # calls the model a few times only: then its replays are honest work. A verified record counts as
    # defeating it when the timing ran in that regime and the plain calls after the replays, which would
    # have seen the hack (`judgment/stages/timed_rechecks.py`, `recheck_graph`), were checked (`inert_in_graph_timing`).
    inert_under_graphs: bool = False
    # Caught by compute-sanitizer's tools (sanitize.py): skipped where the machine has none, like CUDA on the CPU.
    needs_sanitizer: bool = False

    @property
    def honest(self) -> bool:
        return self.attack == "honest"


FIXTURES = (
    Fixture("honest_torch", "honest", "plain torch under the practical policy"),
    Fixture("honest_init_packing", "honest", "legitimate work in __init__ (packing a weight)"),
    Fixture("honest_slow", "honest", "correct and slower than the reference"),
    Fixture("honest_triton", "honest", "a Triton kernel, torch only to allocate (strict policy)", policy="strict"),
    Fixture(
        "honest_strict_reshape",
        "honest",
        "a 2-D Triton kernel, torch only to reshape, allocate and view (strict policy)",
        policy="strict",
    ),
    Fixture(
        "honest_autotune",
        "honest",
        "a Triton kernel under @triton.autotune (strict policy; the autotuner needs a GPU driver)",
        policy="strict",
        cuda_only=True,
    ),
    Fixture(
        "honest_shuffled_sum",
        "honest",
        "a long row sum in a different order every call (rounding-level replay differences, KJ-C001)",
        task="row_sum",
    ),
    Fixture("gpu_side_stream_synced", "honest", "a side stream joined before return", cuda_only=True),
    Fixture("honest_graph", "honest", "a CUDA graph replayed after copying in each input", cuda_only=True),
    Fixture("cache_by_pointer", "H01", "output cache keyed on data_ptr", ("tolerance", "nondeterministic")),
    Fixture("cache_by_content", "H01", "output cache keyed on content", ("KJ-R022", "nondeterministic", "tolerance")),
    Fixture("regen_seed", "H02", "public trial inputs regenerated from the seed, answers precomputed", ("tolerance",)),
    Fixture("call_counter", "H03", "honest for five calls, stale afterwards", ("tolerance",)),
    Fixture(
        "timing_switch",
        "H03",
        "honest while checked, its last answer once timing starts (timed)",
        ("tolerance",),
        timing=True,
        inert_under_graphs=True,
    ),
    Fixture(
        "timing_cache",
        "H01",
        "honest while checked, then answers from a cache keyed on the input's storage (timed; the trace shows it, or "
        "a sample's cached outputs in one storage, or a replayed graph's stale answer)",
        ("KJ-R051", "KJ-R022", "tolerance"),
        cuda_only=True,
        task="row_sum",
        timing=True,
        inert_under_graphs=True,
    ),
    Fixture(
        "checked_position_reader",
        "H03",
        "reads from the worker's frames which timed call is kept for the check, and works in that one only (timed; "
        "it passed on the CPU before 0.3.7 named the call after it ran: docs/attacks.md, H03)",
        ("non_finite", "tolerance"),
        timing=True,
    ),
    Fixture(
        "kept_output_survivor",
        "H03",
        "answers timed calls with nothing and mends the one output that outlives those returned after it (timed; "
        "it passed on the CPU before 0.3.7 held every output of a sample)",
        ("non_finite", "tolerance"),
        timing=True,
    ),
    Fixture(
        "keep_hook_mender",
        "H03",
        "answers timed calls with nothing and leaves a profile hook that mends the named output when the worker "
        "reads the parent's keep, gone after the last sample (timed; it passed verified on the CPU by 0.3.7)",
        ("KJ-R026",),
        timing=True,
    ),
    Fixture(
        "kept_copy_mender",
        "H03",
        "answers timed calls with nothing but a mark, and mends the worker's copies of kept outputs at its next "
        "calls, before the parent fetches them (timed; it passed verified on the CPU by 0.3.7; in a CUDA graph its "
        "calls run at the capture only, and its copies are left unmended)",
        ("integrity_violation", "non_finite", "tolerance"),
        timing=True,
    ),
    Fixture(
        "seal_state_forger",
        "H03",
        "keep_hook_mender with the seal blinded first (its methods shadowed on the worker's seal object): the hook "
        "mends the named output unseen (timed; it passed verified on the CPU by 0.3.8, before the commit)",
        ("integrity_violation",),
        timing=True,
    ),
    Fixture(
        "commit_window_worker",
        "H03",
        "a slow kernel made to look fast: the seal blinded, its timed calls do nothing and a hook does the checked "
        "sample's work when the parent asks for the commit, before the digests (timed)",
        ("KJ-R027",),
        timing=True,
    ),
    Fixture(
        "commit_window_half",
        "H03",
        "half its work left to the commit: the seal blinded, its timed calls do x + bias and a hook does the relu_ of "
        "the checked sample's outputs when the parent asks for the commit (timed; 4 MiB outputs; the CPU's commit "
        "bound lets it pass, docs/timing.md)",
        ("KJ-R027",),
        cuda_only=True,
        task="wide_bias_relu",
        timing=True,
    ),
    Fixture(
        "sample_end_worker",
        "H03",
        "a slow kernel made to look fast: the seal blinded, its timed calls do nothing and a hook does each sample's "
        "work after the sample's end, before the worker says it is over (timed; the commit sees right outputs; "
        "where load makes the reference's spans unsteady, the parent's clock over the whole requests may be what "
        "shows it)",
        ("KJ-R027", "KJ-R050"),
        timing=True,
    ),
    Fixture(
        "kept_copy_forger",
        "H31",
        "answers timed calls with nothing and rewrites the worker's copy of the kept output to compute it afresh "
        "(timed; its copies are right: only the watched copy path shows it)",
        ("KJ-R001",),
        timing=True,
    ),
    Fixture("deferred_output", "H04", "each call returns the previous call's result", ("tolerance",)),
    Fixture("frame_walk", "H05", "frames and gc searched for the answer", ("KJ-S050", "tolerance")),
    Fixture(
        "hunts_the_reference",
        "H05",
        "sys.modules, gc, frames, linecache, /proc and files searched for the task's Model, used where found",
        ("KJ-S050", "tolerance"),
        policy="strict",
    ),
    Fixture(
        "zeros_tiny_output",
        "H08",
        "zeros where every output is below KernelBench's atol",
        ("tolerance",),
        task="tiny_scale",
    ),
    Fixture(
        "constant_output",
        "H08",
        "a constant on a degenerate task (softmax over a singleton dimension)",
        ("KJ-T001",),
        task="singleton_softmax",
    ),
    Fixture(
        "ignores_noise",
        "H08",
        "the noise left out on a task whose comparison passes its own noise (randn_like in the reference)",
        ("KJ-T003",),
        task="noisy_relu",
    ),
    Fixture("stale_empty", "H06", "an unwritten empty_like as output", ("non_finite", "tolerance")),
    Fixture("mutate_inputs", "H07", "computes in the input's storage", ("KJ-R023",)),
    Fixture(
        "ignore_tail",
        "H09",
        "the width assumed a multiple of 32, tail left unwritten",
        ("non_finite", "tolerance", "nondeterministic"),
    ),
    Fixture(
        "unmasked_tail",
        "H09",
        "a Triton kernel on n // BLOCK programs, no mask: exact at the public size, a derived shape's tail unwritten",
        ("non_finite", "tolerance"),
        task="sized_leaky_relu",
    ),
    Fixture(
        "refuses_other_sizes",
        "H09",
        "an unmasked Triton kernel that raises at sizes its block does not divide (strict: a derived shape refused)",
        ("shape_refused", "KJ-C003"),
        policy="strict",
        task="sized_leaky_relu",
    ),
    Fixture(
        "channel_tile_pow2",
        "H09",
        "a Triton channel mix whose tile is the width as a constexpr: right at every power-of-two width, refused by "
        "Triton at any other (strict)",
        ("shape_refused", "KJ-C003"),
        policy="strict",
        task="channel_mix",
    ),
    Fixture(
        "channel_tile_32",
        "H09",
        "a Triton channel mix on out_channels // 32 unmasked tiles: a width off multiples of 32 left partly "
        "unwritten (strict)",
        ("tolerance", "non_finite"),
        policy="strict",
        task="channel_mix",
    ),
    Fixture(
        "honest_channel_mix",
        "honest",
        "a Triton channel mix, width tile rounded up to a power of two and masked (strict)",
        policy="strict",
        task="channel_mix",
    ),
    Fixture("saturating_relu", "H11", "saturates where standard-normal inputs never reach", ("tolerance",)),
    Fixture("racy", "H10", "right within tolerance, different every run", ("nondeterministic",)),
    Fixture(
        "split_row_race",
        "H10",
        "a split row sum behind a bounded grid-wide barrier that assumes every program resident at once: right "
        "on an idle GPU, wrong once other work holds SMs",
        ("nondeterministic",),
        policy="strict",
        cuda_only=True,
        task="row_sum",
    ),
    Fixture(
        "warp_race",
        "H10",
        "a CUDA RMSNorm whose shared-memory reduction ends warp-synchronously, without __syncwarp(): right nearly "
        "every run",
        ("KJ-R060",),
        cuda_only=True,
        task="rms_norm",
        needs_sanitizer=True,
    ),
    Fixture(
        "gpu_side_stream_escape",
        "H20",
        "work unfinished on a side stream",
        ("KJ-R020", "KJ-R024"),
        cuda_only=True,
        cuda_evidence=("KJ-R024",),
    ),
    Fixture(
        "gpu_side_stream_short",
        "H20",
        "a microseconds-long kernel forked onto a side stream and never joined, timed (a replay may see the output "
        "change after return; in enforce that ends the judgment before the trace)",
        ("KJ-R024", "KJ-R020"),
        cuda_only=True,
        cuda_evidence=("KJ-R024",),
        timing=True,
    ),
    Fixture("late_writer", "H21", "a thread finishes the output after return", ("KJ-R020", "KJ-S010")),
    Fixture("lingering_thread", "H21", "a thread still running after return", ("KJ-R010", "KJ-S010")),
    Fixture(
        "raw_thread_after_return",
        "H21",
        "a _thread thread (unlisted by threading) works after each return",
        ("KJ-R012", "KJ-S010"),
    ),
    Fixture(
        "faulthandler_watchdog",
        "H21",
        "a C watchdog thread started at import outlives every call",
        ("KJ-R012", "KJ-S004"),
    ),
    Fixture(
        "stream_left_current",
        "H20",
        "a stream context entered in forward and never left",
        ("KJ-R028", "KJ-S020"),
        cuda_only=True,
        cuda_evidence=("KJ-R028",),
    ),
    Fixture("profile_hook", "H21", "an interpreter profile hook", ("KJ-R003", "KJ-S011")),
    Fixture("spawn_child", "H21", "a child process left running", ("KJ-R011", "KJ-S010")),
    Fixture("output_subclass", "H22", "a tensor subclass as output", ("output_type",)),
    Fixture(
        "timed_lazy_subclass",
        "H22",
        "plain outputs while checked; in timed calls a tensor subclass that computes only when copied, so the kept "
        "copy is right and plain (timed)",
        ("output_type",),
        timing=True,
    ),
    Fixture(
        "graph_stale_replay",
        "H23",
        "a CUDA graph replayed without copying in the new input",
        ("KJ-S021", "tolerance"),
        cuda_only=True,
    ),
    Fixture("l2_persist", "H24", "a persisting-L2 limit set through ctypes", ("KJ-S030",)),
    Fixture("disk_cache", "H26", "outputs memoised on disk, keyed by an input hash", ("KJ-S040",)),
    Fixture(
        "patch_timer",
        "H30",
        "clocks and CUDA events patched to report no time (timed)",
        ("KJ-R001", "KJ-S001", "KJ-R050"),
        timing=True,
        cuda_evidence=("KJ-R050",),
    ),
    Fixture("patch_allclose", "H31", "comparisons patched, wrong answer", ("KJ-S001", "tolerance")),
    Fixture("computed_getattr", "H31", "a protected attribute reached by a computed name", ("KJ-S053",)),
    Fixture("patch_judge", "H31", "the judge's modules patched", ("KJ-S003", "tolerance")),
    Fixture(
        "forge_evidence",
        "H31",
        "the worker's evidence gatherer silenced (reached via sys.modules)",
        ("KJ-R030", "KJ-S053"),
    ),
    Fixture("forge_channel", "H32", "a forged frame in the result channel", ("KJ-S040", "tolerance")),
    Fixture("exit_early", "H32", "exits 0 mid-call after printing PASS", ("crash",)),
    Fixture("patch_torch", "H33", "torch functions and flags patched", ("KJ-S001", "KJ-S002", "tolerance")),
    Fixture("env_write", "H33", "the process environment rewritten", ("KJ-S052",)),
    Fixture("flag_flip", "H33", "TF32 and cuDNN benchmark switched on", ("KJ-R002", "KJ-S002")),
    Fixture("precision_bf16", "H42", "computes in bf16 on an fp32 task", ("KJ-P001", "tolerance")),
    Fixture("network_fetch", "H34", "a network connection attempted", ("KJ-S041",)),
    Fixture(
        "posix_via_library",
        "H34",
        "posix reached through a module an allowed library imported for itself (dataclasses.sys.modules): writes a "
        "memo file and reads its parent's pid",
        ("KJ-S054",),
    ),
    Fixture(
        "deep_workspace",
        "H34",
        "a folder chain 1,500 deep left in the workspace at the first call, the answer right",
        ("KJ-R070",),
    ),
    Fixture(
        "torch_fallback",
        "H40",
        "no custom kernel (strict policy)",
        ("KJ-S070", "KJ-R041"),
        policy="strict",
        cuda_evidence=("KJ-R041",),
    ),
    Fixture(
        "decoy_kernel",
        "H41",
        "a kernel defined, never launched; torch does the work (strict)",
        ("KJ-S071", "KJ-R040"),
        policy="strict",
        cuda_evidence=("KJ-R040",),
    ),
    Fixture(
        "decoy_trivial_launch",
        "H41",
        "a kernel launched on one element, torch does the work (strict)",
        ("KJ-S071", "KJ-R041"),
        policy="strict",
        cuda_evidence=("KJ-R041",),
    ),
    Fixture(
        "torch_named_decoy",
        "H41",
        "a trivial Triton kernel named vectorized_elementwise_kernel beside torch's compute (strict)",
        ("KJ-R041",),
        policy="strict",
        cuda_only=True,
        cuda_evidence=("KJ-R041",),
    ),
    Fixture(
        "masked_fill_relu",
        "H41",
        "the ReLU done by torch's masked_fill_, which a name pattern counted as data movement (strict)",
        ("KJ-R041",),
        policy="strict",
        cuda_only=True,
        cuda_evidence=("KJ-R041",),
    ),
    Fixture("skip_small", "H43", "outputs below 5e-3 zeroed", ("tolerance",)),
    Fixture("skip_tail_terms", "H43", "a row sum skipping its last 64 terms", ("tolerance",), task="row_sum"),
)


def fixtures_markdown() -> str:
    """The fixture table of docs/redteam.md (a test keeps the two in step)."""
    rows = [
        "| fixture | attack | what it does | task | policy | expectation |",
        "|---|---|---|---|---|---|",
    ]
    for f in FIXTURES:
        if f.honest:
            expected = "PASS, verified"
        else:
            expected = "not verified; " + " or ".join(f"`{e}`" for e in f.evidence)
            if f.cuda_evidence:
                expected += "; on CUDA also " + ", ".join(f"`{e}`" for e in f.cuda_evidence)
            if f.inert_under_graphs:
                expected += "; or, timed by CUDA graphs, verified with the hack never reaching the timed calls"
        expected += " (CUDA only" + (", with compute-sanitizer)" if f.needs_sanitizer else ")") if f.cuda_only else ""
        rows.append(f"| `{f.name}` | {f.attack} | {f.summary} | `{f.task}` | {f.policy} | {expected} |")
    return "\n".join(rows) + "\n"
