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
from .pipeline import roles_for, sends
from .scenario import TOPOLOGIES, Op, Scenario, settle

__all__ = ["COUNTERFACTUALS", "Counterfactual", "on_members"]


On = Callable[[Op], bool]
"""Whether an op is made on a member of the failing hop: only such calls are changed."""


def on_members(scenario: Scenario, members: tuple[str, ...]) -> On:
    """Whether an op is made on the hop *members* names (its sender and receiver; ``()``:
    every op is): a sending call on the hop's sender, a receiving call on its receiver.
    A failure shown on one hop of a pipeline asks only about the calls its adapters were
    given in those roles; any other call reaches that hop as data only (a cancelled
    stream's ``None`` final, relayed on, is the next member's input, not a cancel of it)."""
    roles = TOPOLOGIES[scenario.topology]
    if not members:
        return lambda op: True
    sender, receiver = members
    return lambda op: (sender if sends(op) else receiver) in roles_for(op, roles)


def _registered_before(scenario: Scenario) -> Iterator[tuple[Op, bool]]:
    """Each op of the script, and whether its member had its request registered (loaded,
    not cleaned up since) right before it."""
    roles = TOPOLOGIES[scenario.topology]
    registered: set[tuple[str, str | None]] = set()
    for op in scenario.ops:
        where = (roles_for(op, roles)[0], op.request_id)
        yield op, where in registered
        if op.kind == "load":
            registered.add(where)
        elif op.kind == "cleanup":
            registered.discard(where)


def _without_reloads(scenario: Scenario, on: On) -> tuple[Op, ...]:
    """Every ``load`` of a request its member has registered (not cleaned up) left out."""
    return tuple(
        op
        for op, registered in _registered_before(scenario)
        if not (op.kind == "load" and registered and on(op))
    )


def _settled_cleanups(scenario: Scenario, on: On) -> tuple[Op, ...]:
    """A ``settle()`` before every ``cleanup`` of a registered request (unless one is
    there): the receiver has got and committed what it could, nothing is in flight."""
    out: list[Op] = []
    for op, registered in _registered_before(scenario):
        settled = bool(out) and out[-1].kind == "settle"
        if op.kind == "cleanup" and registered and on(op) and not settled:
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


def _without_cancels(scenario: Scenario, on: On) -> tuple[Op, ...]:
    """Every ``cancel`` left out (a cancelled stream's final then goes out with its data)."""
    return tuple(op for op in scenario.ops if not (op.kind == "cancel" and on(op)))


def _without_rejects(scenario: Scenario, on: On) -> tuple[Op, ...]:
    """Every call with a wrong argument left out (each raised, so the oracles took it as
    never made: what it changed anyway is the failure)."""
    return tuple(op for op in scenario.ops if not (op.kind == "reject" and on(op)))


@dataclass(frozen=True)
class Counterfactual:
    """Calls of one kind a rule of their own governs, and the script without them."""

    rule: Rule
    """The rule of those calls: the failure's root when the script without them passes."""
    without: str
    """What the counterfactual leaves out, for the report ("... passes")."""
    symptoms: frozenset[str]
    """The root rules an oracle may name for a failure that is really of :attr:`rule`."""
    change: Callable[[Scenario, On], tuple[Op, ...]]
    changes_nothing: Callable[[Scenario], bool] = _never
    """Whether, by the contract, the change makes no difference to *scenario*: then the
    changed script shows the root when it never fails with the failure's rules (it may
    fail otherwise)."""

    def of(self, scenario: Scenario, members: tuple[str, ...] = ()) -> Scenario | None:
        """*scenario* without the freedom, taken away from the calls made on *members*
        only (``()``: on every member; :func:`on_members`); ``None`` when none of those
        calls takes it."""
        ops = self.change(scenario, on_members(scenario, members))
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
