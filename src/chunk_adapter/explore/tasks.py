"""What the controller deals in: tasks, steps, failures, and the scheduler it asks.

Kept apart from :mod:`.controller` so the primitives and strategies can name
these types without the scheduling core.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from . import real

__all__ = [
    "Aborted",
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


class FactoryFailed(Exception):
    """The factory raised while an execution built its adapters. Not a verdict on the
    adapter's behaviour (no contract call was made yet): the stage says so, inconclusive."""


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
    baton: real.LockType
    thread: threading.Thread | None = None
    state: TaskState = TaskState.RUNNABLE
    blocked_on: str = ""
    deadline: float | None = None
    wake_reason: str = ""
    joiners: list[Task] = field(default_factory=list)
    wants: Any = None
    """The lock this task is about to acquire, blocking (DPOR does not run it while another
    task holds that lock: the attempt would only block)."""

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
    script, violation, diverged, factory (the factory raised: :class:`FactoryFailed`)."""

    kind: str
    message: str
