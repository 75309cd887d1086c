"""The conformance suite as pytest tests: one test per verify check.

Run it against any adapter with::

    pytest --chunk-adapter my_pkg.adapters:make_adapter --pyargs chunk_adapter.conformance

Every check a stage plans (``Stage.plan``: the examples and probes, each stress
scenario, the state machines, each explorer scenario and strategy) is one test,
with a node id you can paste back to run that check alone::

    pytest --chunk-adapter my_pkg.adapters:make_adapter \\
        --pyargs 'chunk_adapter.conformance::test_check[examples-cleanup-fence]'

A stage runs once, in its own worker process with a deadline (as
``chunk-adapter verify`` does), when its first selected test runs; it runs only
the checks selected (by node id or ``-k``), and each test reports its own
check. A failing check fails its test with the root rule and cause on the
short summary line, the counterexample and the command that replays it. A
check that could not decide (inconclusive) is skipped with the reason, and the
pytest run then exits 3 unless something failed, as ``chunk-adapter verify``
does. A stage that cannot list its checks before it runs (an empty plan) is one
test for the whole stage, ``test_check[STAGE]``.
"""

from __future__ import annotations

import re

import pytest

from .finding import Finding, first_line
from .profiles import PROFILES
from .pytest_plugin import (
    SUITE,
    baseline_of,
    chunk_profile_of,
    mark_inconclusive,
    reliability_flag,
)
from .verify.report import VerifyReport
from .verify.result import CheckResult
from .verify.runner import verify
from .verify.stages import STAGES, Stage

__all__ = ["STAGE_FLOOR", "CheckViolation", "check_id", "pytest_generate_tests", "test_check"]

_REPORTS = pytest.StashKey[dict[str, VerifyReport]]()
"""The report of each stage run in this session (a stage runs once, for all its tests)."""
_STRENGTH = {"fail": 3, "inconclusive": 2, "skip": 1, "pass": 0}
STAGE_FLOOR = 60.0
"""The least a stage gets by default (``--chunk-max-seconds`` overrides): its share of the
profile's budget counts the pre-flight too, and a lost final alone costs 10 s per run
(twice, to confirm it). A budget is a cap: a fast adapter's stage ends when it is done."""


class CheckViolation(AssertionError):
    """A confirmed contract violation found by one check; ``headline`` is ``"R16: cause"``,
    ``finding`` the check's :class:`~chunk_adapter.finding.Finding` (its rules, the headline,
    the report's text and the replay)."""

    def __init__(self, headline: str, text: str, result: CheckResult) -> None:
        super().__init__(f"{headline}\n\n{text}")
        self.headline = headline
        self.result = result
        self.finding = Finding(result.rules, "", first_line(headline), text, result.replay)


def check_id(stage: str, check: str) -> str:
    """The pytest id of *check* in *stage*: ``examples-cleanup-fence`` (no spaces, no
    brackets, no profile settings: stable across profiles and verdicts)."""
    name = re.sub(r"\s*\(.*\)\s*$", "", check)  # "machines (ci: 150 examples x 40 steps)"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return f"{stage}-{slug}" if slug else stage


