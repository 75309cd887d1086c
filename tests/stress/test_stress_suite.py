"""The suite list that tools (``chunk-adapter verify``) drive is well formed."""

from __future__ import annotations

import re

from chunk_adapter.stress import STATES, scenarios
from chunk_adapter.stress.stage import plan


def test_the_suite_names_each_run_once_and_the_rules_it_checks() -> None:
    for quick in (False, True):
        runs = scenarios(5, quick=quick)
        names = [name for name, _, _ in runs]
        assert len(names) == len(set(names)), names
        for name, rules, run in runs:
            assert rules and all(re.fullmatch(r"R\d+", r) for r in rules), (name, rules)
            assert callable(run) and run.seconds > 0, (name, run)
        assert plan("quick" if quick else "ci") == names
    full = {name for name, _, _ in scenarios(5)}
    assert {f"stop: {state}" for state in STATES} <= full
    assert len(scenarios(5, quick=True)) < len(full)


def test_only_the_loopback_run_is_advisory_and_it_comes_last() -> None:
    runs = scenarios(5)
    advisory = [name for name, _, run in runs if run.advisory]
    assert advisory == ["put failures, loopback"] == [runs[-1][0]]
    assert runs[-1][2].kwargs["loopback"] is True
    assert not any(run.kwargs.get("loopback") for _, _, run in runs[:-1])
