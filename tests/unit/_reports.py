"""Shared by the report tests: a verify report written as JSON, checked against its schema."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from chunk_adapter.verify.report import VerifyReport, write_json


def schema() -> dict[str, Any]:
    """report.schema.json, as the package ships it."""
    text = resources.files("chunk_adapter.verify").joinpath("report.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validated_json(report: VerifyReport, path: Path) -> dict[str, Any]:
    """*report* as ``verify --json`` writes it to *path*, validated by report.schema.json."""
    write_json(report, str(path))
    data: dict[str, Any] = json.loads(path.read_text())
    jsonschema.validate(data, schema())
    return data


def schema_properties() -> set[str]:
    return set(schema()["properties"])
