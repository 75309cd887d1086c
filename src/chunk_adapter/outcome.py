"""What every driver reports to ``verify``: :class:`CheckResult`, and the stage context.

This module sits under stateful/, stress/, explore/ and verify/ (they all
import it; it imports none of them), so a stage written in any driver package
speaks the same result type without an upward import.

Verdicts mean one thing each, everywhere (docs/verify.md, "Exit status"):

``pass``
    the check ran its planned work and saw no violation;
``fail``
    a contract violation, **confirmed**: the stage re-ran the reproducer and
    saw it fail again (``confirmation`` says how often, e.g. "reproduced 2 of 3");
``inconclusive``
    neither: the budget ran out before the planned work, the explorer could
    not control the adapter's threads, a finding did not reproduce... The
    evidence says what to do;
``skip``
    the check was not reached (an earlier stage failed, or no budget was left).
"""

from __future__ import annotations

import sysconfig
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .finding import Finding
from .rules import VERIFIED

__all__ = [
    "PASTE_BEGIN",
    "PASTE_END",
    "REFERENCE_PASSED",
    "RULES",
    "CheckResult",
    "StageContext",
    "Verdict",
    "raised_by_suite",
    "reference_also_failed",
    "suite_error",
]

Verdict = Literal["pass", "fail", "inconclusive", "skip"]

RULES: tuple[str, ...] = VERIFIED
"""The rules verify checks, R1–R24 (:mod:`.rules`; R25–R32 bind the reference adapter only)."""


PASTE_BEGIN = "----- begin file "
"""A ``detail`` line starting so (then the file name) opens a file to paste as it is: the
reports print the lines up to :data:`PASTE_END` without indenting them."""
PASTE_END = "----- end of file -----"


