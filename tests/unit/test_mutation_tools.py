"""The mutation run's own logic (mutation/, docs/quality.md): outcome classification,
the import guard, and the mutant selection. The run itself is ``tox -e mutation``."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

MUTATION_DIR = Path(__file__).resolve().parents[2] / "mutation"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_mutation_{name}", MUTATION_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"cannot load mutation/{name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


vm = _load("verify_mutant")
sm = _load("select_mutants")


def _report(verdict: str, failed: list[list[str]]) -> dict[str, Any]:
    checks = [
        {"stage": "s", "name": f"c{i}", "verdict": "fail", "rules": rules}
        for i, rules in enumerate(failed)
    ]
    rules = sorted({r for rs in failed for r in rs})
    return {
        "verdict": verdict,
        "rules": [{"rule": r, "verdict": "FAIL"} for r in rules],
        "checks": [{"verdict": "pass", "rules": ["R1"]}, *checks],
    }


def test_confirmed_violation_is_a_kill_named_by_its_root_causes() -> None:
    outcome, why = vm.classify(1, _report("violation", [["R16", "R14"], ["R9", "R11"]]))
    assert outcome == "killed"
    assert why.endswith("violation of R16,R9 [s/c0; s/c1]")
    assert vm.exit_status(outcome) == 1


@pytest.mark.parametrize(
    ("code", "report", "outcome"),
    [
        (0, _report("pass", []), "survived"),
        (3, _report("inconclusive", []), "undecided"),
        (None, None, "undecided"),  # ran past the limit
        (2, None, "incompetent"),  # the mutant cannot be imported or built
        (1, None, "incompetent"),  # exit 1 from a crash, not from a confirmed violation
        (1, _report("inconclusive", []), "incompetent"),
        (-9, None, "incompetent"),
        (120, None, "incompetent"),
    ],
)
def test_only_a_confirmed_violation_counts_as_a_kill(
    code: int | None, report: dict[str, Any] | None, outcome: str
) -> None:
    got, why = vm.classify(code, report)
    assert got == outcome, why
    assert vm.exit_status(got) == 0  # cosmic-ray counts it as survived: never an inflated kill


def test_unknown_outcome_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'dead'"):
        vm.exit_status("dead")


@pytest.mark.parametrize("outcome", ["killed", "survived", "undecided", "incompetent"])
def test_outcome_line_reads_back(outcome: str) -> None:
    why = "verify exit 1: violation of R4 (snapshot)"
    output = f"$ python -m chunk_adapter verify\nreport...\n{vm.MARKER} {outcome} ({why})\n"
    assert vm.parse_outcome(output) == (outcome, why)


@pytest.mark.parametrize("output", [None, "", "Traceback ...\nKeyboardInterrupt\n", "timeout"])
def test_missing_outcome_line_is_incompetent(output: str | None) -> None:
    assert vm.parse_outcome(output)[0] == "incompetent"


def test_import_guard_reports_a_copy_that_is_not_imported(tmp_path: Path) -> None:
    """A --src without the package: chunk_adapter resolves elsewhere, and the guard says where."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    where = vm._check_imports(tmp_path / "src", env)
    assert where is not None and where.endswith("adapter.py")
    real_src = Path(sys.modules["chunk_adapter"].__file__ or "").resolve().parents[1]
    assert vm._check_imports(real_src, env) is None


SOURCE = """\
from __future__ import annotations
class A:
    def f(self, x: int | None) -> int:
        self.log.warning("x=%d", x + 1)
        (self.log.warning if x else self.log.debug)("y=%d", x - 1)
        return x + 1

    def check_invariants(self):
        assert self.n >= 0
"""


def _mutants(module: str) -> list[Any]:
    m = sm.Mutant
    return [
        m(module, "core/ReplaceBinaryOperator_Add_Sub", 0, 4, 36, "f"),  # in a log call
        m(module, "core/ReplaceBinaryOperator_Sub_Add", 0, 5, 63, "f"),  # in a log call
        *(
            m(module, f"core/ReplaceBinaryOperator_Add_{o}", 1, 6, 15, "f")
            for o in ["Sub", "Mul", "Div"]
        ),
        m(module, "core/NumberReplacer", 2, 6, 17, "f"),
        m(module, "core/ReplaceBinaryOperator_BitOr_BitAnd", 0, 3, 23, "f"),  # annotation
        m(module, "core/ReplaceComparisonOperator_GtE_Lt", 0, 9, 15, "check_invariants"),
    ]


def test_log_call_arguments_are_found() -> None:
    spans = sm.log_call_spans(SOURCE)
    assert ((4, 25), (4, 31)) in spans  # the format string
    assert ((4, 33), (4, 38)) in spans  # x + 1
    assert ((5, 60), (5, 65)) in spans  # x - 1 of the conditional logger
    assert all(start[0] in (4, 5) for start, _ in spans)  # not the return on line 6


def test_selection_scopes_then_takes_one_per_site(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    mutants = _mutants("m.py")
    sel = sm.select(
        mutants, exclude_definitions=["check_invariants"], sample=None, seed=1, root=tmp_path
    )
    assert (sel.generated, sel.out_of_scope, sel.sites) == (len(mutants), 4, 2)
    assert [(m.line, m.col) for m in sel.chosen] == [(6, 15), (6, 17)]
    # without the __future__ import annotations are evaluated: a mutant there counts
    (tmp_path / "m.py").write_text(SOURCE.replace("from __future__ import annotations", "#"))
    sel = sm.select(
        mutants, exclude_definitions=["check_invariants"], sample=None, seed=1, root=tmp_path
    )
    assert [(m.line, m.col) for m in sel.chosen] == [(3, 23), (6, 15), (6, 17)]


def test_sample_is_seeded_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n" * 50)
    mutants = [sm.Mutant("m.py", "core/NumberReplacer", i, i + 1, 4, None) for i in range(50)]

    def keys(seed: int, sample: int) -> list[str]:
        chosen = sm.select(mutants, exclude_definitions=(), sample=sample, seed=seed, root=tmp_path)
        return [m.key for m in chosen.chosen]

    assert keys(3, 10) == keys(3, 10)
    assert len(keys(3, 10)) == 10 and len(set(keys(3, 10))) == 10
    assert keys(3, 10) != keys(4, 10)
    assert len(keys(3, 500)) == 50
    with pytest.raises(ValueError, match="got 0"):
        keys(3, 0)