def _planned(profile: str) -> list[tuple[Stage, str]]:
    """``(stage, check)`` per test; ``(stage, "")`` for a stage with no plan (one test)."""
    return [(stage, check) for stage in STAGES for check in (stage.plan(profile) or [""])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.originalname != "test_check":
        return
    planned = _planned(chunk_profile_of(metafunc.config))
    ids = [check_id(stage.name, check) for stage, check in planned]
    assert len(set(ids)) == len(ids), f"two checks share a test id: {ids}"
    metafunc.parametrize(
        ("stage", "check"), [(stage.name, check) for stage, check in planned], ids=ids
    )


def _stage_report(
    request: pytest.FixtureRequest,
    stage: str,
    spec: str,
    profile: str,
    seed: int,
    max_seconds: float | None,
) -> VerifyReport:
    """The stage's report, run now for every selected test of the stage unless it already ran."""
    reports = request.config.stash.setdefault(_REPORTS, {})
    if stage not in reports:
        chosen = next(s for s in STAGES if s.name == stage)
        selected = {
            str(item.callspec.params["check"])
            for item in request.session.items
            if isinstance(item, pytest.Function)
            and item.nodeid.startswith(f"{SUITE}::test_check[")
            and item.callspec.params.get("stage") == stage
        }
        everything = set(chosen.plan(profile)) <= selected or "" in selected
        reports[stage] = verify(
            spec,
            profile=profile,
            max_seconds=max_seconds
            or max(STAGE_FLOOR, PROFILES[profile].budget * min(chosen.share, 0.45)),
            seed=seed,
            stages=[stage],
            checks=() if everything else sorted(selected),
            baseline=baseline_of(request.config),
            reliability=bool(request.config.getoption("--chunk-reliability")),
        )
    return reports[stage]


def _verdict(report: VerifyReport, stage: str, check: str) -> list[CheckResult]:
    """The results that decide this test, strongest first.

    Its own results; and the stage's results that belong to no planned check
    (a stage that was stopped, crashed or could not start) when the check
    itself did not decide (no result, or only "not reached").
    """
    planned = set(next(s for s in STAGES if s.name == stage).plan(report.profile))
    mine = [r for r in report.results if r.stage == stage]
    if check:
        own = [r for r in mine if r.name == check]
        if not any(r.verdict in ("pass", "fail") for r in own):
            own += [r for r in mine if r.name not in planned]
    else:
        own = mine
    return sorted(own, key=lambda r: -_STRENGTH[r.verdict])


def test_check(
    stage: str,
    check: str,
    adapter_spec: str,
    chunk_profile: str,
    chunk_seed: int,
    chunk_max_seconds: float | None,
    request: pytest.FixtureRequest,
) -> None:
    """The adapter passes this verify check (the rule and the cause named in a failure)."""
    __tracebackhide__ = True
    report = _stage_report(request, stage, adapter_spec, chunk_profile, chunk_seed,
                           chunk_max_seconds)  # fmt: skip
    results = _verdict(report, stage, check)
    if report.inconclusive:
        mark_inconclusive(request.config)  # the run exits 3 unless something failed
    if not results:
        mark_inconclusive(request.config)
        pytest.skip(f"INCONCLUSIVE {stage}/{check}: the stage reported nothing for this check")
    first = results[0]
    known = report.judgement
    if first.verdict == "fail" and known is not None:
        for group, by in known.accepted:
            if any(r is first for r in group.findings):
                pytest.xfail(
                    f"accepted: {group.rule or 'no rule'} — {group.cause} "
                    f"({by.reason or 'no reason given yet'})"
                )
    if first.verdict == "fail":
        rules = ", ".join(first.rules) or "no rule"
        alone = (
            f"this check alone: pytest --chunk-adapter {adapter_spec} --chunk-profile "
            f"{chunk_profile} --chunk-seed {chunk_seed}{reliability_flag(request.config)} "
            f"--pyargs '{request.node.nodeid}'"
        )
        text = "\n".join(
            part
            for part in (
                f"contract rules broken: {rules}",
                first.detail,
                f"confirmed: {first.confirmation}" if first.confirmation else "",
                f"reproduce with: {first.replay}" if first.replay else "",
                alone,
            )
            if part
        )
        rule = first.rules[0] if first.rules else "violation"
        headline = (
            first.evidence
            if first.evidence.startswith(f"{rule}:")
            else (f"{rule}: {first.evidence}")
        )
        raise CheckViolation(headline, text, first)
    if first.verdict == "inconclusive":
        pytest.skip(f"INCONCLUSIVE {first.stage}/{first.name}: {first.evidence}")
    if first.verdict == "skip":
        pytest.skip(f"not run: {first.evidence}")
