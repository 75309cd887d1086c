"""The contract's rules as data: one :class:`Rule` per numbered rule of docs/contract.md.

The single source of the rule numbers: a finding names its rule with one of the
constants here (``Violation(R16, ...)``), every check declares the rules it
covers with them, and the reports read them. A ``Rule`` *is* its number as a
string (``R16 == "R16"``), so JSON reports, replay strings and baselines carry
it unchanged; it also knows its name and the contract's section.
``tests/unit/test_rules.py`` fails when this table and docs/contract.md disagree.

To add a rule: a line here (its number, name and section, as docs/contract.md
gives them), its paragraph in docs/contract.md, and the check that finds it
naming the constant (docs/architecture.md, "Where to add a rule").
"""

from __future__ import annotations

from .errors import InvalidValue

__all__ = ["ALL", "ORACLE", "RECENT_REQUESTS", "RELIABLE", "VERIFIED", "Rule", "rule"]


class Rule(str):
    """A contract rule: ``"R16"``, with its ``number``, ``name`` and ``section``.

    ``verified``: checked by ``chunk-adapter verify`` (R1–R24); the others bind the
    reference adapter only (its own tests check them), and ``verify --reliability``
    judges :data:`RELIABLE` (R25, R30, R31) too, for an adapter that claims them.
    ``oracle``: judged from a recorded history by :mod:`chunk_adapter.oracles` (so by
    every driver that records one, and the ``simulate`` stage); the others need a probe
    of their own (bad input at the call, memory retained).
    """

    number: int
    name: str  # "`cleanup_receiver` is a commit fence"
    section: str
    verified: bool
    oracle: bool

    def __new__(
        cls, number: int, name: str, section: str, *, verified: bool = True, oracle: bool = True
    ) -> Rule:
        self = super().__new__(cls, f"R{number}")
        self.number = number
        self.name = name
        self.section = section
        self.verified = verified
        self.oracle = oracle and verified
        return self

    def __reduce__(self) -> tuple[object, ...]:  # pickled (a worker's result) as itself
        return (rule, (str(self),))

    @property
    def heading(self) -> str:
        """``"R16 — `cleanup_receiver` is a commit fence"``, as docs/contract.md writes it."""
        return f"{self} — {self.name}"


RELIABILITY = "Reliability (the reference adapter; issue 12)"

R1 = Rule(1, "Keys", "Keys and the wire")
R2 = Rule(2, "The wire value", "Keys and the wire")
R3 = Rule(3, "Non-blocking calls", "The scheduler thread never waits")
R4 = Rule(4, "Snapshots", "The scheduler thread never waits")
R5 = Rule(5, "One FIFO, one SAVE thread", "The sender")
R6 = Rule(6, "Cancellation", "The sender")
R7 = Rule(7, "Build failures", "The sender")
R8 = Rule(8, "`None` payloads", "The sender")
R9 = Rule(9, "Contiguous ids", "The sender")
R10 = Rule(10, "Put retries", "The sender")
R11 = Rule(11, "The final", "The sender")
R12 = Rule(12, "Registration", "The receiver")
R13 = Rule(13, "Receiving in order", "The receiver")
R14 = Rule(14, "Exactly once", "The receiver")
R15 = Rule(15, "`poll_ready` drains atomically", "The receiver")
R16 = Rule(16, "`cleanup_receiver` is a commit fence", "The receiver")
R17 = Rule(17, "Pacing", "The receiver")
R18 = Rule(18, "Prompt `stop()`", "Stopping")
R19 = Rule(19, "After `stop()`", "Stopping")
R20 = Rule(20, "Every wait re-checks", "Stopping")
R21 = Rule(21, "Bad input fails at the call", "Bad input and faults", oracle=False)
R22 = Rule(22, "Faults never kill a thread", "Bad input and faults")
R23 = Rule(23, "Liveness", "Bad input and faults")
R24 = Rule(24, "Bounded state", RELIABILITY, oracle=False)
RECENT_REQUESTS = 500
"""R24's allowance: an adapter may keep a record of at most this many recent requests."""
R25 = Rule(25, "Permanent put errors fail at once", RELIABILITY, verified=False)
R26 = Rule(26, "Draining and abandoning", RELIABILITY, verified=False)
R27 = Rule(27, "Cancel marks of closed streams (a decision)", RELIABILITY, verified=False)
R28 = Rule(28, "Stall report", RELIABILITY, verified=False)
R29 = Rule(29, "Stream identity", RELIABILITY, verified=False)
R30 = Rule(30, "No silent thread death", RELIABILITY, verified=False)
R31 = Rule(31, "No head-of-line blocking", RELIABILITY, verified=False)
R32 = Rule(32, "Pipelines isolated", RELIABILITY, verified=False)

ALL: tuple[Rule, ...] = (
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    R16,
    R17,
    R18,
    R19,
    R20,
    R21,
    R22,
    R23,
    R24,
    R25,
    R26,
    R27,
    R28,
    R29,
    R30,
    R31,
    R32,
)
"""Every rule of docs/contract.md, in order."""
VERIFIED: tuple[Rule, ...] = tuple(r for r in ALL if r.verified)
"""The rules ``chunk-adapter verify`` checks (R1–R24)."""
RELIABLE: tuple[Rule, ...] = (R25, R30, R31)
"""The reference adapter's rules ``chunk-adapter verify --reliability`` judges too, for an
adapter that claims them (in the simulate stage's generated worlds)."""
ORACLE: tuple[Rule, ...] = tuple(r for r in ALL if r.oracle)
"""The rules the oracles judge from a recorded history (all verified but R21 and R24)."""
_BY_NAME = {str(r): r for r in ALL}


def rule(name: str | int) -> Rule:
    """The rule named *name* (``"R16"``, ``"r16"`` or ``16``); :class:`InvalidValue` naming
    the rules there are otherwise."""
    key = f"R{name}" if isinstance(name, int) else str(name).strip().upper()
    try:
        return _BY_NAME[key]
    except KeyError:
        raise InvalidValue(
            f"{name!r} is not a contract rule; the rules are R1..R{len(ALL)} (docs/contract.md)"
        ) from None
