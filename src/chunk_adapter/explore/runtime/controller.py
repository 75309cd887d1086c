"""The controller: tasks run one at a time, the turn handed on by a strategy.

Every task (the scheduler-thread script and each thread the adapter starts) has a
carrier (:mod:`.carriers`): a real thread handed a baton, or a greenlet on one
hub thread. At every switch point the running task asks the strategy which task
runs next and, if that is another task, hands it the turn and waits for its own.
So exactly one task runs at any moment, and the order of everything the tasks do
is a pure function of the strategy's choices, whichever carrier runs them.

Time is virtual: :attr:`Controller.now` moves only when no task can run, and
then jumps to the earliest deadline of a blocked task. No task runnable and no
deadline is a deadlock; more than ``max_steps`` switch points is reported as a
livelock when virtual time stood nearly still over the last of them (a busy
loop) or a thread ran on after the script ended, and as a long execution
(no verdict) when time kept moving (an adapter that polls at its pace in a
scenario that takes long).

Over 400 lines, and one module because the scheduling core (switch points, blocking,
virtual time, the hand-off, the step clock) is one state machine over one task table;
the types it deals in (:mod:`.tasks`), what carries tasks (:mod:`.carriers`) and the
primitives are already apart.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol, cast

from . import real
from .carriers import make_carrier
from .footprint import TIME_PASSED, Footprint, Tracker, no_touch
from .tasks import (
    SECTION_GAP,
    TIME_PASSES,
    Aborted,
    Crawl,
    ExplorerMisuse,
    Failure,
    Step,
    StepClock,
    Task,
    TaskState,
    blocked_forever,
    caller,
    creeping_deadline,
    foreign,
    idle_worker,
    stuck,
    task_failure,
)

__all__ = [
    "Aborted",
    "Controller",
    "ExplorerMisuse",
    "Failure",
    "Pruned",
    "Scheduler",
    "Step",
    "Task",
    "TaskState",
]


_RUNNABLE = TaskState.RUNNABLE  # read at every step
_BLOCKED = TaskState.BLOCKED
_FINISHED = TaskState.FINISHED
_PREEMPTED = cast(Task, object())
"""What :meth:`Controller._choose` returns when the strategy chose :data:`TIME_PASSES`:
the running task is off the CPU, and :meth:`Controller._pick` chooses again."""


CHECKPOINT_EVERY = 5_000
"""Steps between two :attr:`Controller.checkpoint` calls."""
CUT_SHORT = "the history so far shows a root cause a verify baseline accepts"


class Scheduler(Protocol):
    """What a strategy offers the controller (one module per strategy implements it;
    :class:`~.strategies.base.Strategy` declares every call with its default)."""

    every_step: bool
    """Asked at every step, even when only one task can run."""
    watches_sections: bool
    """The controller sets :attr:`gap` before each :meth:`next_task`."""
    gap: bool
    """The running task is about to take again a lock it released a few switch points ago."""
    watches_effects: bool
    """The controller sets :attr:`effect` before each :meth:`next_task`."""
    effect: bool
    """The running task is not the scheduler's and is about to put, get or build."""
    observes: bool
    """The controller tracks footprints and calls :meth:`observe` and :meth:`waiting` (DPOR)."""

    def start_execution(self) -> bool:
        """Prepare the next execution; ``False`` when there is none left to run."""

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        """Pick the task to run next from *runnable* (sorted ids; *current* if still runnable)."""

    def next_u64(self) -> int:
        """A random number for the code under test (recorded, so replay reproduces it)."""

    def observe(self, tid: int, footprint: Footprint, held: dict[Any, int] | None = None) -> None:
        """Task *tid* ended a step that touched *footprint*; *held*: who holds each lock
        the step touched afterwards (-1: nobody)."""

    def waiting(self, tid: int, lock: Any, holder: int) -> None:
        """At this choice point task *tid* is not offered: its next step takes *lock*,
        which task *holder* holds."""


