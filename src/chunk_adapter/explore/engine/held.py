"""Locks held across slow work: R3 and R7 read from which lock each task held when.

The runtime notes, for every controlled lock, who asked for it willing to wait
(``ControlledLock.takers``: the scheduler, and in which of its calls, or a
thread of an adapter), and every time a task held one across a whole build,
put or get and then released it itself (``Controller.held_across``; a lock
released by another task was a signal, not a mutex, and is left out). A call
may take any time (a slow build, a put in an outage), so whoever else waits
for that lock may wait for it:

* the scheduler, in ``save_async`` ... ``cleanup_receiver`` (or a relay):
  **R3**, a scheduler call never waits on the connector or a build;
* another thread, for a lock held across ``build_payload``: **R7**, a build
  runs outside every lock (the adapter's own, or one shared by adapters);
* another adapter's thread, for a lock held across a put or a get: **R17**,
  no request waits behind another (adapters share nothing but the process).

A structural property, judged on every execution whatever its interleaving:
the wait itself need not have happened, only the sharing (a lock the other
side only tries without waiting is not counted). What is left undecided: a
lock held across a put or get that only the adapter's other background thread
takes (an adapter may serialise its connector calls), and one still held when
the execution ended.
"""

from __future__ import annotations

from ...rules import R3, R7, R17
from ..runtime.controller import Controller
from ..runtime.tasks import Failure, Task
from .timing import SCHEDULER_CALLS

__all__ = ["lock_failures"]


def _who(task: Task) -> str:
    return f"{task.role}:{task.name}" if task.role else task.name


def lock_failures(ctl: Controller) -> list[Failure]:
    """The R3 / R7 / R17 failures :data:`Controller.held_across` shows (module doc);
    one per lock, the first call it was held across."""
    found: list[Failure] = []
    judged: set[int] = set()
    for holder, lock, call in ctl.held_across:
        if id(lock) in judged:
            continue
        others = [(ctl.tasks[tid], op) for tid, op in sorted(lock.takers) if tid != holder.tid]
        build = call.startswith("build_payload")
        failure = None
        for task, op in others:
            if task.main and op in SCHEDULER_CALLS:
                failure = Failure(
                    "violation",
                    f"R3: {_who(holder)} held {lock.name} across {call}, and the scheduler "
                    f"takes that lock in its {op} call: a slow or blocked {call.split()[0]} "
                    "makes the scheduler wait (a scheduler call only snapshots, enqueues or "
                    "swaps under a short lock; slow work runs outside it)",
                    (R3,),
                )
                break
        if failure is None:
            for task, _ in others:
                if build and not task.main:
                    failure = Failure(
                        "violation",
                        f"R7: {_who(holder)} called {call} holding {lock.name}, which "
                        f"{_who(task)} also takes: a slow build holds that thread up "
                        "(build_payload is called outside every lock)",
                        (R7,),
                    )
                    break
                if not build and not task.main and task.role != holder.role:
                    failure = Failure(
                        "violation",
                        f"R17: {_who(holder)} held {lock.name} across {call}, and "
                        f"{_who(task)} of another adapter takes that lock: a slow "
                        "connector call of one adapter holds up another's requests (no "
                        "request waits behind another)",
                        (R17,),
                    )
                    break
        if failure is not None:
            judged.add(id(lock))
            found.append(failure)
    return found
