"""Controlled Lock, Condition, Event, threads and clock: the explorer's runtime.

:class:`ControlledRuntime` satisfies :class:`chunk_adapter.runtime.Runtime`, so
an adapter that takes ``runtime=`` runs on it unchanged. Every operation that
another thread can observe or that can block (acquire, wait, notify, set,
is_set, join, sleep, thread start) is a switch point: the strategy may run
another thread just before it. A release is not a switch point of its own; the
releasing thread's next operation is.

Blocking is modelled, never real: a thread that waits for a lock held by
another, a condition, an event or a join is *blocked* (not runnable) until the
operation that releases it, or until the virtual clock reaches its timeout.

Over 400 lines, and one module because Lock, RLock, Condition and Event share the
blocking and waking protocol with the controller (who waits, who is woken, the takers
noted for held locks); kept together they are checked against each other.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from .controller import Controller
from .tasks import ExplorerMisuse, Task, TaskState

__all__ = [
    "ControlledCondition",
    "ControlledEvent",
    "ControlledLock",
    "ControlledRLock",
    "ControlledRuntime",
    "ControlledThread",
    "HeldThrough",
]


_SHOWN: dict[float, str] = {}
"""The text of the positive float timeouts labels showed so far (:func:`_shown`)."""
_SHOWN_MAX = 4096


def _shown(value: float | None) -> str:
    """``f"{value}"``, as a label shows a timeout. A float's text (its ``repr``) costs as
    much as the rest of a step, and the same few timeouts come back at nearly every step
    (an idle backoff, a wait timeout): positive floats are remembered (equal ones have the
    same text; not 0.0 and -0.0, nor NaN). Shared by concurrent executions: a dict's get
    and set are atomic, and a full one is emptied."""
    if type(value) is float and value > 0:
        text = _SHOWN.get(value)
        if text is None:
            if len(_SHOWN) >= _SHOWN_MAX:
                _SHOWN.clear()
            text = _SHOWN[value] = f"{value}"
        return text
    return f"{value}"


def _deadline(ctl: Controller, timeout: float | None) -> float | None:
    if timeout is None or timeout < 0:
        return None
    return ctl.now + timeout


class HeldThrough:
    """``with HeldThrough(ctl, "put k"):`` around a slow call (a build, a put, a get):
    the locks the running task held when the call began and still holds when it ends
    were held across it (``Task.across``; a call of the adapter's, so they are its own)."""

    __slots__ = ("held", "me", "what")

    def __init__(self, ctl: Controller, what: str) -> None:
        self.me = ctl.task_here()
        self.held: tuple[ControlledLock, ...] = tuple(self.me.holding) if self.me else ()
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        for lock in self.held:
            if lock.owner is self.me:
                self.me.across.setdefault(id(lock), (lock, self.what))  # type: ignore[union-attr]


def _let_go(ctl: Controller, owner: Task, lock: ControlledLock) -> None:
    """*lock* is no longer *owner*'s: a call it was held across is noted if *owner* let
    it go itself (a mutex; a lock released by another task was a signal)."""
    if lock in owner.holding:
        owner.holding.remove(lock)
    held = owner.across.pop(id(lock), None)
    if held is not None and ctl.task_here() is owner:
        ctl.held_across.append((owner, lock, held[1]))


class ControlledLock:
    """A non-reentrant lock whose waiters are blocked tasks, not blocked threads."""

    def __init__(self, ctl: Controller, name: str) -> None:
        self._ctl = ctl
        self.name = name
        self.key = ("lock", ctl.new_serial())  # what DPOR's footprints call it
        self.owner: Task | None = None
        self._waiters: list[Task] = []
        # Who asked for it, willing to wait: (tid, the scheduler's op then, "" for a
        # thread of the adapter's). Read after the execution (.held).
        self.takers: set[tuple[int, str]] = set()
        # quiet: taken without a switch point when free (a lock inside the standard
        # library's futures and event loops, made by .control.patches: their waits and
        # notifies stay switch points, their every acquire would only multiply the steps)
        self.quiet = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ctl = self._ctl
        me = ctl.me()
        if self.quiet and self.owner is None and not ctl.tracking:
            self._take(me)
            return True
        if blocking and timeout != 0:
            me.wants = self
            self.takers.add((me.tid, ctl.calling if me.main else ""))
        ctl.switch_point_of(me, f"acquire {self.name}")
        me.wants = None
        if ctl.tracking:
            ctl.touch(self.key, "w")
        if self.owner is None:  # free: taken at once (the loop below would not run)
            self._take(me)
            return True
        deadline = _deadline(ctl, timeout) if blocking else None
        while self.owner is not None:
            if self.owner is me and not self._reentrant():
                ctl.note(f"DEADLOCK: {self.name} acquired again by its owner")
            if not blocking or (deadline is not None and ctl.now >= deadline):
                return False
            self._waiters.append(me)
            ctl.block(f"acquire {self.name} (held by {self.owner.name!r})", deadline)
            ctl.touch(self.key, "w")
            if me in self._waiters:
                self._waiters.remove(me)
        self._take(me)
        return True

    def _reentrant(self) -> bool:
        return False

    def _take(self, me: Task) -> None:
        self.owner = me
        me.holding.append(self)

    def release(self) -> None:
        if self.owner is None:
            if self._ctl._aborting:
                return
            raise RuntimeError(f"release of unlocked lock {self.name}")
        self._release_fully()

    def _release_fully(self) -> None:
        ctl = self._ctl
        if ctl.tracking:
            ctl.touch(self.key, "w")
        owner = self.owner
        if owner is not None:  # for the section gap (strategies.sections): when and what
            owner.released, owner.released_at = self, ctl.steps
            _let_go(ctl, owner, self)
        self.owner = None
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for task in waiters:
                ctl.wake(task, "lock released")

    def locked(self) -> bool:
        self._ctl.touch(self.key, "r")
        return self.owner is not None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        owner = self.owner.name if self.owner else None
        return f"<{self.name} owner={owner!r}>"


class ControlledRLock(ControlledLock):
    """A reentrant lock (for substituted modules that use ``threading.RLock``)."""

    def __init__(self, ctl: Controller, name: str) -> None:
        super().__init__(ctl, name)
        self.count = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = self._ctl.me()
        if self.owner is me:
            self._ctl.touch(self.key, "w")
            self.count += 1
            return True
        return super().acquire(blocking, timeout)

    def _reentrant(self) -> bool:
        return True

    def _take(self, me: Task) -> None:
        super()._take(me)
        self.count = 1

    def release(self) -> None:
        if self.owner is None or (self.owner is not self._ctl.me() and not self._ctl._aborting):
            if self._ctl._aborting:
                return
            raise RuntimeError(f"cannot release un-acquired lock {self.name}")
        self.count -= 1
        if self.count <= 0:
            self.count = 0
            self._release_fully()


class ControlledCondition:
    """A condition variable over a controlled lock; ``wait`` honours virtual timeouts."""

    def __init__(self, ctl: Controller, lock: ControlledLock, name: str) -> None:
        if not isinstance(lock, ControlledLock):
            ctl.note_foreign(f"a Condition was made over a real lock ({lock!r})")
            raise ExplorerMisuse(
                f"Condition({lock!r}): under the explorer a condition needs a lock from the "
                "same runtime (runtime.Lock()), not a real threading lock (one made before "
                "exploring: a default argument lock_factory=threading.Lock, a module-level "
                "lock)"
            )
        self._ctl = ctl
        self.lock = lock
        self.name = name
        self.key = ("cond", ctl.new_serial())
        self._waiters: list[Task] = []

    def __enter__(self) -> bool:
        return self.lock.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.lock.release()

    # threading.Condition's whole public API: concurrent.futures.wait() takes each
    # future's condition with acquire()/release(); notifyAll is the old name.
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()

    def _check_owner(self, me: Task, what: str) -> None:
        """*me* (the running task) must hold the lock."""
        if self.lock.owner is not me:
            raise RuntimeError(f"cannot {what} on un-acquired lock ({self.name})")

    def wait(self, timeout: float | None = None) -> bool:
        ctl = self._ctl
        me = ctl.me()
        ctl.switch_point_of(me, f"wait {self.name} timeout={_shown(timeout)}")
        if ctl.tracking:
            ctl.touch(self.key, "w")
        self._check_owner(me, "wait")
        if timeout is not None and timeout <= 0:
            return False  # a zero wait: nobody can notify in between (the switch point was it)
        count = getattr(self.lock, "count", 1)
        self.lock._release_fully()
        self._waiters.append(me)
        until = " (no timeout)" if timeout is None else f" {_shown(timeout)}s"
        label = f"wait {self.name}{until}"
        reason = ctl.block(label, _deadline(ctl, timeout))
        if me in self._waiters:
            self._waiters.remove(me)
        # Re-acquire without a switch point of its own: the wake-up was the choice.
        if ctl.tracking:
            ctl.touch(self.key, "w")
            ctl.touch(self.lock.key, "w")
        while self.lock.owner is not None:
            self.lock._waiters.append(me)
            ctl.block(f"re-acquire {self.lock.name} after {self.name}", None)
            ctl.touch(self.lock.key, "w")
            if me in self.lock._waiters:
                self.lock._waiters.remove(me)
        self.lock._take(me)
        if isinstance(self.lock, ControlledRLock):
            self.lock.count = count
        return reason == "notified"

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        deadline = _deadline(self._ctl, timeout)
        result = predicate()
        while not result:
            if deadline is not None:
                remaining = deadline - self._ctl.now
                if remaining <= 0:
                    break
                self.wait(remaining)
            else:
                self.wait()
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        ctl = self._ctl
        me = ctl.me()
        if not self.lock.quiet or ctl.tracking:  # quiet: no switch point (but for DPOR)
            ctl.switch_point_of(me, f"notify {self.name}")
        if ctl.tracking:
            ctl.touch(self.key, "w")
        self._check_owner(me, "notify")
        woken, self._waiters = self._waiters[:n], self._waiters[n:]
        for task in woken:
            self._ctl.wake(task, "notified")

    def notify_all(self) -> None:
        self.notify(len(self._waiters))

    notifyAll = notify_all

    def __repr__(self) -> str:
        return f"<{self.name} waiters={[t.name for t in self._waiters]}>"


class ControlledEvent:
    """``set`` / ``is_set`` / ``wait(timeout)`` with modelled blocking."""

    def __init__(self, ctl: Controller, name: str) -> None:
        self._ctl = ctl
        self.name = name
        self.key = ("event", ctl.new_serial())
        self._flag = False
        self._waiters: list[Task] = []

    def set(self) -> None:
        self._ctl.switch_point(f"set {self.name}")
        self._ctl.touch(self.key, "w")
        self._flag = True
        waiters, self._waiters = self._waiters, []
        for task in waiters:
            self._ctl.wake(task, "notified")

    def clear(self) -> None:
        self._ctl.switch_point(f"clear {self.name}")
        self._ctl.touch(self.key, "w")
        self._flag = False

    def is_set(self) -> bool:
        ctl = self._ctl
        ctl.switch_point(f"is_set {self.name}")
        if ctl.tracking:
            ctl.touch(self.key, "r")
        return self._flag

    isSet = is_set  # threading.Event's old name

    def wait(self, timeout: float | None = None) -> bool:
        ctl = self._ctl
        me = ctl.me()
        ctl.switch_point_of(me, f"wait {self.name} timeout={_shown(timeout)}")
        if ctl.tracking:
            ctl.touch(self.key, "r")
        if self._flag or (timeout is not None and timeout <= 0):
            return self._flag
        self._waiters.append(me)
        ctl.block(f"wait {self.name}", _deadline(ctl, timeout))
        if ctl.tracking:
            ctl.touch(self.key, "r")
        if me in self._waiters:
            self._waiters.remove(me)
        return self._flag

    def __repr__(self) -> str:
        return f"<{self.name} set={self._flag}>"


class ControlledThread:
    """The handle ``start_thread`` returns: ``name``, ``join(timeout)``, ``is_alive()``."""

    def __init__(self, ctl: Controller, task: Task) -> None:
        self._ctl = ctl
        self._task = task

    @property
    def name(self) -> str:
        return self._task.name

    @property
    def ident(self) -> int | None:
        return self._task.thread.ident if self._task.thread is not None else None

    def join(self, timeout: float | None = None) -> None:
        ctl = self._ctl
        ctl.switch_point(f"join {self.name!r} timeout={timeout}")
        # No footprint here: a join just before the thread's exit blocks and is woken
        # by it, one just after returns at once, at the same virtual time — the same
        # state, so DPOR need not run both. What follows a wake-up reads the task.
        deadline = _deadline(ctl, timeout)
        me = ctl.me()
        while self._task.state is not TaskState.FINISHED:
            if deadline is not None and ctl.now >= deadline:
                return
            self._task.joiners.append(me)
            ctl.block(f"join {self.name!r}", deadline)
            ctl.touch(("task", self._task.tid), "r")
            if me in self._task.joiners:
                self._task.joiners.remove(me)

    def is_alive(self) -> bool:
        self._ctl.switch_point(f"is_alive {self.name!r}")
        self._ctl.touch(("task", self._task.tid), "r")
        return self._task.state is not TaskState.FINISHED

    def __repr__(self) -> str:
        return f"<ControlledThread {self.name!r} {self._task.state.value}>"


class ControlledRuntime:
    """The runtime the explorer hands to the adapter (see :mod:`chunk_adapter.runtime`)."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self._count = 0

    def _name(self, kind: str) -> str:
        self._count += 1
        return f"{kind}#{self._count}"

    def Lock(self) -> ControlledLock:
        return ControlledLock(self.ctl, self._name("Lock"))

    def RLock(self) -> ControlledRLock:
        return ControlledRLock(self.ctl, self._name("RLock"))

    def Condition(self, lock: ControlledLock | None = None) -> ControlledCondition:
        if lock is None:
            lock = self.RLock()
        # getattr: a real lock (a default argument bound at import) has no name, and the
        # condition must get to say so (ExplorerMisuse) rather than fail here.
        name = getattr(lock, "name", type(lock).__name__)
        return ControlledCondition(self.ctl, lock, f"{self._name('Cond')}({name})")

    def Event(self) -> ControlledEvent:
        return ControlledEvent(self.ctl, self._name("Event"))

    def start_thread(self, target: Callable[[], None], name: str) -> ControlledThread:
        task = self.ctl.spawn(target, name)
        self.ctl.switch_point(f"started {task.role + ':' if task.role else ''}{name!r}")
        return ControlledThread(self.ctl, task)

    def monotonic(self) -> float:
        return self.ctl.now

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds, own=False)

    def harness_sleep(self, seconds: float) -> None:
        """:meth:`sleep` for the suite's own waits on a task (a call's latency or slowness,
        the scheduler's pause), not the code under test's: never taken for a wait loop on
        a clock the explorer does not control (random latencies can shrink three times in
        a row)."""
        self._sleep(seconds, own=True)

    def _sleep(self, seconds: float, *, own: bool) -> None:
        ctl = self.ctl
        if seconds <= 0:
            ctl.switch_point("sleep(0)")
            return
        # No separate switch point: nothing moves the clock while anyone can run,
        # so running another thread just before the sleep starts changes nothing.
        label = f"sleep {_shown(seconds)}"
        ctl.note(label)
        ctl.block(label, ctl.now + seconds, own=own)

    def __repr__(self) -> str:
        return "ControlledRuntime()"
