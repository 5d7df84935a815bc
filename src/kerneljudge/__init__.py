"""kerneljudge: a judge for AI-written GPU kernels that reward hacks cannot fool.

The public surface (`judge`, `judge_group`, `JudgeConfig`, `Record`, `Task`, `Candidate`) is re-exported lazily so
that a worker process, which imports ``kerneljudge.worker``, loads nothing of the parent side. The layout, its order of
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
# (docs/batch.md, "The key"). What each version changed: CHANGELOG.md.
__version__ = "0.3.21"

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

__all__ = ["Candidate", "JudgeConfig", "Record", "Task", "__version__", "judge", "judge_group"]

_EXPORTS = {
    "judge": "kerneljudge.judgment.pipeline",
    "judge_group": "kerneljudge.judgment.group",
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
