"""What the controller deals in: tasks, steps, failures, and the scheduler it asks.

Kept apart from :mod:`.controller` so the primitives and strategies can name
these types without the scheduling core. The failures the controller diagnoses
itself (a thread that does not come back, threads it does not run, every task
blocked, a livelock) are worded here, each saying the fix.

Over 400 lines, and one module because it is the explorer's vocabulary (tasks, steps,
failures and their wording); the failure messages, each naming its fix, are most of its
length.
"""

from __future__ import annotations

import concurrent.futures.thread
import itertools
import sys
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from ...confirm import Run
from ...finding import Finding, first_line
from . import real

__all__ = [
    "SECTION_GAP",
    "TIME_PASSES",
    "Aborted",
    "Crawl",
    "ExplorerMisuse",
    "FactoryFailed",
    "Failure",
    "Step",
    "StepClock",
    "Task",
    "TaskState",
    "as_failure",
    "blocked_forever",
    "caller",
    "crawling",
    "creeping_deadline",
    "foreign",
    "livelock",
    "shown",
    "stuck",
    "task_failure",
    "too_long",
    "waits_in_real_time",
]


SECTION_GAP = 12
"""Switch points between a task's release of a lock and its next take of the same lock
that still make one operation split in two critical sections (a connector call and a few
checks fit in between): :mod:`.strategies.sections` preempts in that gap."""


TIME_PASSES = 1 << 40
"""The choice a strategy may be offered besides the runnable tasks at a section gap
(:attr:`Controller.early_timers`): the running task is preempted for that many virtual
seconds (it sleeps; the timers due meanwhile fire). Never a task id: ids count up from 0
per execution, and no execution starts 2**40 threads (it was 999 once, which the
thousandth thread of an adapter that starts one per ``threading.Timer`` round reached:
that thread's turns read as "time passes"). Written ``_`` in a schedule string."""


_cf_worker = concurrent.futures.thread._worker


class Aborted(BaseException):
    """Raised inside a task to unwind it when its execution is abandoned.

    A ``BaseException`` so that an adapter's ``except Exception`` cannot swallow it.
    """


class ExplorerMisuse(RuntimeError):
    """The explorer was used in a way it cannot support (the message says how to fix it)."""


class FactoryFailed(Exception):
    """The factory raised while an execution built its adapters. Not a verdict on the
    adapter's behaviour (no contract call was made yet): the stage says so, inconclusive."""


class TaskState(Enum):
    RUNNABLE = "runnable"
    BLOCKED = "blocked"
    FINISHED = "finished"


@dataclass(eq=False)
class Task:
    """One controlled thread."""

    tid: int
    name: str
    role: str = ""
    """The pipeline member whose thread this is (``sender``...; module :mod:`.pipeline`):
    the one being built or called when it started, or its starter's; "" on one adapter."""
    baton: real.LockType | None = None
    """The thread carrier's: held by everyone but the task whose turn it is."""
    glet: Any = None
    """The greenlet carrier's: the greenlet the task runs on."""
    loop: Any = None
    """The greenlet carrier's: the asyncio loop running on this task when it last gave up
    the turn (asyncio keeps one per OS thread; :mod:`.carriers` swaps it)."""
    thread: threading.Thread | None = None
    state: TaskState = TaskState.RUNNABLE
    blocked_on: str = ""
    deadline: float | None = None
    wake_reason: str = ""
    joiners: list[Task] = field(default_factory=list)
    wants: Any = None
    """The lock this task is about to acquire, blocking (DPOR does not run it while another
    task holds that lock: the attempt would only block)."""
    released: Any = None
    """The lock this task released last, and the controller's step count then
    (``released_at``): :mod:`.strategies.sections` preempts between two sections of it."""
    released_at: int = -1
    waited: float | None = None
    """The timeout of this task's last timed block, when that block timed out
    (:func:`creeping_deadline`); ``points``: its switch points since that block ended."""
    points: int = 0
    creeping: int = 0
    main: bool = False
    """The scheduler's task (the one that runs the script)."""
    effect: bool = False
    """An adapter thread at a switch point just before a put, a get or a build
    (:meth:`.Controller.effect_point`; never the scheduler's task): :mod:`.strategies.effects`
    may hold the task there."""
    holding: list[Any] = field(default_factory=list)
    """The controlled locks this task owns now, oldest first (:mod:`.held`)."""
    race: bool = False
    """At a race point: about to touch, holding no lock, adapter state another task wrote
    under a lock (``Controller.access``); a gap a section strategy may preempt at."""
    across: dict[int, tuple[Any, str]] = field(default_factory=dict)
    """Locks this task has held across a whole build, put or get and not yet released,
    by ``id``: ``(lock, the call)`` (:mod:`.held`)."""

    def __repr__(self) -> str:
        return f"Task({self.tid}, {self.name!r}, {self.state.value})"


