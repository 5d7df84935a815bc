"""Which stage writes what: each group of a judgment's state (judgment/stages/state.py) is written only by the modules
`OWNERS` names for it, read from every assignment, augmented assignment, deletion and mutating call in judgment/."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import kerneljudge.judgment
from kerneljudge.judgment.stages import state as state_module
from kerneljudge.judgment.stages.state import OWNERS, JudgmentState

JUDGMENT = Path(kerneljudge.judgment.__file__).parent
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "enter_context", "close"}


def group_of(node: ast.expr) -> str | None:
    """The state group an expression reaches into (`state.calls.signature[...]` -> "calls"), or None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    chain: list[str] = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    chain.reverse()
    if not isinstance(node, ast.Name) or len(chain) < 2:
        return None
    if chain[0] == "view":  # self.view: the timing pair's view of the state (timing_ahead.pair_view)
        chain = chain[1:]
    return chain[0] if chain[0] in OWNERS and len(chain) >= 2 else None


def writes(source: str) -> list[tuple[str, int]]:
    """Each write into a state group in `source`: (group, line)."""
    found: list[tuple[str, int]] = []

    def targets(target: ast.expr) -> list[ast.expr]:
        return [t for item in target.elts for t in targets(item)] if isinstance(target, ast.Tuple) else [target]

    for node in ast.walk(ast.parse(source)):
        written: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            written = [t for target in node.targets for t in targets(target)]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            written = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            written = [node.func.value]
        found += [(group, node.lineno) for group in map(group_of, written) if group is not None]
    return found


def judgment_modules() -> dict[str, str]:
    return {path.stem: path.read_text() for path in JUDGMENT.rglob("*.py") if path.name != "__init__.py"}


def test_every_group_is_written_only_by_its_owners():
    strays = [
        f"{name}.py:{line} writes `{group}`, which only {', '.join(OWNERS[group])} may write"
        for name, source in judgment_modules().items()
        for group, line in writes(source)
        if name not in OWNERS[group]
    ]
    assert not strays, "\n".join(strays)


def test_every_owner_named_writes_its_group():
    """No stale owner: a module named for a group writes it."""
    written = {(name, group) for name, source in judgment_modules().items() for group, _ in writes(source)}
    stale = [f"{owner} owns `{group}` but never writes it" for group, owners in OWNERS.items() for owner in owners]
    stale = [s for s in stale if (s.split()[0], s.split("`")[1]) not in written]
    assert not stale, stale


@pytest.mark.parametrize(
    "line",
    [
        "state.calls.signature = {}",
        "state.calls.tolerances['float32'] = 1",
        "state.checked.trials.append(record)",
        "state.timed.checks += 1",
        "a, state.build.device = 1, 'cpu'",
        "self.view.calls.signature = signature",
        "del state.trace_log.calls[0]",
    ],
)
def test_the_scan_sees_each_form_of_write(line):
    assert len(writes(line)) == 1


def test_reads_and_the_verdict_accumulators_are_not_writes():
    source = "x = state.calls.signature\nstate.findings.append(f)\nstate.stages_s['build'] = 1\nf(state.build.hello)"
    assert writes(source) == []


def test_each_group_is_a_field_of_the_state_with_a_type_of_its_own():
    fields = {f.name: f for f in dataclasses.fields(JudgmentState)}
    for group in OWNERS:
        assert group in fields, group
        made = fields[group].default_factory()  # type: ignore[misc]
        assert dataclasses.is_dataclass(made) and type(made).__module__ == state_module.__name__
