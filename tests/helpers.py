"""Shared test helpers: paths to fixtures and a judge call that validates every record it returns."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from kerneljudge import JudgeConfig, judge
from kerneljudge.verdict import Record

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TASKS = FIXTURES / "tasks"
CANDIDATES = FIXTURES / "candidates"
EXAMPLES = ROOT / "examples"
SCHEMA_PATH = ROOT / "docs" / "schema" / "record.schema.json"

_validator = None


def validate_record(record: Record) -> dict:
    """Validate a record's JSON against the published schema (not the models that wrote it)."""
    global _validator
    if _validator is None:
        schema = json.loads(SCHEMA_PATH.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _validator = jsonschema.Draft202012Validator(schema)
    data = json.loads(record.to_json())
    _validator.validate(data)
    return data


def run_judge(task: str | Path, candidate: str | Path, **overrides) -> Record:
    """Judge on the CPU without timing unless asked; every record is schema-checked.

    The policy defaults to practical because most fixtures are plain torch; strict is asked for explicitly.
    """
    settings = {"device": "cpu", "timing": False, "timeout_s": 60.0, "policy": "practical", **overrides}
    record = judge(task, candidate, JudgeConfig(**settings))
    validate_record(record)
    return record
