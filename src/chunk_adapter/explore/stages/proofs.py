"""Proofs in ``chunk-adapter verify``: the small library scenarios explored exhaustively.

After its seeded runs, the explore stage tries to *prove* the scenarios of
:data:`~.library.PROVE` under :class:`~.strategies.ProofStrategy` (DPOR, every
Mazurkiewicz trace), when the profile asks for it and the deadline leaves
enough time. Each proof is one check:

* ``pass``, "proved": every trace ran clean ("verified: N traces, complete");
* ``pass``, "sampled": the proof's time ran out first. Not a failure and not
  inconclusive — nothing was found in what ran, and the scenario's rules stay
  covered by sampling (this keeps the stage's exit codes as they were);
* a counterexample goes through the stage's own judgement: replayed once on a
  fresh adapter, ``fail`` only if it fails again the same way.

A last check, ``proofs``, says which rules were proved and which only sampled (and
which proofs found no time to start). How many proofs a profile runs is its
``proofs`` field in :data:`chunk_adapter.profiles.PROFILES` (all under ``hunt``,
none under ``quick`` and ``ci``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ...factory import AdapterFactory
from ...outcome import CheckResult, StageContext
from ...profiles import current_profile
from ..engine.explorer import Report, explore
from ..scenarios.library import LIBRARY, PROVE
from ..strategies import ProofStrategy

__all__ = ["PROOF_SECONDS", "proof_plan", "proof_reserve", "prove_stage"]

PROOF_SECONDS = 60.0
"""At most this long per proof; a proof is not started with less than a third of it left."""


def proof_plan(
    profile: str, rules_of: Callable[[str], tuple[str, ...]]
) -> list[tuple[str, tuple[str, ...]]]:
    """``(check name, rules)`` of the proofs *profile* runs, then the summary (for "not
    reached" and ``verify(checks=...)``)."""
    plan = [
        (f"{name} / proof", rules_of(LIBRARY[name].question)) for name in _profile_proofs(profile)
    ]
    return [*plan, ("proofs", ())] if plan else []


def proof_reserve(ctx: StageContext, reserve: float) -> float:
    """Seconds the explore stage keeps for its proofs out of what it has left, before its
    seeded runs start: enough to start each proof (a third of :data:`PROOF_SECONDS`) once
    the stage's own *reserve* share is set aside, with 10 s for the seeded runs to overrun;
    at most half the stage."""
    count = len(_wanted(ctx))
    if not count:
        return 0.0
    return min((count * PROOF_SECONDS / 3 + 10.0) / (1 - reserve), ctx.left() / 2)


def _wanted(ctx: StageContext) -> list[str]:
    """The :data:`PROVE` scenarios this stage proves: by profile, and those asked for."""
    every = ctx.wants("proofs")  # the summary needs every proof
    return [n for n in _profile_proofs(ctx.profile) if every or ctx.wants(f"{n} / proof")]


def _profile_proofs(profile: str) -> tuple[str, ...]:
    """The :data:`PROVE` scenarios *profile* proves (its ``proofs`` in the profile table)."""
    return PROVE[: current_profile(profile).proofs]


Judge = Callable[[Report, str, float], CheckResult]
"""The stage's judgement of a failed run: (report, label, wall timeout) -> check."""


def prove_stage(
    factory: AdapterFactory,
    ctx: StageContext,
    rules_of: Callable[[str], tuple[str, ...]],
    judge: Judge,
    substitute: tuple[str, ...],
    reserve: float,
) -> Iterator[CheckResult]:
    """One check per :data:`PROVE` scenario that fits the deadline, then the summary."""
    names = _wanted(ctx)
    proved: dict[str, list[str]] = {}
    sampled: dict[str, list[str]] = {}
    not_started: list[str] = []
    for index, name in enumerate(names):
        left = ctx.left() * (1 - reserve) - 1.0
        budget = min(PROOF_SECONDS, left / (len(names) - index))
        if budget < PROOF_SECONDS / 3:
            not_started = list(names[index:])
            break
        scenario = LIBRARY[name]
        label = f"{name} / proof"
        ctx.announce(label)
        wall = max(2.0, min(20.0, left / 4))
        report = explore(
            scenario,
            ProofStrategy(),
            factory=factory,
            substitute=substitute or "auto",
            time_budget=budget,
            wall_timeout=wall,
        )
        if report.failure is not None:
            result = judge(report, label, wall)
            yield result
            if result.verdict == "fail":
                return
            continue
        rules = rules_of(scenario.question)
        target = proved if report.complete else sampled
        for rule in rules:
            target.setdefault(rule, []).append(name)
        if report.complete:
            evidence = f"proved: {report.verdict} ({report.executions} executions)"
            coverage = f"all {report.traces} traces"
        else:
            evidence = (
                f"sampled, not proved: {report.traces} traces explored in {report.seconds:.0f} s "
                "before the proof's time ran out (nothing found; give verify more time to prove it)"
            )
            coverage = f"{report.traces} traces (proof incomplete)"
        yield CheckResult(
            "explore", label, rules, "pass", evidence, seconds=report.seconds, coverage=coverage
        )
    if proved or sampled or not_started:
        only_sampled = sorted(set(sampled) - set(proved), key=_rule_order)
        yield CheckResult(
            "explore",
            "proofs",
            tuple(sorted(set(proved) | set(sampled), key=_rule_order)),
            "pass",
            "proved (every trace of a library scenario): "
            + (
                ", ".join(
                    f"{r} ({', '.join(n)})"
                    for r, n in sorted(proved.items(), key=lambda item: _rule_order(item[0]))
                )
                or "none"
            )
            + "; sampled only (PCT, random, an unfinished proof): "
            + (", ".join(only_sampled) or "none beyond the seeded runs")
            + (f"; not started (no time left): {', '.join(not_started)}" if not_started else ""),
            coverage=f"{len({n for names in proved.values() for n in names})} of {len(names)} "
            "scenarios proved",
        )


def _rule_order(rule: str) -> tuple[int, str]:
    """R6 before R17 (by number; anything else after, by name)."""
    digits = rule[1:]
    return (int(digits), rule) if rule[:1] == "R" and digits.isdigit() else (1 << 30, rule)
