"""The ``stress`` stage of ``chunk-adapter verify``: the stress scenarios, seeded, within budget.

The plan is :func:`~chunk_adapter.stress.suite.scenarios`, in order. A
scenario starts only if its planned cost (``Scenario.seconds``) fits in what
is left of the stage's budget; one that does not is skipped (``skip``), and
the stage then reports its coverage ("7 of 14 scenarios"; the advisory
loopback run is not counted) as ``inconclusive``. A scenario that reaches the
budget while running (a slow adapter still delivering) is ``inconclusive``
too: a slow adapter is not a broken one.

A finding is confirmed as every stage confirms one (:mod:`chunk_adapter.confirm`):
**re-run** with the same seed, :data:`RERUNS` times while the budget allows,
it is ``fail`` (with ``confirmation="reproduced k of n"``) only if a re-run
breaks its root rule again, and the reference adapter (unless it is the
adapter under test) does not fail it: a reference failing it means the machine
was too slow or loaded for a time bound (``inconclusive``,
:func:`~chunk_adapter.factory.calibration_reference`); else ``inconclusive``. Under a
verify baseline that accepts every rule a finding breaks, it is not re-run: it is
reported as accepted, never a red, and its waits would spend the budget twice. A
scenario whose history shows an accepted root cause (the oracles let such a history
pass, :mod:`~chunk_adapter.oracles.accepted`) is set aside (``skip``, with the rules):
what else it saw — a stall, a count — may be that bug's consequence. Its run ends at the
first such sign (:func:`~.verdicts.judge_delivery`).
An advisory scenario
(the loopback variant) never fails: what it finds is a note. So is a
``stats()`` counter that disagrees with the recording (an operator API, not
the contract).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..confirm import Run, confirm
from ..factory import AdapterFactory, calibration_reference
from ..oracles import accepted
from ..outcome import REFERENCE_PASSED, CheckResult, StageContext, Verdict, reference_also_failed
from ..profiles import current_profile
from .report import StressReport
from .reproduce import STRESS
from .suite import Scenario

__all__ = ["END_MARGIN", "RERUNS", "plan", "planned", "run_stage"]

RERUNS = 2
"""Re-runs of a finding, with the same seed, before it is reported."""
END_MARGIN = 1.0
"""Seconds before the deadline by which the stage has yielded its last result."""


def plan(profile: str) -> list[str]:
    """The names of the scenarios this stage runs under *profile*, in order."""
    return [name for name, _ in planned(profile)]


def planned(profile: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(name, rules)`` of the scenarios this stage runs under *profile*, in order."""
    from .suite import scenarios

    return [
        (name, rules)
        for name, rules, _ in scenarios(0, quick=not current_profile(profile).stress_all)
    ]


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The stress scenarios (real threads, faults, blocked work, stop, pacing), planned
    within ``ctx.deadline`` (module doc)."""
    from .suite import scenarios

    runs = [
        run
        for run in scenarios(ctx.seed, quick=not current_profile(ctx.profile).stress_all)
        if ctx.wants(run[0])
    ]
    end = ctx.deadline - END_MARGIN
    ran: list[str] = []
    not_run: list[str] = []
    for name, rules, run in runs:
        left = end - time.monotonic()
        if left < run.seconds:
            if not run.advisory:  # an advisory run decides nothing: not missed
                not_run.append(name)
            yield CheckResult(
                "stress", name, rules, "skip",
                f"not started: {max(left, 0.0):.1f} s of the stage's budget left, the "
                f"scenario needs about {run.seconds:g} s",
                coverage="not started",
            )  # fmt: skip
            continue
        ctx.announce(name)
        start = time.monotonic()
        report = run(factory, until=end)
        if not run.advisory:
            ran.append(name)
        result = _judge(factory, ctx, name, rules, run, report, start, end)
        yield result
        if result.verdict == "fail" and not ctx.run_all:  # --all: every scenario runs
            return
    if not_run:
        planned = sum(not run.advisory for _, _, run in runs)
        yield CheckResult(
            "stress", "planned scenarios", (), "inconclusive",
            f"stress: {len(ran)} of {planned} scenarios ran within the stage's "
            f"{ctx.seconds:.0f} s; not run: {', '.join(not_run)}. Give verify more time "
            "(--max-seconds)",
            coverage=f"{len(ran)} of {planned} scenarios",
        )  # fmt: skip


def _judge(
    factory: AdapterFactory,
    ctx: StageContext,
    name: str,
    rules: tuple[str, ...],
    run: Scenario,
    report: StressReport,
    start: float,
    end: float,
) -> CheckResult:
    """One scenario's result: pass, a note, inconclusive, or a confirmed fail."""
    failures = report.contract_failures()
    notes = [f for f in report.failures if f not in failures]
    seconds = time.monotonic() - start
    if report.set_aside:
        return CheckResult(
            "stress", name, rules, "skip",
            f"{name}: set aside: its history shows {', '.join(report.set_aside)}, a root "
            "cause the baseline accepts, so what else it saw may be that bug's doing: it "
            "tells nothing new (the other checks search on in histories free of it)",
            seconds=seconds, coverage=f"set aside: {', '.join(report.set_aside)} accepted",
        )  # fmt: skip
    if failures and run.advisory:
        notes = failures + notes
        failures = []
    if not failures:
        if report.incomplete:
            return CheckResult(
                "stress", name, rules, "inconclusive",
                f"{name}: stopped at the stage's budget ({report.incomplete}), with no "
                "violation so far: a slow adapter, not a broken one. Give verify more time "
                "(--max-seconds)",
                seconds=seconds, coverage=f"stopped at the budget: {report.incomplete}",
            )  # fmt: skip
        evidence = f"{name}: held" + "".join(f"; note: {f}" for f in notes)
        if run.advisory and notes:
            evidence = (
                f"{name}: advisory — one adapter receiving its own chunks is not a "
                "configuration the contract requires; note: " + "; note: ".join(notes)
            )
            rules = ()  # it proved nothing about the rules either way
        return CheckResult("stress", name, rules, "pass", evidence, seconds=seconds)
    replay = STRESS.command(name, ctx.seed, adapter_spec=ctx.adapter_spec)
    finding = report.finding(ctx.adapter_spec, rules=rules, reproducer=replay)
    assert finding is not None  # it has contract failures
    if accepted.accepts_all(finding.rules):
        # every rule it breaks a verify baseline accepts: reported as accepted, never a red,
        # so no re-run (a liveness finding's waits would spend the stage's budget twice)
        return CheckResult.of_finding(
            "stress", name, "fail", finding, seconds=time.monotonic() - start,
            confirmation="not re-run: every rule it breaks is accepted by the baseline",
        )  # fmt: skip
    reference = calibration_reference(factory)

    def again(adapter: AdapterFactory) -> Callable[[], Run | None]:
        def run_it() -> Run | None:
            if end - time.monotonic() < seconds + 0.5:
                return None  # no budget left to run it: it would decide nothing
            shown = run(adapter, until=end)
            if shown.incomplete and not shown.contract_rules:
                return None  # the budget ran out during the run
            # a run that broke no contract rule passed (a call that raised is a note then)
            return shown.contract_findings() if shown.contract_rules else ()

        return run_it

    judged = confirm(
        finding, again(factory), None if reference is None else again(reference), tries=RERUNS
    )
    confirmation = f"reproduced {judged.reproduced} of {judged.reruns}"

    def result(verdict: Verdict, evidence: str | None = None) -> CheckResult:
        return CheckResult.of_finding(
            "stress", name, verdict, finding, evidence=evidence,
            seconds=time.monotonic() - start, confirmation=confirmation,
        )  # fmt: skip

    if judged.why == "reference failed":
        assert judged.reference
        return result(
            "inconclusive", reference_also_failed(finding.message, judged.reference[0].message)
        )
    if judged.verdict == "fail":
        confirmation += REFERENCE_PASSED if judged.reference_passed else ""
        return result("fail")
    why = (
        f"{judged.reruns} re-run(s) with the same seed did not fail that way"
        if judged.reruns
        else "no budget was left to re-run it"
    )
    return result("inconclusive", f"did not reproduce: {finding.message} — {why}")
