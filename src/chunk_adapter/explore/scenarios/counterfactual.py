"""Counterfactual scripts: a failing script without one call, or with it racing nothing.

An oracle names the rule a history breaks where the break *shows*, which is often a
symptom: a value committed across a ``cleanup_receiver`` shows at the next
registration as ``None`` handed out (R2), a get past a final (R13) or a chunk out of
order (R14); a second ``load_async`` that started a second poller shows as a chunk
lost (R14); a cancel mark applied to the next stream shows as a chunk dropped with
nothing to explain it (R5). A :class:`Counterfactual` is the script without the
calls of one kind the contract gives a rule of their own — the reloads of a
registered request left out (R12: such a call changes nothing), every cleanup made
once the adapters have settled so that nothing is in flight when it runs (R16: the
fence), the cancels left out (R6), the calls with a wrong argument left out (R21: each
raised, as it must, and so must have changed nothing). A script that fails while its counterfactual
passes every execution of the same budget needed those calls where they were: the
failure is of their rule, and what the oracle saw is its consequence. Where the contract
says the change makes no difference (a reload left out: R12; a call that raised left
out: R21; a cleanup made once settled, on a connector whose get keeps the value, so
that a new registration finds what it would have found: R16), the counterfactual need
not pass: it shows the root when it never fails as the script did (none of the
failure's rules in the same budget) — a change that must make no difference changed
what broke, even where the adapter breaks otherwise without it (an adapter that needs
a second ``load_async`` to go on stalls without it: R23, not R14).

Only a failure whose root an oracle names as one of the counterfactual's
``symptoms`` is asked about (a stale commit cannot make a build see a mutation); where
the oracle already names one of these rules among the failure's consequences, only
that one is asked (it saw the call, and the question is only which rule is first).
The stages ask only after the failure is confirmed (:mod:`..stages.cause`): a
counterfactual moves a red's label, never makes one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ...rules import R2, R4, R5, R6, R9, R11, R12, R13, R14, R15, R16, R21, R23, R24, Rule
from .scenario import Op, Scenario, settle

__all__ = ["COUNTERFACTUALS", "Counterfactual"]


def _member(op: Op, scenario: Scenario) -> str:
    """The member a load or cleanup goes to (its ``on``, else the default receiver)."""
    if op.on is not None:
        return op.on
    return "adapter" if scenario.topology == "loopback" else "receiver"


def _registered_before(scenario: Scenario) -> Iterator[tuple[Op, bool]]:
    """Each op of the script, and whether its member had its request registered (loaded,
    not cleaned up since) right before it."""
    registered: set[tuple[str, str | None]] = set()
    for op in scenario.ops:
        where = (_member(op, scenario), op.request_id)
        yield op, where in registered
        if op.kind == "load":
            registered.add(where)
        elif op.kind == "cleanup":
            registered.discard(where)


def _without_reloads(scenario: Scenario) -> tuple[Op, ...]:
    """Every ``load`` of a request its member has registered (not cleaned up) left out."""
    return tuple(op for op, on in _registered_before(scenario) if not (op.kind == "load" and on))


def _settled_cleanups(scenario: Scenario) -> tuple[Op, ...]:
    """A ``settle()`` before every ``cleanup`` of a registered request (unless one is
    there): the receiver has got and committed what it could, nothing is in flight."""
    out: list[Op] = []
    for op, registered in _registered_before(scenario):
        if op.kind == "cleanup" and registered and not (out and out[-1].kind == "settle"):
            out.append(settle())
        out.append(op)
    return tuple(out)


def _always(scenario: Scenario) -> bool:
    return True


def _never(scenario: Scenario) -> bool:
    return False


def _gets_keep_values(scenario: Scenario) -> bool:
    """Whether a get leaves the value stored: then whether a cleaned-up registration's get
    ran before the cleanup or not, the next registration finds the same values (R16)."""
    return not scenario.consume_on_get


def _without_cancels(scenario: Scenario) -> tuple[Op, ...]:
    """Every ``cancel`` left out (a cancelled stream's final then goes out with its data)."""
    return tuple(op for op in scenario.ops if op.kind != "cancel")


def _without_rejects(scenario: Scenario) -> tuple[Op, ...]:
    """Every call with a wrong argument left out (each raised, so the oracles took it as
    never made: what it changed anyway is the failure)."""
    return tuple(op for op in scenario.ops if op.kind != "reject")


@dataclass(frozen=True)
class Counterfactual:
    """Calls of one kind a rule of their own governs, and the script without them."""

    rule: Rule
    """The rule of those calls: the failure's root when the script without them passes."""
    without: str
    """What the counterfactual leaves out, for the report ("... passes")."""
    symptoms: frozenset[str]
    """The root rules an oracle may name for a failure that is really of :attr:`rule`."""
    change: Callable[[Scenario], tuple[Op, ...]]
    changes_nothing: Callable[[Scenario], bool] = _never
    """Whether, by the contract, the change makes no difference to *scenario*: then the
    changed script shows the root when it never fails with the failure's rules (it may
    fail otherwise)."""

    def of(self, scenario: Scenario) -> Scenario | None:
        """*scenario* without the freedom; ``None`` when its script never takes it."""
        ops = self.change(scenario)
        if ops == scenario.ops:
            return None
        return replace(scenario, ops=ops)


COUNTERFACTUALS: tuple[Counterfactual, ...] = (
    Counterfactual(
        R12,
        "the load_async calls of a request already registered left out",
        # R24 too: state a reload left behind (a second entry in a round's queue) is kept
        frozenset({R2, R13, R14, R15, R23, R24}),
        _without_reloads,
        _always,
    ),
    Counterfactual(
        R16,
        "every cleanup_receiver made once the adapters have settled (nothing in flight)",
        frozenset({R2, R12, R13, R14, R15, R23}),
        _settled_cleanups,
        _gets_keep_values,
    ),
    Counterfactual(
        R6,
        "the cancel_sender calls left out",
        frozenset({R5, R9, R11, R23}),
        _without_cancels,
    ),
    Counterfactual(
        R21,
        "the calls with a wrong argument left out (each raised: nothing may have changed)",
        # R4 too: the object of a call that raised, queued anyway, is built as no snapshot
        # any save made
        frozenset({R2, R4, R5, R6, R9, R11, R12, R13, R14, R15, R16, R23, R24}),
        _without_rejects,
        _always,
    ),
)
"""Asked in this order; the first whose script passes names the root."""
