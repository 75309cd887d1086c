"""Stress reports say how to reproduce a failure, and the seed comes from one place."""

from __future__ import annotations

import pytest

from chunk_adapter.errors import InvalidValue
from chunk_adapter.stress import DEFAULT_SEED, SEED_ENV, StressFailure, StressReport, seed_from_env


def test_seed_defaults_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SEED_ENV, raising=False)
    assert seed_from_env() == DEFAULT_SEED
    monkeypatch.setenv(SEED_ENV, "1234")
    assert seed_from_env() == 1234


def test_a_malformed_seed_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_ENV, "twelve")
    with pytest.raises(InvalidValue, match=f"{SEED_ENV}='twelve'"):
        seed_from_env()


def test_a_failed_report_prints_seed_params_and_both_reproductions() -> None:
    report = StressReport("put_faults", {"seed": 77, "requests": 5, "put_rate": 0.5})
    report.fail("R9", "expected chunk id 3, got 4")
    text = report.describe("pkg.mod:factory", "tests/stress/test_x.py::test_y[0.5]")
    assert "R9: expected chunk id 3, got 4" in text
    assert "seed: 77" in text
    assert (
        f"{SEED_ENV}=77 python -m pytest 'tests/stress/test_x.py::test_y[0.5]' "
        "--adapter pkg.mod:factory" in text
    )
    assert "put_faults(load_factory('pkg.mod:factory'), seed=77, requests=5, put_rate=0.5)" in text
    with pytest.raises(StressFailure, match="seed: 77"):
        report.raise_if_failed("pkg.mod:factory")
    assert report.rules == ["R9"]


def test_a_passing_report_does_not_raise() -> None:
    report = StressReport("idle_polling", {"seed": 1})
    report.measure("cpu_seconds_per_second", 0.01)
    report.raise_if_failed()
    assert report.ok and "ok" in report.describe()


def test_outside_pytest_a_failed_report_gives_only_the_reproduction_that_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # as in a verify worker
    report = StressReport("put_faults", {"seed": 5})
    report.fail("R9", "expected chunk id 3, got 4")
    text = report.describe("pkg.mod:factory")
    assert "rerun the test" not in text and "not run under pytest" not in text
    assert "rerun in Python: " in text