class Pruned(Exception):
    """Raised by a strategy's ``next_task`` to end the execution early without a verdict:
    everything it could still reach was explored already (DPOR's sleep-set blocking)."""


class Controller:
    """Runs one execution: tasks, their turns, the virtual clock, failure detection.

    Invariant: outside :meth:`run`'s start and its abort, at most one task runs
    at a time (the one whose turn it is: :attr:`current`). Decisions are
    recorded under ``_lock`` and frozen when the execution ends, so a thread that
    comes back late (after an abort) cannot change the schedule already reported.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        max_steps: int = 50_000,
        wall_timeout: float = 20.0,
        every_step: bool = False,
        runtime: str = "thread",
        slack: float = 0.0,
        early_timers: float = 0.0,
        resolution: float = 0.0,
        races: bool | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.carrier = make_carrier(runtime)
        self.runtime = self.carrier.name
        self._key = self.carrier.key_function()  # called at every step: no wrapper
        self.max_steps = max_steps
        # wall_timeout: real seconds one task may run without coming back before the execution
        # is abandoned as "uncontrolled": one hand-off's bound, not the execution's.
        self.wall_timeout = wall_timeout
        # every_step: ask the scheduler even when only one task can run (PCT counts steps).
        self.every_step = every_step
        # slack: virtual seconds of timer slack. 0: timeouts fire one at a time (DPOR and
        # the proofs rest on it). More: deadlines that close to the earliest fire with it,
        # so tasks whose sleeps end at nearly the same time can run in either order.
        self.slack = slack
        # early_timers: at a section gap (a task about to retake a lock it just released),
        # the strategy may also choose TIME_PASSES when a timer is due within this many
        # virtual seconds: the task is preempted that long (it sleeps), as a loaded machine
        # preempts a thread, and a task asleep (a polling pause, a call's latency) gets
        # into the gap.
        # 0: off (DPOR and the proofs: timeouts fire only when nobody can run).
        self.early_timers = early_timers
        # resolution: the shortest timed block of the code under test, in virtual seconds
        # (0: exact). A shorter one sleeps this long, as on a kernel with coarse timers:
        # an adapter polling every 1 ms through a 60 s outage takes a fifth of the steps
        # at the generated worlds' 5 ms, and the contract's bounds (R17: 0.25 s) are far
        # above it.
        self.resolution = resolution
        self.now = 0.0
        self.steps = 0
        # Over max_steps, tells a busy loop (time stands still) from a long execution.
        self._clock = StepClock(max_steps)
        # The steps it notes (StepClock.tick does nothing on the others), read at every step.
        self._mark_every, self._timed_from = self._clock.every, self._clock.real_from
        self.handoffs = 0  # bumped whenever a task enters the controller (the watchdog's pulse)
        self.tasks: list[Task] = []  # every task, by id
        # The tasks not finished, in id order: what every step scans for who can run. An
        # adapter that starts a thread per round (a threading.Timer chain) leaves thousands
        # of finished tasks behind; scanning them all made each step cost O(every thread
        # ever started). A finished task may linger here (a scan checks the state anyway).
        self._live: list[Task] = []
        self.current: Task | None = None
        self.role = ""  # the pipeline member the scheduler builds or calls now (Task.role)
        self.calling = ""  # the kind of the script op the scheduler is in now ("" between)
        # (task, lock, call): a lock the task held across a whole call and then released
        # itself (.held: the lock is a mutex held across slow work, not a signal)
        self.held_across: list[tuple[Task, Any, str]] = []
        self.trace: list[Step] = []
        self.decisions: list[tuple[str, int]] = []  # ("t", tid) or ("r", random value)
        self.failures: list[Failure] = []
        # Asked every CHECKPOINT_EVERY steps, when set: True ends the execution there as
        # "too long" (the history so far already decides it: a verify baseline accepts
        # a violation it shows, so running on to max_steps would only spend the budget).
        self.checkpoint: Callable[[], bool] | None = None
        self.foreign: list[str] = []  # threads seen using the explorer that it does not run
        self.progress = 0  # bumped by the wrappers on puts, values got and builds
        self.main_done = False
        self.idents: set[int] = set()  # every OS thread ident tasks ran on, finished or not
        self._by_key: dict[Any, Task] = {}  # the carrier's key of each running task
        self._aborting = False
        self._frozen = False
        self._over = False  # _frozen or _done set: read at every step instead of both
        # _lock (a real lock: the controller never uses patched primitives) guards
        # decisions, failures, foreign and _frozen against a task that comes back
        # while the driver ends the execution. Held for an append; nobody waits on it.
        self._lock = real.allocate_lock()
        # _done: set (once) when the execution is over (every task finished, or a failure
        # stopped it) by the task that ends it. The driver thread waits on it.
        self._done = real.Event()
        # Called on the driver when the execution is over, before it is frozen (a scan).
        self.before_finish: Callable[[], None] | None = None
        # Footprints (DPOR, .footprint): only when the scheduler observes them. Tracking
        # off: no tracker, touch does nothing, every step goes as before.
        self.tracker: Tracker | None = (
            Tracker(scheduler.observe, scheduler.waiting) if scheduler.observes else None
        )
        self.tracking = self.tracker is not None
        self.every_step = every_step or self.tracking  # DPOR follows every step
        # The scheduler wants to know when the running task is between two critical
        # sections of one lock (strategies.sections): a gap it may preempt at.
        self._sections = scheduler.watches_sections
        # The scheduler wants to know when an adapter thread is about to put, get or
        # build (strategies.effects): a thread it may hold there while the scheduler calls.
        self.effects = scheduler.watches_effects
        self.touch: Callable[[object, str], None] = (
            no_touch if self.tracker is None else self.tracker.touch
        )
        # Race points (:meth:`access`), for the same strategies unless *races* says: the
        # adapter attributes some task wrote holding a lock, and who touched each (task ids).
        self.races = self._sections if races is None else races
        self._guarded: set[object] = set()
        self._touched_by: dict[object, set[int]] = {}
        self._serial = 0
        self.pruned = False  # the strategy ended the execution early (Pruned): no verdict
        self.opaque = False  # state outside any footprint: every step conflicts (set by run_once)

    def new_serial(self) -> int:
        """A number for an object made in this execution (same order, same number)."""
        self._serial += 1
        return self._serial

    # -- the driver side -------------------------------------------------

    def run(self, main: Callable[[], None]) -> None:
        """Run *main* as the scheduler-thread task and everything it starts, to the end."""
        self.carrier.run(self, main)
        pulse, since = -1, real.monotonic()
        crawl = Crawl(self.steps, self.now)
        while not self._done.wait(min(self.wall_timeout, 0.5)):
            running = self.current.name if self.current else "?"
            if self.handoffs != pulse:
                pulse, since = self.handoffs, real.monotonic()
            elif real.monotonic() - since >= self.wall_timeout:
                last = self.trace[-1].label if self.trace else "its start"
                thread = self.current.thread if self.current else None
                ident = thread.ident if thread is not None else None
                self._add_failure(stuck(running, last, self.wall_timeout, ident))
                break
            crawled = crawl.check(self.steps, self.now, running, self.wall_timeout, since)
            if crawled is not None:
                self._add_failure(crawled)
                break
        if self.before_finish is not None:
            self.before_finish()
        self.finish()
        self._abort_all()

    def finish(self) -> None:
        """Freeze the decisions and failures: the execution is over whatever runs late."""
        with self._lock:
            self._frozen = self._over = True
            if self.foreign and not any(f.kind == "uncontrolled" for f in self.failures):
                # First: whatever else went wrong may be its consequence.
                self.failures.insert(0, foreign(self.foreign))

    @property
    def done(self) -> bool:
        """The execution is over (every task finished, or a failure or the strategy ended it)."""
        return self._done.is_set()

    @property
    def aborting(self) -> bool:
        return self._aborting

    def _abort_all(self) -> None:
        self._aborting = True
        self.carrier.abort(self, stuck=not self._done.is_set())

    # -- tasks ------------------------------------------------------------

    def spawn(
        self,
        target: Callable[[], None],
        name: str,
        *,
        is_main: bool = False,
        thread: threading.Thread | None = None,
    ) -> Task:
        """A new task running *target*: on a new carrier, or on *thread* (a ``Thread`` the
        code under test made and started: its ``run`` is wrapped, so ``current_thread()``
        inside it is that object)."""
        starter = self.current
        role = starter.role if starter is not None and starter.role else self.role
        task = Task(len(self.tasks), name, role, main=is_main)
        self.tasks.append(task)
        self._live.append(task)
        self.touch(("task", task.tid), "w")
        body = functools.partial(self._body, task, target, is_main)
        self.carrier.spawn(self, task, body, thread)
        return task

    def _body(self, task: Task, target: Callable[[], None], is_main: bool) -> None:
        key = self._key()
        self._by_key[key] = task
        self.idents.add(real.get_ident())
        self.carrier.enter(task)
        # A read: ordered after the spawn (a write), but not against join and is_alive,
        # which see no difference between a thread that has not run yet and one running.
        self.touch(("task", task.tid), "r")
        try:
            if not self._aborting:
                target()
        except Aborted:
            task.state = TaskState.FINISHED
            self._gone(task)
            return
        except BaseException as exc:
            # A fault injected as a SystemExit... (R30) ends an adapter thread as Python
            # ends it: what that means is judged from what the adapter does next.
            if is_main or not getattr(exc, "injected_fatal", False):
                self._add_failure(task_failure(exc, task.name, is_main, self.now))
        finally:
            self._by_key.pop(key, None)
        if is_main:
            self.main_done = True
        self.touch(("task", task.tid), "w")
        task.state = TaskState.FINISHED
        self._gone(task)
        for joiner in task.joiners:
            self.wake(joiner, "joined")
        task.joiners.clear()
        if not self._aborting:
            with contextlib.suppress(Aborted):  # the execution ended while it finished
                self._reschedule(task)

    def _gone(self, task: Task) -> None:
        """*task* finished: no step scans it again."""
        with contextlib.suppress(ValueError):  # taken out already (an abort races it)
            self._live.remove(task)

    def is_task(self) -> bool:
        """Whether the caller is one of this execution's running tasks."""
        return self._key() in self._by_key

    def task_here(self) -> Task | None:
        """The running task that calls, or ``None`` (another thread, or the hub itself)."""
        return self._by_key.get(self._key())

    def me(self) -> Task:
        task = self._by_key.get(self._key())
        if task is None:
            name = real.current_thread().name
            if not self._frozen:
                self.note_foreign(f"thread {name!r} ran {caller()} (it used the explorer's "
                                  "primitives or connector)")  # fmt: skip
            raise ExplorerMisuse(
                f"a controlled primitive was used from thread {name!r}, which the explorer "
                "does not run; use the primitives only from the scenario and the threads the "
                "adapter starts (through its runtime, or threading while it is explored)"
            )
        return task

    def note_foreign(self, what: str) -> None:
        """Record a thread the explorer does not run doing the adapter's work."""
        with self._lock:
            if not self._frozen and what not in self.foreign:
                self.foreign.append(what)

    # -- switch points ----------------------------------------------------

    def switch_point(self, label: str) -> None:
        """The running task is about to do *label*; the strategy may run another task first."""
        task = self._by_key.get(self._key())  # me(), inlined: this runs at every step
        if task is None:
            task = self.me()
        if self._aborting:
            raise Aborted
        trace = self.trace
        trace.append(Step(len(trace), task.tid, self.now, label))
        task.points += 1
        self._reschedule(task)

    def switch_point_of(self, task: Task, label: str) -> None:
        """:meth:`switch_point` for a caller that has the running task already (from
        :meth:`me`, called just before): the same step, without looking it up again."""
        if self._aborting:
            raise Aborted
        trace = self.trace
        trace.append(Step(len(trace), task.tid, self.now, label))
        task.points += 1
        self._reschedule(task)

    def effect_point(self, label: str) -> None:
        """:meth:`switch_point` just before a visible effect (a connector put or get, a
        ``build_payload``): the same step, and a strategy that watches effects is told
        when the task is an adapter thread's (the scheduler's own calls are not held)."""
        task = self._by_key.get(self._key()) or self.me()  # me(), inlined: a task is truthy
        task.effect = not task.main
        try:
            self.switch_point_of(task, label)
        finally:
            task.effect = False

    def block(self, label: str, deadline: float | None, *, own: bool = False) -> str:
        """Block the running task until :meth:`wake` (or *deadline*); return the wake reason.
        *own*: the suite's wait, not the code under test's (no creeping-deadline check)."""
        task = self._by_key.get(self._key()) or self.me()  # me(), inlined: a task is truthy
        if self._aborting:
            raise Aborted
        timeout = None if deadline is None else deadline - self.now
        creep = None if timeout is None or own else creeping_deadline(task, timeout)
        if creep is not None:  # a clock outside the explorer's: end the execution here
            self._fail(creep.kind, creep.message)
        if timeout is not None and not own and 0 < timeout < self.resolution:
            deadline = self.now + self.resolution
        task.state = _BLOCKED
        task.blocked_on = label
        task.deadline = deadline
        task.wake_reason = ""
        self._reschedule(task)
        timed_out = task.wake_reason == "timeout" and not own
        task.waited, task.points = (timeout if timed_out else None), 0
        return task.wake_reason

    def wake(self, task: Task, reason: str) -> None:
        if task.state is _BLOCKED:
            task.state = _RUNNABLE
            task.deadline = None
            task.wake_reason = reason

    def note(self, label: str) -> None:
        """Add a line to the trace without a switch point (script calls and their results)."""
        task = self._by_key.get(self._key()) or self.me()  # me(), inlined: a task is truthy
        self.handoffs += 1
        trace = self.trace
        trace.append(Step(len(trace), task.tid, self.now, label))

    def random_u64(self) -> int:
        value = self.scheduler.next_u64()
        self._decide(("r", value))
        return value

    def _decide(self, decision: tuple[str, int]) -> None:
        with self._lock:
            if self._frozen:
                raise Aborted  # the execution is over: this late thread must not choose
            self.decisions.append(decision)

    def _add_failure(self, failure: Failure) -> None:
        with self._lock:
            if not self._frozen:
                self.failures.append(failure)

    # -- the scheduling core (runs on the task that gives up the turn) --

    def _reschedule(self, me: Task) -> None:
        """*me* is at a step: pick who runs next (:meth:`_pick`) and hand it the turn."""
        self.handoffs += 1
        if self.tracker is not None and not self._frozen:
            self.tracker.end_step(me.tid, self.opaque)
        nxt = self._pick(me)
        if nxt is me:
            return
        if nxt is not None:
            self.current = nxt
        self.carrier.hand(self, me, nxt)
        if self._aborting and me.state is not _FINISHED:
            raise Aborted

    def _end(self) -> None:
        """The execution is over: nobody is handed the turn again; the driver wakes."""
        self._over = True
        self._done.set()

    def _pick(self, me: Task) -> Task | None:
        """The task to run after this step (``None``: the execution is over). Counts the
        step, fires timeouts when nobody can run, and asks the strategy when there is a
        choice (or at every step: ``every_step``). A loop, not a recursion, around the
        strategy's :data:`TIME_PASSES` (:meth:`_choose`): a thread held off the CPU while
        short timers keep firing is preempted hundreds of times in a row, and each
        preemption once cost two stack frames of the task that gave up the turn (a chain
        of ``threading.Timer`` rounds hit Python's recursion limit there)."""
        while True:
            if self._over:
                return None
            runnable = [t for t in self._live if t.state is _RUNNABLE]
            if not runnable:
                runnable = self._fire_timeouts()
                if not runnable:
                    return None
            steps = self.steps = self.steps + 1
            if steps % self._mark_every == 0 or steps >= self._timed_from:
                self._clock.tick(steps, self.now)
            if steps > self.max_steps:
                self._add_failure(self._clock.over_budget(self.now, self.main_done))
                self._end()
                return None
            if self.checkpoint is not None and steps % CHECKPOINT_EVERY == 0 and self.checkpoint():
                self._add_failure(
                    Failure("too long", f"cut at {steps:,} switch points: {CUT_SHORT}")
                )
                self._end()
                return None
            may_pass = self._time_may_pass(me)
            if len(runnable) == 1 and not self.every_step and not may_pass:
                return runnable[0]
            chosen = self._choose(me, runnable, may_pass)
            if chosen is not _PREEMPTED:
                return chosen

    def access(self, key: object, mode: str) -> None:
        """The running task read or wrote an attribute of the adapter (*key*, *mode* as
        :meth:`touch`; :mod:`.watch`): DPOR's footprint, and, for a strategy that watches
        sections (:attr:`races`), a **race point**: a switch point before the access when
        the task holds no lock and the attribute is state another task touched and some
        task wrote holding a lock — lock-guarded state touched without its lock, the
        shape of every unlocked check-then-act and lost update, whatever the code looks
        like. The strategy may preempt there as at a section gap (:meth:`_at_gap`)."""
        self.touch(key, mode)
        if not self.races or self._aborting or self._frozen:
            return
        me = self.task_here()
        if me is None:
            return
        users = self._touched_by.setdefault(key, set())
        users.add(me.tid)
        if me.holding:
            if mode == "w":
                self._guarded.add(key)
            return
        if key in self._guarded and len(users) > 1:
            name = key[-1] if isinstance(key, tuple) else key
            me.race = True
            try:
                self.switch_point_of(me, f"unlocked {'write' if mode == 'w' else 'read'} {name}")
            finally:
                me.race = False

    def _at_gap(self, me: Task) -> bool:
        """Whether *me* is about to retake a lock it released a few switch points ago, or
        is at a race point (:meth:`access`)."""
        if me.race:
            return True
        return (
            me.state is _RUNNABLE
            and me.wants is not None
            and me.wants is me.released
            and self.steps - me.released_at <= SECTION_GAP
        )

    def _time_may_pass(self, me: Task) -> bool:
        """Whether :data:`TIME_PASSES` is offered now (:attr:`early_timers`): at a section
        gap, or at an adapter thread's effect point for a strategy that watches those."""
        if not self.early_timers:
            return False
        if not self._at_gap(me) and not (self.effects and me.effect):
            return False
        due = self.now + self.early_timers
        return any(
            t.state is _BLOCKED and t.deadline is not None and t.deadline <= due for t in self._live
        )

    def _fire_timeouts(self) -> list[Task]:
        """No task can run: wake the earliest timed-out task(s) and return them, moving
        virtual time to their deadline; with none, the execution is over (``[]``).

        Timeouts fire one at a time: the earliest deadline (then the lowest id) wakes
        alone and runs until it blocks before the next one fires; with timer slack, every
        deadline within it of the earliest fires too (each task a little late, none
        early), and the strategy orders them."""
        first: Task | None = None
        first_due = 0.0
        timed = 0
        for t in self._live:  # one pass, in id order: the lowest id wins a tie
            if t.state is _BLOCKED:
                due = t.deadline
                if due is not None:
                    timed += 1
                    if first is None or due < first_due:
                        first, first_due = t, float(due)
        if first is None:
            stuck_ = [t for t in self._live if t.state is _BLOCKED]
            if self.main_done:  # an idle pool worker outlives the script: not a hang
                stuck_ = [t for t in stuck_ if not idle_worker(t)]
            if stuck_:
                self._add_failure(blocked_forever(stuck_, self.main_done, self.now))
            self._end()  # every task finished, or blocked with nothing to wake it
            return []
        if self.slack > 0 and timed > 1:  # in id order, like every runnable list
            limit = first_due + self.slack
            group = [
                t
                for t in self._live
                if t.state is _BLOCKED and t.deadline is not None and float(t.deadline) <= limit
            ]
            self.now = max(self.now, *(float(t.deadline) for t in group if t.deadline is not None))
        else:
            group = [first]
            if first_due > self.now:  # max(now, first_due)
                self.now = first_due
        for task in group:
            self.wake(task, "timeout")
        if self.tracker is not None:
            # DPOR: the step the timeout starts runs after every step so far (it can
            # only run once all of them are done and every task blocked).
            self.touch(TIME_PASSED, "w")
        return group

    def _choose(self, me: Task, runnable: list[Task], may_pass: bool) -> Task | None:
        """Ask the strategy which of *runnable* runs next (and record the decision);
        *may_pass*: :data:`TIME_PASSES` is one of the choices (:meth:`_time_may_pass`),
        and when the strategy takes it, :data:`_PREEMPTED` is returned."""
        current = me.tid if me.state is _RUNNABLE else None
        offered = runnable
        if self.tracker is not None:  # DPOR: not a task that would only block on a lock
            offered = self.tracker.offered(runnable)
            if current is not None and self.tasks[current] not in offered:
                current = None
        if self._sections:
            self.scheduler.gap = current is not None and self._at_gap(self.tasks[current])
        if self.effects:
            self.scheduler.effect = current is not None and self.tasks[current].effect
        tids = [t.tid for t in offered]
        if current is not None and may_pass:
            tids.append(TIME_PASSES)
        try:
            tid = self.scheduler.next_task(tids, current)
        except AssertionError as exc:  # ScheduleDiverged: must not reach the adapter's code
            self._fail("diverged", str(exc))
            return None
        except Pruned:
            self.pruned = True
            self._end()
            return None
        # recorded wherever a strategy that is not asked at every step is asked: a choice
        # among tasks, or a preempted task at a race point (may_pass, no current: one
        # task offered), so that its replay consumes each decision at the same point
        if len(runnable) > 1 or may_pass:
            with self._lock:  # _decide, inlined: a third of the steps choose
                if self._frozen:
                    raise Aborted  # the execution is over: this late thread must not choose
                self.decisions.append(("t", tid))
        if tid == TIME_PASSES and TIME_PASSES in tids:
            # preempted: off the CPU for early_timers virtual seconds, as if it slept, while
            # the others run and the timers due meanwhile fire; who runs now is chosen again
            me.state, me.blocked_on = _BLOCKED, "preempted"
            me.deadline, me.wake_reason = self.now + self.early_timers, ""
            return _PREEMPTED  # _pick chooses again
        tasks = self.tasks
        chosen = tasks[tid] if 0 <= tid < len(tasks) else None
        if chosen is None or chosen.state is not _RUNNABLE:
            self._fail("diverged", f"the schedule chose task {tid}, which cannot run now")
            return None
        return chosen

    def give_up(self, kind: str, message: str) -> NoReturn:
        """End the execution here with a failure the runtime diagnosed (a wait it cannot
        time): recorded first, so whatever the code under test does with the
        :class:`Aborted` raised in the calling task, the execution ends with this."""
        self._fail(kind, message)
        raise Aborted

    def _fail(self, kind: str, message: str) -> None:
        self._add_failure(Failure(kind, message))
        self._end()
