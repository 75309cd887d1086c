"""Unit-test fixtures: ``rig`` (adapters and gates, always torn down) and ``mem``.

The ``pytest_collection_modifyitems`` hook records each collected test's
``rule`` markers for ``test_rule_coverage.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.factory import AdapterFactory
from tests.unit._rig import RULE_MAP_ENV, RULES_KEY, Rig

UNIT_DIR = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Record ``{nodeid: [rules]}`` for tests under tests/unit, before any deselection."""
    rules: dict[str, list[str]] = {}
    for item in items:
        if UNIT_DIR not in Path(str(item.path)).resolve().parents:
            continue
        rules[item.nodeid] = [str(a) for m in item.iter_markers("rule") for a in m.args]
    config.stash[RULES_KEY] = rules
    dump = os.environ.get(RULE_MAP_ENV)
    if dump:
        Path(dump).write_text(json.dumps(rules))


@pytest.fixture
def rig(
    adapter_factory: AdapterFactory, adapter_spec: str, request: pytest.FixtureRequest
) -> Iterator[Rig]:
    """Builds adapters from the factory under test; releases gates, then stops them all."""
    made = Rig(adapter_factory, adapter_spec, request.node.nodeid)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def mem() -> MemoryConnector:
    return MemoryConnector()
