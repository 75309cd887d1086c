"""The controller: real threads, one at a time, handed a baton by a strategy.

Every task (the scheduler-thread script and each thread the adapter starts) is
a real :class:`threading.Thread`, but it runs only while it holds its *baton*
(a :class:`threading.Lock` used as a binary semaphore). At every switch point
the running task asks the strategy which task runs next and, if that is
another task, releases that task's baton and waits for its own. So exactly one
task runs at any moment, and the order of everything the tasks do is a pure
function of the strategy's choices.

Time is virtual: :attr:`Controller.now` moves only when no task can run, and
then jumps to the earliest deadline of a blocked task. No task runnable and no
deadline is a deadlock; more than ``max_steps`` switch points is reported as a
livelock.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

__all__ = [
    "Aborted",
    "Controller",
    "ExplorerMisuse",
    "Failure",
    "Scheduler",
    "Step",
    "Task",
    "TaskState",
]


class Aborted(BaseException):
    """Raised inside a task to unwind it when its execution is abandoned.

    A ``BaseException`` so that an adapter's ``except Exception`` cannot swallow it.
    """


class ExplorerMisuse(RuntimeError):
    """The explorer was used in a way it cannot support (the message says how to fix it)."""


class Scheduler(Protocol):
    """What a strategy offers the controller (one module per strategy implements it)."""

    def start_execution(self) -> bool:
        """Prepare the next execution; ``False`` when there is none left to run."""

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        """Pick the task to run next from *runnable* (sorted ids; *current* if still runnable)."""

    def next_u64(self) -> int:
        """A random number for the code under test (recorded, so replay reproduces it)."""


class TaskState(Enum):
    RUNNABLE = "runnable"
    BLOCKED = "blocked"
    FINISHED = "finished"


@dataclass(eq=False)
class Task:
    """One controlled thread."""

    tid: int
    name: str
    baton: threading.Lock
    thread: threading.Thread | None = None
    state: TaskState = TaskState.RUNNABLE
    blocked_on: str = ""
    deadline: float | None = None
    wake_reason: str = ""
    joiners: list[Task] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Task({self.tid}, {self.name!r}, {self.state.value})"


@dataclass(frozen=True)
class Step:
    """One switch point as the trace shows it."""

    index: int
    tid: int
    time: float
    label: str


@dataclass(frozen=True)
class Failure:
    """Why an execution failed. ``kind``: deadlock, livelock, crash, hang, uncontrolled,
    script, violation, diverged."""

    kind: str
    message: str


class Controller:
    """Runs one execution: tasks, baton passing, the virtual clock, failure detection."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        max_steps: int = 50_000,
        wall_timeout: float = 20.0,
        every_step: bool = False,
    ) -> None:
        self.scheduler = scheduler
        self.max_steps = max_steps
        self.wall_timeout = wall_timeout
        # every_step: ask the scheduler even when only one task can run (PCT
        # counts steps); otherwise only real choices reach it.
        self.every_step = every_step
        self.now = 0.0
        self.steps = 0
        self.tasks: list[Task] = []
        self.current: Task | None = None
        self.trace: list[Step] = []
        self.decisions: list[tuple[str, int]] = []  # ("t", tid) or ("r", random value)
        self.failures: list[Failure] = []
        self.progress = 0  # bumped by the wrappers on puts, values got and builds
        self.main_done = False
        self._by_ident: dict[int, Task] = {}
        self._aborting = False
        # _done: set (once) when the execution is over: every task finished, or
        # a failure stopped it. The driver thread waits on it; the task that
        # ends the execution sets it.
        self._done = threading.Event()

    # -- the driver side -------------------------------------------------

    def run(self, main: Callable[[], None]) -> None:
        """Run *main* as the scheduler-thread task and everything it starts, to the end."""
        task = self.spawn(main, "scheduler", is_main=True)
        self.current = task
        task.baton.release()
        if not self._done.wait(self.wall_timeout):
            running = self.current.name if self.current else "?"
            last = self.trace[-1].label if self.trace else "its start"
            self.failures.append(
                Failure(
                    "uncontrolled",
                    f"thread {running!r} did not come back to the explorer within "
                    f"{self.wall_timeout} s after '{last}': it blocks on something the "
                    "explorer does not control (a real threading primitive, time.sleep, "
                    "a socket...). Route it through the runtime, or substitute its module.",
                )
            )
        self._abort_all()

    def _abort_all(self) -> None:
        self._aborting = True
        for task in self.tasks:
            if task.state is TaskState.FINISHED or task.thread is None:
                continue
            if task is self.current and not self._done.is_set():
                continue  # still running uncontrolled code; cannot be stopped
            task.baton.release()
            task.thread.join(self.wall_timeout)

    # -- tasks ------------------------------------------------------------

    def spawn(self, target: Callable[[], None], name: str, *, is_main: bool = False) -> Task:
        baton = threading.Lock()
        baton.acquire()
        task = Task(len(self.tasks), name, baton)
        self.tasks.append(task)
        thread = threading.Thread(
            target=self._body, args=(task, target, is_main), name=name, daemon=True
        )
        task.thread = thread
        thread.start()
        return task

    def _body(self, task: Task, target: Callable[[], None], is_main: bool) -> None:
        ident = threading.get_ident()
        self._by_ident[ident] = task
        task.baton.acquire()
        try:
            if not self._aborting:
                target()
        except Aborted:
            task.state = TaskState.FINISHED
            return
        except BaseException as exc:
            kind = "script" if is_main else "crash"
            what = "the scheduler script" if is_main else f"thread {task.name!r}"
            detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.failures.append(
                Failure(kind, f"{what} raised {exc!r} at t={self.now:.4f}\n{detail}")
            )
        finally:
            self._by_ident.pop(ident, None)
        if is_main:
            self.main_done = True
        task.state = TaskState.FINISHED
        for joiner in task.joiners:
            self.wake(joiner, "joined")
        task.joiners.clear()
        if not self._aborting:
            self._reschedule(task)

    def me(self) -> Task:
        task = self._by_ident.get(threading.get_ident())
        if task is None:
            raise ExplorerMisuse(
                f"a controlled primitive was used from thread "
                f"{threading.current_thread().name!r}, which the explorer does not run; "
                "use the primitives only from the scenario and the threads the adapter "
                "starts through its runtime"
            )
        return task

    # -- switch points ----------------------------------------------------

    def switch_point(self, label: str) -> None:
        """The running task is about to do *label*; the strategy may run another task first."""
        task = self.me()
        if self._aborting:
            raise Aborted
        self.trace.append(Step(len(self.trace), task.tid, self.now, label))
        self._reschedule(task)

    def block(self, label: str, deadline: float | None) -> str:
        """Block the running task until :meth:`wake` (or *deadline*); return the wake reason."""
        task = self.me()
        if self._aborting:
            raise Aborted
        task.state = TaskState.BLOCKED
        task.blocked_on = label
        task.deadline = deadline
        task.wake_reason = ""
        self._reschedule(task)
        return task.wake_reason

    def wake(self, task: Task, reason: str) -> None:
        if task.state is TaskState.BLOCKED:
            task.state = TaskState.RUNNABLE
            task.deadline = None
            task.wake_reason = reason

    def note(self, label: str) -> None:
        """Add a line to the trace without a switch point (script calls and their results)."""
        task = self.me()
        self.trace.append(Step(len(self.trace), task.tid, self.now, label))

    def random_u64(self) -> int:
        value = self.scheduler.next_u64()
        self.decisions.append(("r", value))
        return value

    # -- the scheduling core (runs on the thread that gives up the baton) --

    def _reschedule(self, me: Task) -> None:
        nxt = self._pick(me)
        if nxt is me:
            return
        if nxt is not None:
            self.current = nxt
            nxt.baton.release()
        if me.state is TaskState.FINISHED:
            return
        me.baton.acquire()
        if self._aborting:
            raise Aborted

    def _pick(self, me: Task) -> Task | None:
        runnable = [t for t in self.tasks if t.state is TaskState.RUNNABLE]
        while not runnable:
            blocked = [t for t in self.tasks if t.state is TaskState.BLOCKED]
            if not blocked:
                self._done.set()  # every task finished: the execution is over
                return None
            timed = [t for t in blocked if t.deadline is not None]
            if not timed:
                self._fail_blocked(blocked)
                return None
            # Timeouts fire one at a time: the earliest deadline (then the lowest
            # id) wakes alone and runs until it blocks before the next one fires.
            first = min(timed, key=lambda t: (t.deadline, t.tid))
            assert first.deadline is not None
            self.now = max(self.now, first.deadline)
            self.wake(first, "timeout")
            runnable = [first]
        self.steps += 1
        if self.steps > self.max_steps:
            self._fail(
                "livelock",
                f"more than {self.max_steps} switch points in one execution "
                f"(virtual t={self.now:.3f} s): a thread keeps running without the "
                "execution ending (a busy loop, or a thread that does not exit after "
                "stop()). Raise max_steps if the scenario is just long.",
            )
            return None
        if len(runnable) == 1 and not self.every_step:
            return runnable[0]
        current = me.tid if me.state is TaskState.RUNNABLE else None
        try:
            tid = self.scheduler.next_task([t.tid for t in runnable], current)
        except AssertionError as exc:  # ScheduleDiverged: must not reach the adapter's code
            self._fail("diverged", str(exc))
            return None
        if len(runnable) > 1:
            self.decisions.append(("t", tid))
        chosen = self.tasks[tid] if 0 <= tid < len(self.tasks) else None
        if chosen is None or chosen.state is not TaskState.RUNNABLE:
            self._fail("diverged", f"the schedule chose task {tid}, which cannot run now")
            return None
        return chosen

    def _fail_blocked(self, blocked: list[Task]) -> None:
        waits = "; ".join(f"{t.name!r} in {t.blocked_on}" for t in blocked)
        if self.main_done:
            self._fail(
                "hang",
                f"after the scheduler thread finished (stop() returned), these threads "
                f"are blocked forever with nothing left to wake them: {waits}. A wait with "
                "no timeout whose notify came before it (a lost wake-up).",
            )
        else:
            self._fail(
                "deadlock",
                f"no thread can run and none has a timeout (t={self.now:.4f}): {waits}",
            )

    def _fail(self, kind: str, message: str) -> None:
        self.failures.append(Failure(kind, message))
        self._done.set()
