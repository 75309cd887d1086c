"""Every rule of docs/contract.md has at least one unit test marked with it.

The rule list is parsed from docs/contract.md, so adding a rule there without a
test here fails this test. The markers come from the current session when it
collected every unit test file; otherwise (a single file, -k ...) from a
``pytest --collect-only`` of tests/unit in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit._rig import RULE_MAP_ENV, RULES_KEY

UNIT_DIR = Path(__file__).resolve().parent
CONTRACT = UNIT_DIR.parents[1] / "docs" / "contract.md"
RULE_HEADING = re.compile(r"^\*\*(R\d+) — ", re.MULTILINE)


def contract_rules() -> list[str]:
    rules = RULE_HEADING.findall(CONTRACT.read_text(encoding="utf-8"))
    assert rules, f"no rule headings (**Rn — ...) found in {CONTRACT}"
    return rules


def _rule_map(config: pytest.Config, tmp_path: Path) -> dict[str, list[str]]:
    collected = config.stash.get(RULES_KEY, {})
    files = {nodeid.split("::", 1)[0].rsplit("/", 1)[-1] for nodeid in collected}
    if {p.name for p in UNIT_DIR.glob("test_*.py")} <= files:
        return collected
    out = tmp_path / "rules.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            str(UNIT_DIR),
        ],
        env={**os.environ, RULE_MAP_ENV: str(out)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=UNIT_DIR.parents[1],
    )
    assert proc.returncode == 0 and out.exists(), (
        f"collecting tests/unit failed:\n{proc.stdout}{proc.stderr}"
    )
    rules: dict[str, list[str]] = json.loads(out.read_text())
    return rules


def test_rule_list_is_r1_to_r23() -> None:
    rules = contract_rules()
    assert rules == [f"R{n}" for n in range(1, len(rules) + 1)], f"rules not numbered 1..n: {rules}"
    assert len(rules) >= 23


def test_every_rule_has_a_unit_test(pytestconfig: pytest.Config, tmp_path: Path) -> None:
    rules = contract_rules()
    marked = _rule_map(pytestconfig, tmp_path)
    unknown = {
        nodeid: [r for r in names if r not in rules]
        for nodeid, names in marked.items()
        if any(r not in rules for r in names)
    }
    assert not unknown, f"tests marked with rules docs/contract.md does not have: {unknown}"
    covered = {r for names in marked.values() for r in names}
    missing = [r for r in rules if r not in covered]
    assert not missing, (
        f"rules with no test in tests/unit marked @pytest.mark.rule(...): {missing}; "
        "reproduce: python -m pytest tests/unit/test_rule_coverage.py"
    )
