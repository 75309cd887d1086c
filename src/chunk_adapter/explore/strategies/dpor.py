"""Dynamic partial-order reduction: source sets with sleep sets (Abdulla et al. 2014).

DFS runs every order of every step. Two steps that touch nothing in common (a
RECV thread's ``get r_0_1`` and the SAVE thread's ``acquire _send_lock``) give
the same result in either order, so running both orders is waste; DPOR runs
one order of each such pair and every order of the steps that *conflict*
(:mod:`..footprint` says which: same lock, condition, event, task, queue,
connector key, request history, adapter attribute). Each execution explores one
*Mazurkiewicz trace* (an equivalence class of schedules under swapping adjacent
independent steps); the exploration is complete when every trace was run.

How (stateless, like DFS: executions are replayed from the start):

* The controller hands over each step's footprint when the step ends
  (``observe``); the strategy asks at every step (``every_step``).
* After an execution, every *race* — two conflicting steps of different tasks
  with no happens-before path between them except their own conflict — adds,
  at the state before the first step, a task that starts a reordering of the
  two (an *initial* of the steps after it that do not depend on it, followed by
  the second step) unless one is already planned there: the *source set*.
* *Sleep sets*: a task whose step from a state was explored already sleeps in
  the branches explored after it until a step that conflicts with it runs. An
  execution where every runnable task sleeps is redundant and ends at once
  (``Pruned``: counted, never checked).

It is sound for what the explorer controls, as DFS with no preemption bound is:
the test ``tests/explore/test_dpor.py`` checks it reaches the verdicts DFS
reaches. It is unbounded: a proof (:class:`ProofStrategy`) covers every trace of
the scenario, up to its own bounds (its script, ``settle`` limit and
``max_steps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..controller import Pruned
from ..footprint import Footprint, conflict
from .base import Strategy
from .replay import ScheduleDiverged

__all__ = ["DporStrategy", "ProofStrategy"]


@dataclass
class _Node:
    """A state where the strategy chose: who could run, who sleeps, what is planned."""

    runnable: tuple[int, ...]
    sleep: dict[int, Footprint]  # task -> the footprint of its (already explored) next step
    backtrack: set[int]
    done: dict[int, Footprint | None] = field(default_factory=dict)  # explored here -> step
    chosen: int = -1


class DporStrategy(Strategy):
    """Exhaustive over Mazurkiewicz traces (see module doc); ``complete`` when done."""

    every_step = True

    def __init__(self, max_executions: int | None = None) -> None:
        if max_executions is not None and max_executions < 1:
            raise ValueError(f"max_executions is at least 1 (or None), got {max_executions!r}")
        self.max_executions = max_executions
        self.executions = 0
        self.pruned = 0  # executions ended early as sleep-set blocked (redundant)
        self.complete = False
        self._nodes: list[_Node] = []
        self._events: list[tuple[int, Footprint]] = []
        self._pos = 0
        self._branch = 0  # the node where this execution leaves the previous one's path
        self._started = False

    @property
    def traces(self) -> int:
        """Executions run to their end (each a different Mazurkiewicz trace)."""
        return self.executions - self.pruned

    # -- the strategy interface --------------------------------------------

    def start_execution(self) -> bool:
        if self._started:
            self._analyse()
            if not self._backtrack():
                self.complete = True
                return False
        if self.max_executions is not None and self.executions >= self.max_executions:
            return False
        self._started = True
        self.executions += 1
        self._events = []
        self._pos = 0
        return True

    def observe(self, tid: int, footprint: Footprint) -> None:
        """The controller: task *tid* ended a step that touched *footprint*."""
        self._events.append((tid, footprint))
        at = len(self._events) - 2  # the node that chose this step
        if 0 <= at < len(self._nodes) and self._nodes[at].chosen == tid:
            self._nodes[at].done[tid] = footprint

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        k = self._pos
        self._pos += 1
        if k < len(self._nodes):
            node = self._nodes[k]
            if node.runnable != tuple(runnable):
                raise ScheduleDiverged(
                    f"DPOR choice point {k}: threads {list(runnable)} can run, but "
                    f"{list(node.runnable)} could when this path was first taken; the "
                    "execution is not deterministic (real time, randomness or a real "
                    "threading primitive outside the explorer's control?)"
                )
            return node.chosen
        sleep = self._sleep_after(k)
        awake = [t for t in runnable if t not in sleep]
        if not awake:
            self.pruned += 1
            raise Pruned(f"every runnable task sleeps at choice point {k}")
        pick = current if current in awake else awake[0]
        self._nodes.append(_Node(tuple(runnable), sleep, {pick}, {pick: None}, pick))
        return pick

    def describe(self) -> str:
        return "DporStrategy()"

    # -- sleep sets ----------------------------------------------------------

    def _sleep_after(self, k: int) -> dict[int, Footprint]:
        """The sleep set at node *k*: the parent's, plus the siblings explored before the
        step taken there, less those that conflict with that step."""
        if k == 0:
            return {}
        parent = self._nodes[k - 1]
        tid, step = self._events[k]
        sleep: dict[int, Footprint] = {}
        for source in (parent.sleep, parent.done):
            for other, fp in source.items():
                if other != tid and fp is not None and not conflict(fp, step):
                    sleep[other] = fp
        return sleep

    # -- races and source sets -------------------------------------------------

    def _analyse(self) -> None:
        """Add to the source sets a reordering of every race that ends in a new step."""
        events = self._events
        first_new = self._branch + 1
        seq: list[int] = []  # per step: its index among its task's steps, from 1
        prev_of: list[int] = []  # per step: the same task's step before it (-1: none)
        clocks: list[dict[int, int]] = []
        counts: dict[int, int] = {}
        last_of: dict[int, int] = {}  # task -> its latest step
        access: dict[object, dict[int, list[int]]] = {}  # key -> task -> last [w, r, c]
        slot = {"w": 0, "r": 1, "c": 2}
        races: list[tuple[int, int]] = []
        for j, (tid, fp) in enumerate(events):
            counts[tid] = counts.get(tid, 0) + 1
            seq.append(counts[tid])
            prev = last_of.get(tid)
            prev_of.append(-1 if prev is None else prev)
            clock = dict(clocks[prev]) if prev is not None else {}
            candidates: set[int] = set()
            for key, mode in fp.items():
                per_task = access.get(key)
                if per_task is None:
                    per_task = access[key] = {}
                for other, (w, r, c) in per_task.items():
                    if other == tid:
                        continue
                    for i, other_mode in ((w, "w"), (r, "r"), (c, "c")):
                        if i >= 0 and (mode == "w" or other_mode == "w" or mode != other_mode):
                            candidates.add(i)
                mine = per_task.get(tid)
                if mine is None:
                    mine = per_task[tid] = [-1, -1, -1]
                mine[slot[mode]] = j
            for i in sorted(candidates, reverse=True):
                ti = events[i][0]
                if clock.get(ti, 0) < seq[i]:
                    if j >= first_new and i >= 1:
                        races.append((i, j))
                    for t, n in clocks[i].items():
                        if clock.get(t, 0) < n:
                            clock[t] = n
            clock[tid] = seq[j]
            clocks.append(clock)
            last_of[tid] = j
        for i, j in races:
            self._plan_reversal(i, j, seq, clocks, prev_of[j])

    def _plan_reversal(
        self, i: int, j: int, seq: list[int], clocks: list[dict[int, int]], before_j: int
    ) -> None:
        node = self._nodes[i - 1]  # the state just before step i
        tj = self._events[j][0]
        if tj not in node.runnable:
            self._plan_earlier(i, tj, before_j)
        if node.backtrack.issuperset(node.runnable):
            return
        ti, si = self._events[i][0], seq[i]
        after = [k for k in range(i + 1, j) if clocks[k].get(ti, 0) < si]
        after.append(j)
        initials: list[int] = []
        first_seq: dict[int, int] = {}
        for k in after:
            t = self._events[k][0]
            if t in first_seq:
                continue
            clock = clocks[k]
            if all(clock.get(u, 0) < s for u, s in first_seq.items()):
                initials.append(t)
            first_seq[t] = seq[k]
        if node.backtrack.intersection(initials):
            return
        pick = tj if tj in initials else (initials[0] if initials else -1)
        if pick in node.runnable:
            node.backtrack.add(pick)

    def _plan_earlier(self, i: int, tj: int, before_j: int) -> None:
        """Step j's task was not offered before step i: it wanted a lock that i's task
        held (i released it, j takes it). The reversal is to run j's step before that
        lock was taken: at the latest earlier state where it was offered with the same
        next step (no step of its own in between)."""
        for k in range(i - 1, max(before_j, 0), -1):
            earlier = self._nodes[k - 1]
            if tj in earlier.runnable:
                earlier.backtrack.add(tj)
                return

    def _backtrack(self) -> bool:
        """Move to the deepest node with a planned, unexplored, awake task."""
        while self._nodes:
            node = self._nodes[-1]
            todo = sorted(node.backtrack - node.done.keys() - node.sleep.keys())
            if todo:
                node.chosen = todo[0]
                node.done[todo[0]] = None
                self._branch = len(self._nodes) - 1
                return True
            self._nodes.pop()
        return False


class ProofStrategy(DporStrategy):
    """DPOR run to the end: a report says "verified: N traces, complete" or shows the
    counterexample. ``max_executions`` / the exploration's ``time_budget`` may stop it
    first, and then it proved nothing (``complete`` is ``False``)."""

    proof = True

    def describe(self) -> str:
        return "ProofStrategy()"
