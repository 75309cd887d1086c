"""The rule registry (src/chunk_adapter/rules.py) is docs/contract.md's list of rules, and a
rule travels as its number: equal to, hashed as, serialised and pickled as ``"R16"``."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from chunk_adapter import rules
from chunk_adapter.errors import InvalidValue
from chunk_adapter.outcome import RULES
from chunk_adapter.rules import ALL, R16, VERIFIED, Rule, rule

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract.md"


def contract_rules() -> list[tuple[int, str, str]]:
    """``(number, name, section)`` of every ``**Rn — Name.**`` paragraph of the contract."""
    found, section = [], ""
    for line in CONTRACT.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        match = re.match(r"^\*\*R(\d+) — (.*?)\.\*\*", line)
        if match:
            found.append((int(match.group(1)), match.group(2), section))
    return found


def test_the_registry_is_the_contracts_list_of_rules() -> None:
    assert [(r.number, r.name, r.section) for r in ALL] == contract_rules()
    assert [str(r) for r in ALL] == [f"R{n}" for n in range(1, len(ALL) + 1)]
    assert all(getattr(rules, str(r)) is r for r in ALL)  # R16 names the constant R16


def test_verify_checks_r1_to_r24_and_the_rest_bind_the_reference_adapter() -> None:
    assert VERIFIED == RULES == ALL[:24]
    assert not any(r.verified for r in ALL[24:])


def test_a_rule_is_its_number_wherever_it_travels() -> None:
    assert R16 == "R16" and hash(R16) == hash("R16") and {"R16": 1}[R16] == 1
    assert json.dumps({"rule": R16}) == '{"rule": "R16"}'
    again = pickle.loads(pickle.dumps(R16))
    assert again is R16 and isinstance(again, Rule)
    assert R16.heading == "R16 — `cleanup_receiver` is a commit fence"


def test_a_rule_is_found_by_name_or_number_and_a_bad_one_is_named() -> None:
    assert rule("r16") is rule(16) is rule(" R16 ") is R16
    with pytest.raises(InvalidValue, match=r"'R33' is not a contract rule; the rules are R1..R32"):
        rule("R33")


def test_the_simulate_stage_plans_the_oracle_rules_and_bounded_state() -> None:
    from chunk_adapter.explore.stages.simulate import RULES as SIMULATED
    from chunk_adapter.rules import ORACLE, R21, R24

    assert tuple(r for r in VERIFIED if r not in (R21, R24)) == ORACLE
    # R21 by the worlds' calls with a wrong argument, R24 from what adapters hold at a cut
    assert (*ORACLE, R21, R24) == SIMULATED
