"""Dynamic partial-order reduction: source sets with sleep sets (Abdulla et al. 2014).

DFS runs every order of every step. Two steps that touch nothing in common (a
RECV thread's ``get r_0_1`` and the SAVE thread's ``acquire _send_lock``) give
the same result in either order, so running both orders is waste; DPOR runs
one order of each such pair and every order of the steps that *conflict*
(:mod:`..runtime.footprint` says which: same lock, condition, event, task, queue,
connector key, request history, adapter attribute). Each execution explores one
*Mazurkiewicz trace* (an equivalence class of schedules under swapping adjacent
independent steps); the exploration is complete when every trace was run.

How (stateless, like DFS: executions are replayed from the start):

* The controller hands over each step's footprint when the step ends
  (``observe``, since it sets ``observes``); the strategy asks at every step
  (``every_step``).
* After an execution, every *race* — two conflicting steps of different tasks
  with no happens-before path between them except their own conflict — adds,
  at the state before the first step, a task that starts a reordering of the
  two (an *initial* of the steps after it that do not depend on it, followed by
  the second step) unless one is already planned there: the *source set*.
* Locks: a task about to take a lock another task holds is not offered (the
  controller), so its ``acquire`` cannot be moved before the step that *let the lock
  go* — that race is not reversible. It is reversed with the step that *took* the lock
  instead (the controller says who holds each lock a step touched). Before this rule,
  the reversal was planned where the lock was still held, the branch ended sleep-set
  blocked, and DPOR completed scenarios it had not covered (``TwoSaveThreads``).
* Time: the step a timeout starts (the virtual clock jumped because every task was
  blocked) happens after every earlier step and races with none of them.
* *Sleep sets*: a task whose step from a state was explored already sleeps in
  the branches explored after it until a step that conflicts with it runs. An
  execution where every runnable task sleeps is redundant and ends at once
  (``Pruned``: counted, never checked).

It is sound for what the explorer controls, as DFS with no preemption bound is:
the test ``tests/explore/test_dpor.py`` checks it reaches the verdicts DFS
reaches. It is unbounded: a proof (:class:`ProofStrategy`) covers every trace of
the scenario, up to its own bounds (its script, ``settle`` limit and
``max_steps``).

**With a preemption bound** (``DporStrategy(preemption_bound=2)``; Coons, Musuvathi
and McKinley 2013, "Bounded partial-order reduction") it covers every trace that
has a schedule with at most that many preemptions, as DFS at that bound does, in
far fewer executions. A choice costs a preemption when the task that ran the step
before could go on and another is chosen, as in DFS; a branch over the bound is
never run. Four changes keep what the bound would otherwise cut off:

* no sleep sets: a sleeping task's orders were explored from an earlier state,
  but perhaps with more preemptions than the bound allows from there;
* *conservative* branching: a reversal planned before step i is also planned
  where step i's task was switched to (the start of its run of steps), where the
  choice costs no more preemptions than the one made there;
* a task that is not offered because its next step takes a lock another task
  holds (``waiting``) races with the step that took that lock: it is planned
  before that step (Flanagan and Godefroid check every task's next step). Unbounded,
  the same order comes through a chain of reversals that the bound can cut;
* the classic reversal: the racing task itself is planned (every task that can run
  there when it cannot), not any first step of the reversed order as source sets
  allow, which may reach the reversal only through choices the bound forbids.

``tests/explore/test_dpor.py`` checks that bounded DPOR reaches exactly the results
DFS reaches at the same bound, on random programs (``tests/explore/_random_programs.py``)
and on the library; and that without each of the first three rules it does not.

Over 400 lines, and one module because the source-set and sleep-set bookkeeping is one
algorithm over one stack of steps (Abdulla et al.'s Algorithm 1); split, its invariants
would span modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..runtime.controller import Pruned
from ..runtime.footprint import TIME_PASSED, Footprint, conflict
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
    current: int | None = None  # the task that ran the step before, if it can go on
    preemptions: int = 0  # preemptions on the path before this choice

    def cost(self, tid: int) -> int:
        """The preemptions on the path once *tid* is chosen here."""
        switch = self.current is not None and tid != self.current
        return self.preemptions + (1 if switch else 0)


_SLOT = {"w": 0, "r": 1, "c": 2}  # where _Order keeps the last step of each mode


class _Order:
    """Happens-before over the steps of the current execution, kept across executions.

    Per step: its task, its index among its task's steps (``seq``, from 1), the same
    task's step before it, and its vector clock (task -> how many of that task's steps
    happen before it or are it). ``access`` keeps, per object and task, the last
    step that touched it in each mode; ``undo`` what each step changed there, so
    the next execution, which replays a prefix, keeps that prefix and redoes the rest.
    """

    def __init__(self) -> None:
        self.tids: list[int] = []
        self.seq: list[int] = []
        self.prev_of: list[int] = []
        self.clocks: list[dict[int, int]] = []
        self._last_of: dict[int, int] = {}
        self._access: dict[object, dict[int, list[int]]] = {}
        self._undo: list[list[tuple[list[int], int, int]]] = []

    def __len__(self) -> int:
        return len(self.seq)

    def truncate(self, n: int) -> None:
        """Forget the steps from *n* on."""
        while len(self.seq) > n:
            for entry, slot, old in reversed(self._undo.pop()):
                entry[slot] = old
            tid, prev = self.tids.pop(), self.prev_of.pop()
            self.seq.pop()
            self.clocks.pop()
            if prev < 0:
                del self._last_of[tid]
            else:
                self._last_of[tid] = prev

    def add(self, tid: int, fp: Footprint) -> list[int]:
        """Append a step; return the earlier steps it races with (latest first)."""
        j = len(self.seq)
        prev = self._last_of.get(tid, -1)
        clock = dict(self.clocks[prev]) if prev >= 0 else {}
        if TIME_PASSED in fp:
            # Started by a timeout: after every step so far, racing with none of them.
            for t, last in self._last_of.items():
                clock[t] = self.seq[last]
        candidates: set[int] = set()
        undo: list[tuple[list[int], int, int]] = []
        for key, mode in fp.items():
            if key == TIME_PASSED:
                continue
            per_task = self._access.get(key)
            if per_task is None:
                per_task = self._access[key] = {}
            for other, (w, r, c) in per_task.items():
                if other == tid:
                    continue
                for i, other_mode in ((w, "w"), (r, "r"), (c, "c")):
                    if i >= 0 and (mode == "w" or other_mode == "w" or mode != other_mode):
                        candidates.add(i)
            mine = per_task.get(tid)
            if mine is None:
                mine = per_task[tid] = [-1, -1, -1]
            slot = _SLOT[mode]
            undo.append((mine, slot, mine[slot]))
            mine[slot] = j
        races: list[int] = []
        for i in sorted(candidates, reverse=True):
            ti = self.tids[i]
            if clock.get(ti, 0) < self.seq[i]:
                races.append(i)  # no other path orders i before j: a race
                for t, n in self.clocks[i].items():
                    if clock.get(t, 0) < n:
                        clock[t] = n
        self.tids.append(tid)
        self.seq.append(1 if prev < 0 else self.seq[prev] + 1)
        self.prev_of.append(prev)
        clock[tid] = self.seq[j]
        self.clocks.append(clock)
        self._last_of[tid] = j
        self._undo.append(undo)
        return races


class DporStrategy(Strategy):
    """Exhaustive over Mazurkiewicz traces (see module doc); ``complete`` when done."""

    every_step = True
    observes = True

    def __init__(
        self, max_executions: int | None = None, preemption_bound: int | None = None
    ) -> None:
        if max_executions is not None and max_executions < 1:
            raise ValueError(f"max_executions is at least 1 (or None), got {max_executions!r}")
        if preemption_bound is not None and preemption_bound < 0:
            raise ValueError(
                f"preemption_bound is at least 0 (or None: unbounded), got {preemption_bound!r}"
            )
        self.max_executions = max_executions
        self.preemption_bound = preemption_bound
        self.executions = 0
        self.pruned = 0  # executions ended early as sleep-set blocked (redundant)
        self.complete = False
        self._nodes: list[_Node] = []
        self._events: list[tuple[int, Footprint]] = []
        self._pos = 0
        self._branch = 0  # the node where this execution leaves the previous one's path
        self._started = False
        self._order = _Order()
        # Locks, per step of this execution: the one it found free and took (None if
        # none), and who held each lock it touched when it ended; _owner: the lock's owner now.
        self._took: list[object] = []
        self._taken_at: dict[object, int] = {}  # lock -> the last step that took it
        self._holding: list[dict[object, int] | None] = []
        self._owner: dict[object, int] = {}

    @property
    def traces(self) -> int:
        """Executions run to their end (each a different Mazurkiewicz trace)."""
        return self.executions - self.pruned

    # -- the strategy interface --------------------------------------------

    def start_execution(self) -> bool:
        if self._started and not self._backtrack():
            self.complete = True
            return False
        if self.max_executions is not None and self.executions >= self.max_executions:
            return False
        # The next execution replays the steps up to the branch and its choice there.
        self._order.truncate(self._branch + 1 if self._started else 0)
        self._started = True
        self.executions += 1
        self._events = []
        self._took = []
        self._taken_at = {}
        self._holding = []
        self._owner = {}
        self._pos = 0
        return True

    def observe(
        self, tid: int, footprint: Footprint, held: dict[object, int] | None = None
    ) -> None:
        """The controller: task *tid* ended a step that touched *footprint*, after which
        *held* says who holds each lock the step touched (-1: nobody)."""
        self._events.append((tid, footprint))
        took: object = None
        if held:
            owner = self._owner
            for key, after in held.items():
                if owner.get(key, -1) == -1 and footprint.get(key) == "w":
                    took = key  # it found the lock free and took it (and may have let it go)
                owner[key] = after
        self._took.append(took)
        if took is not None:
            self._taken_at[took] = len(self._events) - 1
        self._holding.append(dict(held) if held else None)
        at = len(self._events) - 2  # the node that chose this step
        if 0 <= at < len(self._nodes) and self._nodes[at].chosen == tid:
            self._nodes[at].done[tid] = footprint
        j = len(self._events) - 1
        if j < len(self._order):
            return  # a replayed step: its races were planned when it first ran
        for i in self._order.add(tid, footprint):
            if i >= 1:
                self._plan_reversal(i, j)

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
        before = self._nodes[k - 1].cost(self._nodes[k - 1].chosen) if k else 0
        here = current if current in runnable else None
        bound = self.preemption_bound
        awake = [t for t in runnable if t not in sleep]
        if bound is not None and here is not None and before >= bound:
            awake = [here] if here in awake else []
        if not awake:
            self.pruned += 1
            raise Pruned(f"every runnable task sleeps at choice point {k}")
        pick = here if here in awake else awake[0]
        node = _Node(tuple(runnable), sleep, {pick}, {pick: None}, pick, here, before)
        self._nodes.append(node)
        return pick

    def describe(self) -> str:
        if self.preemption_bound is None:
            return "DporStrategy()"
        return f"DporStrategy(preemption_bound={self.preemption_bound})"

    # -- sleep sets ----------------------------------------------------------

    def _sleep_sets(self) -> bool:
        """Whether sleep sets prune: not under a preemption bound (see the module doc)."""
        return self.preemption_bound is None

    def _sleep_after(self, k: int) -> dict[int, Footprint]:
        """The sleep set at node *k*: the parent's, plus the siblings explored before the
        step taken there, less those that conflict with that step."""
        if k == 0 or not self._sleep_sets():
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

    def _plan_reversal(self, i: int, j: int) -> None:
        """Plan, at the state before step i, a task that starts a reordering of the race
        (i, j): an initial of the steps after i that do not depend on it, then j."""
        order = self._order
        seq, clocks = order.seq, order.clocks
        node = self._nodes[i - 1]  # the state just before step i
        tj = self._events[j][0]
        took = self._took[j]
        if took is not None:
            taken = self._taken_by(i, took)
            if taken >= 0:
                # Step j takes a lock that i's task held before i (i let it go): j cannot
                # run before i, only before that task took the lock. Reverse that race.
                if taken >= 1:
                    self._plan_reversal(taken, j)
                return
        if self.preemption_bound is not None:
            # Under a bound, the classic rule (Flanagan and Godefroid; Coons et al.): tj
            # itself, else every task that can run there. Another initial of the reversed
            # order may reach it only through choices the bound forbids.
            _plan_at(node, tj)
            self._plan_conservatively(i, tj)
            return
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

    def waiting(self, tid: int, lock: object, holder: int) -> None:
        """The controller: *tid* is not offered, its next step wants *lock*, held by *holder*.

        Under a preemption bound only: that pending step races with the holder's step
        that took the lock, so plan *tid* before that step (Flanagan and Godefroid check
        every task's next step, enabled or not). Unbounded, the same order is reached
        through the race with the step that takes the lock after tid's, but that chain
        can cost more preemptions than the bound allows."""
        if self.preemption_bound is None:
            return
        # The holder holds the lock, so the last step that took it is the holder's.
        m = self._taken_at.get(lock, -1)
        if m >= 1 and self._events[m][0] == holder:
            _plan_at(self._nodes[m - 1], tid)
            self._plan_conservatively(m, tid)

    def _plan_conservatively(self, i: int, tj: int) -> None:
        """Under a preemption bound, also plan *tj* where step i's task was switched to
        (BPOR, Coons et al. 2013): choosing tj there costs no more preemptions than the
        choice made there, so an order the bound forbids at i may be reached from there."""
        events = self._events
        ti = events[i][0]
        k = i
        while k >= 1 and events[k - 1][0] == ti:
            k -= 1
        if k >= 1 and k != i:
            _plan_at(self._nodes[k - 1], tj)

    def _taken_by(self, i: int, lock: object) -> int:
        """If step i's task held *lock* just before step i: its step that took it.
        Otherwise -1."""
        ti = self._events[i][0]
        for k in range(i - 1, -1, -1):
            held = self._holding[k]
            if held is None or lock not in held:
                continue
            if held[lock] != ti:
                return -1  # the last step before i to touch it left it free, or to another
            for m in range(k, -1, -1):
                if self._events[m][0] == ti and self._took[m] == lock:
                    return m
            return -1
        return -1

    def _backtrack(self) -> bool:
        """Move to the deepest node with a planned, unexplored, awake task."""
        while self._nodes:
            node = self._nodes[-1]
            todo = sorted(node.backtrack - node.done.keys() - node.sleep.keys())
            if self.preemption_bound is not None:
                todo = [t for t in todo if node.cost(t) <= self.preemption_bound]
            if todo:
                node.chosen = todo[0]
                node.done[todo[0]] = None
                self._branch = len(self._nodes) - 1
                return True
            self._nodes.pop()
        return False


def _plan_at(node: _Node, tid: int) -> None:
    """Plan *tid* at *node*; every task that can run there if it cannot."""
    if tid in node.runnable:
        node.backtrack.add(tid)
    else:
        node.backtrack.update(node.runnable)


class ProofStrategy(DporStrategy):
    """DPOR run to the end: a report says "verified: N traces, complete" or shows the
    counterexample. ``max_executions`` / the exploration's ``time_budget`` may stop it
    first, and then it proved nothing (``complete`` is ``False``)."""

    proof = True

    def describe(self) -> str:
        return "ProofStrategy()"
