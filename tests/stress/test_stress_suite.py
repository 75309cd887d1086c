"""The suite list that tools (``chunk-adapter verify``) drive is well formed."""

from __future__ import annotations

import re

from chunk_adapter.stress import STATES, scenarios


def test_the_suite_names_each_run_once_and_the_rules_it_checks() -> None:
    for quick in (False, True):
        runs = scenarios(5, quick=quick)
        names = [name for name, _, _ in runs]
        assert len(names) == len(set(names)), names
        for name, rules, run in runs:
            assert rules and all(re.fullmatch(r"R\d+", r) for r in rules), (name, rules)
            assert callable(run)
    full = {name for name, _, _ in scenarios(5)}
    assert {f"stop: {state}" for state in STATES} <= full
    assert len(scenarios(5, quick=True)) < len(full)
