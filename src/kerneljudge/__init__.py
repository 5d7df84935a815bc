"""kerneljudge: a judge for AI-written GPU kernels that reward hacks cannot fool.

The public surface (`judge`, `JudgeConfig`, `Record`, `Task`, `Candidate`) is re-exported lazily so that a worker
process, which imports ``kerneljudge.worker``, loads nothing of the parent side. The layout, its order of
dependencies and its trust boundary: docs/architecture.md.

- `config.py`, `errors.py`, `logs.py`: the foundations, at the bottom of the order: the configuration, the typed
  exceptions, the loggers (the worker side imports none of them);
- `__main__.py`: ``python -m kerneljudge``, the command line (cli/);
- one judgment: `judgment/` (the parent's pipeline and stages), `protocol/` (what parent and workers share),
  `worker/` (only what runs in a worker), `sandbox/`, `preflight/`, `checks/`, `timing/`;
- what is judged: `sources/` (the texts), `tasks/` (task formats, lint), `suite/` (the built-in tasks);
- what is made of it: `results/` (records and what reads them), `runs/` (batches, backends), `report/`;
- the judge as a reward: `api/` (the HTTP contract), `client/`, `serve/`, `adapters/` (trainers);
- around it: `generate/` (candidates from a model), `redteam/` (known reward hacks), `cli/`.
"""

from __future__ import annotations

from typing import Any

# The judge's version is part of every store key (store.ENVIRONMENT_KEY_FIELDS): raise it with any change that
# can alter a verdict, a finding or a figure, so that a store never answers for a judge that has changed since
# (docs/batch.md, "The key"). 0.2.0: derived shape families, drained samples, side-stream escapes by structure;
# 0.3.0: compute-sanitizer and replays under perturbation; 0.3.1: the precursor's sleep calibrated only within
# plausible GPU clocks (a candidate whose CUDA events lie fails by the clock check, not by a timeout); 0.3.2:
# the last calls of two requests after the measurement checked (judgment/stages/timed_rechecks.py, `recheck_last`);
# 0.3.3: enforce times nothing more once a CUDA graph's capture shows unjoined work (KJ-R024,
# judgment/stages/timing.py); 0.3.4: the timing pool made of fresh hidden draws in every hardened judgment, not of the
# last trials' inputs (judgment/stages/timing.pool_sets: a memo kept by a checked worker answers no timed call); 0.3.5:
# work a drained sample left behind is an escape only where it is a material share of the sample (timing/drain.py), and
# a judgment that runs out of device memory where the judge's own rule needs more than the GPU holds is the judge's
# error, not the candidate's failure (gate.py; the memory poisoned before a call is poisoned as far as it fits);
# 0.3.6: the outputs measured requests keep are checked after the samples, outside the measuring hold (a failing
# check ends the judgment after the samples, not among them; its timing unmeasured, with why), and a killed worker
# is waited for until every process of its tree has exited, its CUDA context torn down (sandbox/ending.kill_tree);
# 0.3.7: the timed call whose output is checked is named by the parent after its sample ran, and every output of a
# sample is held alike until then, in both workers (judgment/stages/kept_call.py; H03: a candidate that read the
# position from its worker's frames passed verified on the CPU), the worker's copy path watched (KJ-R001), and a
# candidate whose outputs share one storage timed one call a sample, the reference alike (an honest one failed its timed
# check); 0.3.8: the seal between a timed sample and its kept copy (worker/seal/sample.py: a hook left behind mended the
# named output, KJ-R026) and the kept copy's digests taken as it is made (a copy mended before its fetch fails);
# 0.3.9: the commit (worker/seal/commit.py): every output of the checked sample digested and sent before the parent
# names the call (the seal's own object blinded passed verified by 0.3.8), and each side's time beyond its claimed
# calls, in the commit and around the samples, set against the reference's (judgment/stages/untimed_work.py, KJ-R027);
# 0.3.10: a timed sample whose checked output shares storage with a later call's is KJ-R022 (an error) as well as
# the failure it was (judgment/stages/kept_call.sample_findings; the red team's `timing_cache` on an H100), and a
# signal's C handler opens the seal only where its code lies outside the installed libraries
# (worker/seal/signal_handlers.py: Triton's compiler sets nine at its first compile, and honest Triton candidates with a
# cold cache failed KJ-R026 on an H100); 0.3.11: the commit's digest a tree of mixed words (worker/seal/digest.py), not
# evidence.digest's linear sums, which a mend after the name could be moved back onto; 0.3.12: on a CUDA device the
# commit's digests replayed from CUDA graphs (worker/seal/digest_graphs.py: the tree's launches made one commit 1.6 ms
# on an H100, and KJ-R027 allows work in the commit window in proportion), and the seal looks at torch.cuda's graph
# class and the names they use; 0.3.13: the worker's copy path watched (evidence.WORKER_PATHS) names the commit's digest
# functions, in place of a name renamed away in 0.3.11 that watched nothing; 0.3.14: on a CUDA device the commit's tree
# climbed by fused kernels (worker/seal/digest_kernels.py: four leaves, then three levels a launch), the tree padded per
# step to match, and the reference's commit digests the candidate's number of outputs, the two commits matched on a CUDA
# device without the candidate's claimed work (judgment/stages/untimed_work.py: half a call's work left to the commit
# passed verified); 0.3.15: each side's untimed spans set against each other by their least, not their median, which a
# loaded machine raised (a loaded reference's commits let `commit_window_worker` pass verified on CI), and the commits
# matched on the CPU too, within the whole of the reference's span there (judgment/stages/untimed_work.NOISE_SHARE);
# 0.3.16: what a candidate leaves behind read as hostile data (a workspace past the walk's bounds is KJ-R070, the
# candidate's failure, where a chain 1,200 deep crashed the judge), the reference run again from another random state (a
# task whose comparison passes its own noise is KJ-T003, the oracle's float32 fallback reseeded), an IPC namespace and
# clone's namespace flags refused in the sandbox; 0.3.17: hidden sizes by class, the allow-list preflight, native
# threads judged (KJ-R012); 0.3.18: the judge's own threads around a call (a trace's profiler, a perturbed replay's
# CUDA work) no longer KJ-R012 on CUDA.
__version__ = "0.3.18"