@dataclass(slots=True)
class Step:
    """One switch point as the trace shows it (one is made at every switch point: slotted,
    and not frozen, whose ``__init__`` costs three times as much; nobody changes one)."""

    index: int
    tid: int
    time: float
    label: str


@dataclass(frozen=True)
class Failure:
    """Why an execution failed. ``kind``: deadlock, livelock, crash, hang, uncontrolled,
    script, violation, diverged, factory (the factory raised: :class:`FactoryFailed`),
    too long (over the step budget while virtual time kept moving: :func:`too_long`).
    ``rules``: the contract rules a violation breaks, root first, as the oracle found them
    (empty for the other kinds, and for a message from a checker that returns plain
    strings)."""

    kind: str
    message: str
    rules: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    """The members (roles) of the hop whose records show a violation, sender first
    (``()``: the whole history, one hop or no topology)."""

    @property
    def finding(self) -> Finding:
        """This failure as every driver reports one: its rules (as the oracle found them),
        its kind, its message's first line, and the whole message as its evidence."""
        return Finding(self.rules, self.kind, first_line(self.message), self.message)


def signature(failure: Failure) -> str:
    """What must fail again for "the same failure": a violation's root rule, else its kind."""
    if failure.kind == "violation":
        return failure.rules[0] if failure.rules else failure.message.split(":", 1)[0]
    return failure.kind


def shown(failures: list[Failure]) -> Run:
    """*failures* as :mod:`chunk_adapter.confirm` compares them: each one's finding with its
    :func:`signature` alone, a violation's as its rule (its consequences are the root's
    to show), any other's as its kind."""
    return tuple(
        replace(f.finding, rules=(signature(f),) if f.kind == "violation" else ()) for f in failures
    )


def as_failure(found: str | Failure) -> Failure:
    """What a checker returned, as a failure: a :class:`Failure` as it is (the default
    checker's carry their rules), a plain message as a ``violation`` naming no rule."""
    return found if isinstance(found, Failure) else Failure("violation", found)


# -- the failures the controller diagnoses itself ----------------------------------


def task_failure(exc: BaseException, name: str, is_main: bool, now: float) -> Failure:
    """What an exception a task died of means: the explorer could not control the adapter
    (a real primitive where a controlled one was needed; the explorer's stand-in for a
    ``threading`` object lacking what the adapter called), the factory failed, or the
    script (``is_main``) or an adapter thread raised."""
    if isinstance(exc, ExplorerMisuse):
        return Failure("uncontrolled", f"in thread {name!r}: {exc}")
    if isinstance(exc, FactoryFailed):
        return Failure("factory", str(exc))
    holder = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    if holder is not None and type(holder).__module__.startswith("chunk_adapter.explore."):
        return Failure(
            "uncontrolled",
            f"in thread {name!r}: the explorer's stand-in {type(holder).__name__} for a "
            f"threading object has no {getattr(exc, 'name', '?')!r} ({exc}): not a verdict "
            "on the adapter; please report it to chunk-adapter",
        )
    what = "the scheduler script" if is_main else f"thread {name!r}"
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Failure(
        "script" if is_main else "crash", f"{what} raised {exc!r} at t={now:.4f}\n{detail}"
    )


def stuck(running: str, last: str, wall_timeout: float, ident: int | None = None) -> Failure:
    """Thread *running* did not come back within *wall_timeout* real seconds after *last*
    (*ident*: its OS thread, where the explorer looks for what it is blocked in)."""
    loop = _event_loop_wait(ident)
    if loop is not None:
        return Failure(
            "uncontrolled",
            f"thread {running!r} did not come back to the explorer within "
            f"{wall_timeout:.1f} s (real time) after '{last}': {loop}",
        )
    return Failure(
        "uncontrolled",
        f"thread {running!r} did not come back to the explorer within "
        f"{wall_timeout:.1f} s (real time) after '{last}': it blocks on something "
        "the explorer does not control (a real threading primitive made outside the "
        "execution, a socket, a C extension...). Route it through the runtime, or "
        "substitute its module (--substitute MODULE), or give the factory a runtime=.",
    )


