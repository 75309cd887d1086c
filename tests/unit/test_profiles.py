"""The profiles come from one table with one default; every user reads it."""

from __future__ import annotations

import inspect

import pytest

from chunk_adapter import profiles
from chunk_adapter.cli import _parser
from chunk_adapter.errors import InvalidValue
from chunk_adapter.explore.stages import explore as explore_stage
from chunk_adapter.stress.stage import plan as stress_plan
from chunk_adapter.verify import PROFILES, check_adapter, verify


def test_verify_exports_the_one_table() -> None:
    assert PROFILES is profiles.PROFILES


def test_every_default_profile_is_the_tables_default() -> None:
    assert profiles.DEFAULT == "ci"
    for fn in (verify, check_adapter):
        assert inspect.signature(fn).parameters["profile"].default == profiles.DEFAULT
    args = _parser().parse_args(["verify"])
    assert args.profile == profiles.DEFAULT


def test_an_unset_environment_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(profiles.ENV, raising=False)
    assert profiles.current_profile() is profiles.PROFILES[profiles.DEFAULT]
    monkeypatch.setenv(profiles.ENV, "nope")
    with pytest.raises(InvalidValue, match="unknown profile 'nope'"):
        profiles.current_profile()


def test_only_the_quick_profile_shortens_the_stress_plan() -> None:
    full = stress_plan("ci")
    assert stress_plan("hunt") == full
    quick = stress_plan("quick")
    assert set(quick) < set(full)
    assert not hasattr(explore_stage, "EXPLORE_RUNS")  # the runs are the table's
    assert [p.keeps_examples for p in profiles.PROFILES.values()] == [False, False, True]


def test_the_proofs_each_profile_runs_are_the_tables() -> None:
    from chunk_adapter.explore.scenarios.library import PROVE
    from chunk_adapter.explore.stages import proofs

    assert not hasattr(proofs, "PROOF_PROFILES")  # no second table beside PROFILES
    table = {name: p.proofs for name, p in profiles.PROFILES.items()}
    assert table == {"quick": 0, "ci": 0, "hunt": len(PROVE)}, (
        f"hunt proves every scenario of explore.scenarios.library.PROVE ({len(PROVE)}), the others "
        f"none; the table says {table}: set Profile.proofs in profiles.PROFILES"
    )
    assert proofs.proof_plan("ci", lambda question: ()) == []
    hunt = proofs.proof_plan("hunt", lambda question: ())
    assert [name for name, _ in hunt] == [f"{n} / proof" for n in PROVE] + ["proofs"]
