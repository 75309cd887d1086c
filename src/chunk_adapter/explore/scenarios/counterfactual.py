"""Counterfactual scripts: a failing script without a freedom the contract gives one call.

An oracle names the rule a history breaks where the break *shows*, which is often a
symptom: a value committed across a ``cleanup_receiver`` shows at the next
registration as ``None`` handed out (R2), a get past a final (R13) or a chunk out of
order (R14); a second ``load_async`` that started a second poller shows as a chunk
lost (R14). Some calls the contract makes harmless: a ``load_async`` of a registered
request changes nothing (R12), and once ``cleanup_receiver`` returns nothing that was
in flight for the registration shows anywhere (R16). A :class:`Counterfactual` is the
script with that freedom taken away — the reload left out, every cleanup made after
the adapters have settled (nothing in flight when it runs). A script that fails while
its counterfactual passes every execution of the same budget needed the call where it
was: the failure is of that call's rule, and what the oracle saw is its consequence.

Only a failure whose root an oracle names as one of the counterfactual's
``symptoms`` is asked about (a stale commit cannot make a build see a mutation), and
the stages ask only after the failure is confirmed (:mod:`..stages.cause`): a
counterfactual moves a red's label, never makes one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ...rules import R2, R12, R13, R14, R15, R16, R23, Rule
from .scenario import Op, Scenario, settle

__all__ = ["COUNTERFACTUALS", "Counterfactual"]


def _member(op: Op, scenario: Scenario) -> str:
    """The member a load or cleanup goes to (its ``on``, else the default receiver)."""
    if op.on is not None:
        return op.on
    return "adapter" if scenario.topology == "loopback" else "receiver"


def _without_reloads(scenario: Scenario) -> tuple[Op, ...]:
    """Every ``load`` of a request its member has registered (not cleaned up) left out."""
    registered: set[tuple[str, str | None]] = set()
    out = []
    for op in scenario.ops:
        where = (_member(op, scenario), op.request_id)
        if op.kind == "load":
            if where in registered:
                continue
            registered.add(where)
        elif op.kind == "cleanup":
            registered.discard(where)
        out.append(op)
    return tuple(out)


def _settled_cleanups(scenario: Scenario) -> tuple[Op, ...]:
    """A ``settle()`` before every ``cleanup`` of a registered request (unless one is
    there): the receiver has got and committed what it could, nothing is in flight."""
    registered: set[tuple[str, str | None]] = set()
    out: list[Op] = []
    for op in scenario.ops:
        where = (_member(op, scenario), op.request_id)
        if op.kind == "load":
            registered.add(where)
        elif op.kind == "cleanup":
            if where in registered and not (out and out[-1].kind == "settle"):
                out.append(settle())
            registered.discard(where)
        out.append(op)
    return tuple(out)


@dataclass(frozen=True)
class Counterfactual:
    """A freedom the contract gives a call, and the script without it."""

    rule: Rule
    """The rule that gives the freedom: the failure's root when taking it away fixes it."""
    without: str
    """What the counterfactual leaves out, for the report ("... passes")."""
    symptoms: frozenset[str]
    """The root rules an oracle may name for a failure that is really of :attr:`rule`."""
    change: Callable[[Scenario], tuple[Op, ...]]

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
        frozenset({R2, R13, R14, R15, R23}),
        _without_reloads,
    ),
    Counterfactual(
        R16,
        "every cleanup_receiver made once the adapters have settled (nothing in flight)",
        frozenset({R2, R12, R13, R14, R15, R23}),
        _settled_cleanups,
    ),
)
"""Asked in this order; the first whose script passes names the root."""
