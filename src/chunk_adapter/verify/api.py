"""The one call a user's own test file makes: :func:`check_adapter`."""

from __future__ import annotations

import io

from .report import VerifyReport, write_text
from .runner import verify

__all__ = ["ContractViolation", "check_adapter"]


class ContractViolation(AssertionError):
    """The adapter broke the contract; ``report`` holds every check's result."""

    def __init__(self, report: VerifyReport) -> None:
        out = io.StringIO()
        write_text(report, out)
        super().__init__(out.getvalue())
        self.report = report


def check_adapter(
    spec: str, *, profile: str = "quick", max_seconds: float | None = None, seed: int = 0
) -> VerifyReport:
    """Verify the adapter factory named ``"pkg.mod:factory"``; raise on a violation.

    In a test file::

        from chunk_adapter.verify import check_adapter

        def test_my_adapter_keeps_the_contract():
            check_adapter("my_pkg.adapters:make_adapter", profile="quick")
    """
    report = verify(spec, profile=profile, max_seconds=max_seconds, seed=seed)
    if report.failures:
        raise ContractViolation(report)
    return report