def _event_loop_wait(ident: int | None) -> str | None:
    """What to say when thread *ident* waits in an event loop the explorer does not
    control (:mod:`.loops` controls asyncio's own loop, with the selector it makes)."""
    frame = real.thread_frames().get(ident) if ident is not None else None
    modules: list[str] = []
    while frame is not None and len(modules) < 200:
        modules.append(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    if any(m == "uvloop" or m.startswith("uvloop.") for m in modules):
        return (
            "it waits in an asyncio event loop written in C (uvloop), which the explorer "
            "does not control. Under verify, let the adapter run on asyncio's own loop "
            "(no uvloop policy, asyncio.new_event_loop()): that loop is controlled."
        )
    if "selectors" in modules and any(m.startswith("asyncio.") for m in modules):
        return (
            "it waits in an asyncio event loop whose selector is a real one (the loop was "
            "made before the adapter was built, or given a selector of its own), which "
            "the explorer does not control. Make the loop in the adapter, after it is "
            "built, with asyncio.new_event_loop(): that loop is controlled."
        )
    return None


CRAWL_STEPS = 1_000
"""Switch points that, with virtual time standing still, must come within ``wall_timeout``
real seconds: fewer, and the process using under :data:`CRAWL_CPU` of that time on the
CPU, and a task is waiting in real time between them (``select``, a socket), which the
explorer does not control (:func:`crawling`). Slow real work between switch points (a
heavy ``build_payload``) keeps the CPU busy and is left to run."""
CRAWL_CPU = 0.05


_REAL_WAIT = (
    "on something the explorer does not control (select() on a pipe or socket, a real "
    "sleep, a C extension...). Route that wait through the runtime (an Event or Condition "
    "with a timeout), or substitute its module (--substitute MODULE)."
)
"""How :func:`crawling` and :func:`waits_in_real_time` end: what such a wait is, the fix."""


class Crawl:
    """Watches for a crawl: virtual time standing still, few switch points, an idle CPU."""

    def __init__(self, steps: int, now: float) -> None:
        self._reset(steps, now)

    def _reset(self, steps: int, now: float) -> None:
        self.steps, self.now = steps, now
        self.since, self.cpu = real.monotonic(), real.process_time()

    def check(
        self, steps: int, now: float, running: str, wall_timeout: float, handoff: float
    ) -> Failure | None:
        """The failure once *wall_timeout* real seconds crawled by (see :data:`CRAWL_STEPS`)
        while tasks still came back (the last at *handoff*): one that stopped coming back
        is :func:`stuck` instead."""
        clock = real.monotonic()
        waited = clock - self.since
        coming_back = clock - handoff < wall_timeout / 2
        if now != self.now or steps - self.steps >= CRAWL_STEPS:
            self._reset(steps, now)
        elif steps > self.steps and waited >= wall_timeout and coming_back:
            if real.process_time() - self.cpu < CRAWL_CPU * waited:  # waiting, not working
                return crawling(running, steps - self.steps, waited)
            self._reset(steps, now)
        return None


CREEP_TIMES = 3
"""Timed blocks in a row, each asking for almost as long as the one that just timed out,
that :func:`creeping_deadline` takes for a deadline on a clock that is not virtual time."""


def creeping_deadline(task: Task, timeout: float) -> Failure | None:
    """*task* is about to block for *timeout* s. ``uncontrolled`` when, for the
    :data:`CREEP_TIMES`-th time in a row, its last timed block timed out (virtual time
    moved by all of it) and it asks, with no other switch point in between, for almost as
    long again (less by under a tenth of what passed): a "wait until a deadline" loop
    whose clock did not move with virtual time. With the explorer's clock the second
    wait would ask for nothing; a constant idle wait asks for exactly as long."""
    last = task.waited
    if last is not None and task.points <= 1 and 0 < timeout < last and last - timeout < last / 10:
        task.creeping += 1
    else:
        task.creeping = 0
    if task.creeping < CREEP_TIMES:
        return None
    return Failure(
        "uncontrolled",
        f"thread {task.name!r} waits in a loop for a deadline the explorer's clock does not "
        f"reach: {CREEP_TIMES} timed waits in a row ran out (virtual time moved by each), "
        f"and each time it asked for almost as long again (last {last:.6f} s, now "
        f"{timeout:.6f} s). It computes the deadline from a clock the explorer does not "
        "control — datetime.now(), time.clock_gettime(), or a clock bound before exploring "
        "(a default argument clock=time.monotonic, an attribute holding it) — so real "
        "time stands still while virtual time runs away, and any liveness verdict would be "
        "wrong. Not a verdict on the adapter. Read time.monotonic() (or time.time()) when "
        "the deadline is computed, or take runtime= and use runtime.monotonic()",
    )


def crawling(running: str, steps: int, wall_timeout: float) -> Failure:
    """Only *steps* switch points in *wall_timeout* real seconds, virtual time standing still."""
    return Failure(
        "uncontrolled",
        f"only {steps} switch points in {wall_timeout:.1f} s of real time while virtual time "
        f"stood still (thread {running!r} was running): a thread waits in real time between "
        f"the explorer's switch points, {_REAL_WAIT}",
    )


def foreign(seen: list[str]) -> Failure:
    """Threads the explorer does not run did the adapter's work (*seen*: what each did)."""
    return Failure(
        "uncontrolled",
        "threads the explorer does not run did the adapter's work during the execution: "
        + "; ".join(seen)
        + ". They were started where the explorer could not see it (a C extension, a module "
        "it did not patch, a thread made before the execution). Name that module with "
        "--substitute MODULE (substitute=[...]), or give the factory a runtime= keyword.",
    )


def idle_worker(task: Task) -> bool:
    """Whether *task* is a ``ThreadPoolExecutor`` worker waiting for work (the pool an
    asyncio loop's ``run_in_executor`` starts, left to the interpreter's exit): idle, not
    hung; the interpreter's exit hands it the sentinel that ends it."""
    target = getattr(task.thread, "_target", None) if task.thread is not None else None
    return target is _cf_worker and task.blocked_on.startswith("get SimpleQueue")


def blocked_forever(blocked: list[Task], main_done: bool, now: float) -> Failure:
    """No task can run and none has a timeout: a hang after stop(), a deadlock before."""
    waits = "; ".join(f"{t.name!r} in {t.blocked_on}" for t in blocked)
    if main_done:
        return Failure(
            "hang",
            f"after the scheduler thread finished (stop() returned), these threads "
            f"are blocked forever with nothing left to wake them: {waits}. A wait with "
            "no timeout whose notify came before it (a lost wake-up).",
        )
    return Failure("deadlock", f"no thread can run and none has a timeout (t={now:.4f}): {waits}")


def livelock(max_steps: int, now: float) -> Failure:
    """More than *max_steps* switch points in one execution."""
    return Failure(
        "livelock",
        f"more than {max_steps} switch points in one execution "
        f"(virtual t={now:.3f} s): a thread keeps running without the "
        "execution ending (a busy loop, or a thread that does not exit after "
        "stop()). Raise max_steps if the scenario is just long.",
    )


class StepClock:
    """The virtual time every ``max_steps // 50`` switch points, the last few of them.

    Over ``max_steps``, :meth:`over_budget` tells a livelock — virtual time stood (nearly)
    still over the last fifth of the budget, or a thread ran on after the script ended —
    from a long execution (:func:`too_long`, no verdict). Time moves only when no task
    can run, so a thread that never blocks keeps it still; an adapter that sleeps ~1 ms
    per idle round (R17) moves it by :data:`BUSY_PER_STEP` per switch point or more.
    And a loop whose threads spend a median of :data:`REAL_WAIT` or more of *real* time
    between switch points is not spinning but waiting on something the explorer does not
    see (``select()`` with a short timeout): uncontrolled, no verdict.
    """

    MARKS = 11
    BUSY_PER_STEP = 1e-6
    REAL_WAIT = 0.001
    GAPS = 1_000  # the last switch points whose real-time gaps are kept

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.every = max(1, max_steps // 50)
        self.marks: deque[float] = deque(maxlen=self.MARKS)
        self.real: deque[float] = deque(maxlen=self.GAPS + 1)
        self.real_from = max_steps - self.GAPS  # only the last switch points are timed

    def tick(self, steps: int, now: float) -> None:
        if steps >= self.real_from:
            self.real.append(real.monotonic())
        if steps % self.every == 0:
            self.marks.append(now)

    def over_budget(self, now: float, main_done: bool) -> Failure:
        window = self.every * (len(self.marks) - 1)
        moved = now - self.marks[0] if len(self.marks) == self.MARKS else 0.0
        if not main_done and moved >= self.BUSY_PER_STEP * window:
            return too_long(self.max_steps, now, moved, window)
        stamps = list(self.real)
        gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
        if gaps and gaps[len(gaps) // 2] >= self.REAL_WAIT:
            return waits_in_real_time(self.max_steps, gaps[len(gaps) // 2])
        return livelock(self.max_steps, now)


def waits_in_real_time(max_steps: int, median: float) -> Failure:
    """Over *max_steps*, virtual time still, but real time passing between switch points."""
    return Failure(
        "uncontrolled",
        f"more than {max_steps} switch points with virtual time standing still, but the "
        f"running threads spent a median {median * 1000:.1f} ms of real time between two "
        f"of them: not a busy loop, a wait {_REAL_WAIT}",
    )


def too_long(max_steps: int, now: float, moved: float, window: int) -> Failure:
    """More than *max_steps* switch points while virtual time kept moving: not a verdict."""
    return Failure(
        "too long",
        f"more than {max_steps} switch points in one execution (virtual t={now:.3f} s), "
        f"but virtual time kept moving ({moved * 1000:.0f} ms over the last {window} "
        "switch points): the adapter sleeps and polls at its own pace, and this scenario "
        "took longer than the explorer's step budget, so nothing is decided. Raise "
        "max_steps (explore(..., max_steps=...)) to run it to its end.",
    )


def caller() -> str:
    """``module.function`` of the innermost frame outside the explorer (who called in)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", "?"))
        if not module.startswith("chunk_adapter.explore"):
            return f"{module}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "code outside any module"
