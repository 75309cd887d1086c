"""The one call a user's own test file makes: :func:`check_adapter`."""

from __future__ import annotations

import io
from collections.abc import Sequence

from ..errors import ChunkAdapterError
from ..oracles.violations import ContractViolation, Violation
from ..profiles import DEFAULT
from .baseline import Baseline, load_baseline, parse_waiver
from .report import VerifyReport, write_text
from .runner import verify

__all__ = ["ContractViolation", "VerificationInconclusive", "check_adapter"]


def _text(report: VerifyReport) -> str:
    out = io.StringIO()
    write_text(report, out)
    return out.getvalue().strip("\n")


def _violation(report: VerifyReport) -> ContractViolation:
    """The exception for a report with a confirmed violation: the one
    :class:`~chunk_adapter.oracles.ContractViolation`, one :class:`Violation` per failed
    check (its root rule and evidence), carrying the report."""
    failures = [r for group in report.new_groups for r in group.findings]
    first = failures[0]
    rules = ", ".join(first.rules) or "no rule"
    return ContractViolation(
        [Violation(r.rules[0], r.evidence, also=r.rules[1:]) for r in failures if r.rules],
        message=f"{report.adapter_spec} broke the contract ({rules}): {first.evidence}\n\n"
        + _text(report),
        report=report,
    )


class VerificationInconclusive(ChunkAdapterError):
    """No violation was confirmed, but some check could not decide (exit 3 on the CLI).

    Not an ``AssertionError``: nothing is known to be wrong with the adapter.
    The message says what could not be decided and what to do (usually: a
    larger budget, or ``substitute=`` for modules whose threads the explorer
    does not control).
    """

    def __init__(self, report: VerifyReport) -> None:
        first = report.inconclusive[0]
        super().__init__(
            f"{report.adapter_spec}: verification inconclusive ({first.stage}/{first.name}: "
            f"{first.evidence})\n\n" + _text(report)
        )
        self.report = report


def check_adapter(
    spec: str,
    *,
    profile: str = DEFAULT,
    max_seconds: float | None = None,
    seed: int = 0,
    stages: Sequence[str] | None = None,
    substitute: Sequence[str] = (),
    allow_inconclusive: bool = False,
    jobs: int | None = None,
    baseline: str | None = None,
    accept: Sequence[str] = (),
    reliability: bool = False,
) -> VerifyReport:
    """Verify the adapter factory named ``"pkg.mod:factory"``; raise unless it passed.

    *jobs*: stages run at once (default: half the cores, 1 to 4; the verdict is the
    one running them one at a time gives). Raises :class:`ContractViolation` for a
    confirmed violation (exit 1 on the command line; its ``report`` holds every
    check's result),
    :class:`VerificationInconclusive` when some check could not decide (exit 3;
    pass ``allow_inconclusive=True`` to get the report instead), and
    ``chunk_adapter.verify.UsageError`` when the adapter cannot be imported or
    built (exit 2). *baseline* (a file ``verify --write-baseline`` wrote) and *accept*
    (waivers, ``"R21=why"``) accept known root causes: only a root cause they do not
    accept raises (docs/verify.md, "Baselines"). *reliability* judges R25, R30 and R31 too
    (``verify --reliability``: for an adapter that claims the reference's reliability
    rules; docs/verify.md, "Reliability"). In a test file::

        from chunk_adapter.verify import check_adapter

        def test_my_adapter_keeps_the_contract():
            check_adapter("my_pkg.adapters:make_adapter")
    """
    known = None
    if baseline is not None or accept:
        known = load_baseline(baseline) if baseline is not None else Baseline()
        known = known.with_waivers(parse_waiver(text) for text in accept)
    report = verify(
        spec,
        baseline=known,
        profile=profile,
        max_seconds=max_seconds,
        seed=seed,
        stages=stages,
        substitute=substitute,
        jobs=jobs,
        reliability=reliability,
    )
    if report.new_groups:
        raise _violation(report)
    if report.inconclusive and not allow_inconclusive:
        raise VerificationInconclusive(report)
    return report
