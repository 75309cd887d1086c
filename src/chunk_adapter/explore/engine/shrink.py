"""Removing a world's ops while it keeps what matters (delta debugging over a program).

Hypothesis shrinks a world's draws; a program interleaved from several request lanes
and sprinkled with pauses, settles and faults shrinks better by its ops. :func:`reduce_ops`
removes **groups** first, each a part of the world that stands or falls together — every
op of one request (its calls, and the faults on its keys), every op on one member, every
op of one kind that is not a scheduler call (all pauses, all settles, all outages) — and
then **blocks** of neighbouring ops, halving the block size (Zeller's ddmin), as long as
*keeps* says the smaller world still shows what it showed. The world found failing (shrink
it: *keeps* is "fails the same way") and the world found holding closed requests (reduce it
before it is repeated: *keeps* is "passes and still holds some") share it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..scenarios.scenario import Op, Scenario, request_of
from ..scenarios.worlds import usage

__all__ = ["CALLS", "groups", "reduce_ops"]

CALLS = ("save", "cancel", "load", "poll", "cleanup", "relay", "stop", "mutate", "reject")
"""The scheduler's calls: what a world's size is counted in."""


def groups(ops: tuple[Op, ...]) -> Iterator[tuple[int, ...]]:
    """Index sets of *ops* that stand or fall together, largest first: one request's ops,
    one member's ops, one kind of op that is not a scheduler call."""
    keys: dict[tuple[str, str], list[int]] = {}
    for i, op in enumerate(ops):
        rid = request_of(op)
        if rid is not None:
            keys.setdefault(("request", rid), []).append(i)
        if op.on is not None:
            keys.setdefault(("on", op.on), []).append(i)
        if op.kind not in CALLS:
            keys.setdefault(("kind", op.kind), []).append(i)
    found = sorted(keys.values(), key=len, reverse=True)
    yield from (tuple(g) for g in found if len(g) < len(ops))


def _without(world: Scenario, drop: set[int]) -> Scenario:
    return replace(world, ops=tuple(usage([op for i, op in enumerate(world.ops) if i not in drop])))


def reduce_ops(
    world: Scenario,
    keeps: Callable[[Scenario], bool],
    *,
    tries: int,
    until: Callable[[], float],
) -> Scenario:
    """The smallest world reached from *world* by removing ops while *keeps* holds.

    At most *tries* candidates are run; none after ``time.monotonic()`` passes ``until()``
    (read before each: the caller may move it). *keeps* is called with each candidate and
    says whether to keep it (it may note what it saw).
    """

    def attempt(drop: set[int]) -> bool:
        nonlocal world, tries
        if tries <= 0 or time.monotonic() > until():
            raise _Spent
        candidate = _without(world, drop)
        if candidate.ops == world.ops:
            return False
        tries -= 1
        if keeps(candidate):
            world = candidate
            return True
        return False

    try:
        # groups: whole requests, members and kinds, again after each removal
        progress = True
        while progress:
            progress = any(attempt(set(g)) for g in groups(world.ops))
        # blocks of neighbours, halving the size (a sweep that removed some runs again)
        block = max(1, len(world.ops) // 2)
        while block >= 1:
            removed, i = False, 0
            while i < len(world.ops):
                if attempt(set(range(i, i + block))):
                    removed = True
                    continue
                i += block
            if not removed:
                block //= 2
    except _Spent:
        pass
    return world


class _Spent(Exception):
    """The tries or the time ran out: what was reached stands."""
