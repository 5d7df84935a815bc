"""The published JSON Schema is the one the code writes, and it is a valid Draft 2020-12 schema."""

import json

import jsonschema
import pytest

from helpers import SCHEMA_PATH
from kerneljudge.results.verdict import SCHEMA_VERSION, Record, record_json_schema


def test_published_schema_matches_the_models():
    assert json.loads(SCHEMA_PATH.read_text()) == record_json_schema(), (
        "docs/schema/record.schema.json is stale: run `kerneljudge schema > docs/schema/record.schema.json`"
    )


def test_schema_is_valid_and_versioned():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def test_schema_rejects_a_record_with_an_unknown_status():
    schema = json.loads(SCHEMA_PATH.read_text())
    record = {"status": "MAYBE"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(record, schema)
    assert "status" in Record.model_fields