@dataclass(frozen=True)
class CheckResult:
    """One check of one stage against one adapter.

    ``rules`` lists the rule of the root cause first, then its consequences.
    ``evidence`` is one line (what was run, or what broke); ``detail`` the
    counterexample (shrunk steps, trace); ``replay`` the one command that
    reproduces a failure; ``confirmation`` how the stage re-ran it ("reproduced
    2 of 3"); ``coverage`` how much of the planned work ran ("87 of 150 examples").
    """

    stage: str
    name: str
    rules: tuple[str, ...]
    verdict: Verdict
    evidence: str
    detail: str = ""
    replay: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    confirmation: str = ""
    coverage: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rules"] = list(self.rules)
        return data

    @classmethod
    def of_finding(
        cls,
        stage: str,
        name: str,
        verdict: Verdict,
        finding: Finding,
        *,
        evidence: str | None = None,
        rules: tuple[str, ...] | None = None,
        seconds: float = 0.0,
        confirmation: str = "",
        coverage: str = "",
        extra: dict[str, Any] | None = None,
    ) -> CheckResult:
        """The result of check *name* of *stage* on *finding*: the one way every stage
        reports a failure it found, confirmed (``fail``) or not (``inconclusive``).

        The finding gives the rules (root first), the evidence (its message), the detail
        (its evidence) and the replay (its reproducer). A stage that words the verdict
        (why it is inconclusive) passes *evidence*; one that does not charge the adapter
        with the finding's rules (it decides nothing on them) passes *rules*.
        """
        return cls(
            stage,
            name,
            finding.rules if rules is None else rules,
            verdict,
            finding.message if evidence is None else evidence,
            detail=finding.evidence,
            replay=finding.reproducer,
            seconds=seconds,
            extra={} if extra is None else extra,
            confirmation=confirmation,
            coverage=coverage,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        data = dict(data)
        data["rules"] = tuple(data.get("rules", ()))
        return cls(**data)


REFERENCE_PASSED = "; the reference adapter passed it right after"
"""Added to a confirmation when the reference adapter, run on the same check right after,
passed it (see :func:`chunk_adapter.factory.calibration_reference`)."""


def reference_also_failed(evidence: str, reference_evidence: str) -> str:
    """Evidence for a confirmed failure that the reference adapter, run on the same
    check right after, failed too (see :func:`chunk_adapter.factory.calibration_reference`):
    the reference keeps the contract, so either a time bound was too tight for this
    machine just then, or the suite judged wrongly (a check too strict, or an error of
    the suite's own raised through the adapter's threads); never a verdict."""
    return (
        "not a verdict on the adapter: the reference adapter, run on the same check right "
        f"after, failed it too ({reference_evidence}). The reference keeps the contract, so "
        "either this machine was too slow or loaded for a time bound just now (re-run "
        "verify on a quieter machine), or the suite judged wrongly (if the reference fails "
        "again on a quiet machine, please report it to chunk-adapter with this line). "
        f"The adapter's failure: {evidence}"
    )


@dataclass(frozen=True)
class StageContext:
    """What a stage is told: who it verifies, with what budget, and where to report.

    ``deadline`` is a ``time.monotonic()`` value: the stage must have yielded
    its last result by then. It plans its work to fit (:meth:`left`) and stops
    starting new work near it, reporting coverage, rather than being killed.
    """

    adapter_spec: str
    profile: str
    seed: int
    seconds: float
    replay_prefix: str  # "chunk-adapter verify --adapter X --profile P --seed N"
    # Called with a check's name just before it runs, so a killed worker's
    # report can say which check was running.
    announce: Callable[[str], None] = field(default=lambda name: None)
    deadline: float = field(default_factory=lambda: time.monotonic() + 3600.0)
    substitute: tuple[str, ...] = ()
    """Extra modules or packages (dotted names) the explorer substitutes (``--substitute``)."""
    reliability: bool = False
    """``--reliability``: the simulate stage judges R25, R30 and R31 too (the reference adapter's
    rules an adapter may claim: :mod:`chunk_adapter.explore.engine.reliability`)."""
    only: tuple[str, ...] = ()
    """The names of the checks to run (the pytest plugin runs one check alone); () = all."""

    def wants(self, check: str) -> bool:
        """Whether the stage runs the check named *check* (every check unless :attr:`only`)."""
        return not self.only or check in self.only

    run_all: bool = False
    """``verify --all``: run every check to the budget even after a confirmed violation
    (by default a stage ends at its first one)."""

    def left(self) -> float:
        """Seconds until the deadline (negative once past it)."""
        return self.deadline - time.monotonic()


_REFERENCE_MODULES = frozenset(
    {"chunk_adapter.adapter", "chunk_adapter._adapter_send", "chunk_adapter._adapter_recv"}
)
_NEUTRAL_PACKAGES = frozenset({"hypothesis", "_hypothesis_pytestplugin", "pytest", "_pytest"})
_STDLIB = sysconfig.get_paths()["stdlib"]


def raised_by_suite(exc: BaseException) -> bool:
    """Whether every frame *exc* was raised through is the suite's own, the standard
    library's or a test tool's (Hypothesis, pytest): no frame of the adapter, its
    factory or the reference adapter. Such an exception is the suite's fault, never a
    verdict on the adapter (a red must mean a bug of the adapter)."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        filename = frame.f_code.co_filename
        ours = module.startswith("chunk_adapter.") and module not in _REFERENCE_MODULES
        tool = module.partition(".")[0] in _NEUTRAL_PACKAGES
        stdlib = filename.startswith(_STDLIB) and "-packages" not in filename
        if not (ours or tool or stdlib):
            return False
    return True


def suite_error(exc: BaseException) -> str:
    """The evidence for an exception :func:`raised_by_suite`: what and where, and that it
    decides nothing."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return (
        f"the suite itself raised {exc!r}{where}, outside any adapter code: not a verdict "
        "on the adapter (unless the adapter handed back a value of a type the contract "
        "does not allow); please report it to chunk-adapter with this line"
    )