# Raises that changed only what a timed judgment does, each with the version before it: a judgment without
# timing by that version is the same judgment, so the conformance ledger carries its rows over
# (benchmarks/conformance_ledger.py; stores keep the strict key).
UNTIMED_SAME_AS = {
    "0.3.15": "0.3.14",
    "0.3.14": "0.3.13",
    "0.3.13": "0.3.12",
    "0.3.12": "0.3.11",
    "0.3.11": "0.3.10",
    "0.3.10": "0.3.9",
    "0.3.9": "0.3.8",
    "0.3.8": "0.3.7",
    "0.3.7": "0.3.6",
    "0.3.6": "0.3.5",
    "0.3.4": "0.3.3",
    "0.3.3": "0.3.2",
    "0.3.2": "0.3.1",
}
# Raises that changed only judgments that fail in enforce mode, each with the version before it: a judgment
# that passed by that version, with timing or without, is the same judgment (a row of it answers too).
PASSED_SAME_AS = {
    "0.3.13": "0.3.12",
    "0.3.12": "0.3.11",
    "0.3.11": "0.3.10",
    "0.3.10": "0.3.9",
    "0.3.5": "0.3.4",
    "0.3.3": "0.3.2",
}

__all__ = ["Candidate", "JudgeConfig", "Record", "Task", "__version__", "judge"]

_EXPORTS = {
    "judge": "kerneljudge.judgment.pipeline",
    "JudgeConfig": "kerneljudge.config",
    "Record": "kerneljudge.results.verdict",
    "Task": "kerneljudge.sources.task",
    "Candidate": "kerneljudge.sources.candidate",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kerneljudge' has no attribute {name!r}")
