"""Small random programs on the controlled runtime, for comparing strategies' coverage.

``random_program(seed)`` draws two or three tasks, each a few operations on two
locks (one also a condition's lock), two events and the virtual clock. Every
result a program returns is the same for every schedule of one Mazurkiewicz
trace under DPOR's dependency relation: each lock's log is written under that
lock only, and the event reads are reads of the events. So a strategy that
covers every trace (within a preemption bound) reaches every result DFS reaches
(within the same bound); a result it misses is a trace it skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from chunk_adapter.explore.runtime.primitives import ControlledRuntime

__all__ = ["OPS", "random_program"]

Op = tuple[Any, ...]
Program = Callable[[ControlledRuntime], tuple[Any, ...]]

OPS: tuple[str, ...] = ("lock", "both", "set", "clear", "read", "wait", "sleep", "notify", "cwait")
"""lock L: log under lock L; both: locks 0 then 1; set/clear/read/wait E: the event E
(wait with a 1 ms timeout, its result recorded); sleep: 1 ms; notify / cwait: the condition
over lock 0 (cwait waits at most 1 ms), logged under lock 0."""


_WEIGHTS = (3, 3, 1, 1, 1, 1, 1, 1, 1)
"""Locks drawn more often than the rest: most reversals, and most rules of bounded DPOR,
are about locks."""


def _draw(rng: random.Random) -> list[list[Op]]:
    tasks: list[list[Op]] = []
    for _ in range(rng.choice((2, 2, 3))):
        ops: list[Op] = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choices(OPS, weights=_WEIGHTS)[0]
            ops.append((kind, rng.randint(0, 1)))
        tasks.append(ops)
    return tasks


def random_program(seed: int) -> tuple[list[list[Op]], Program]:
    """The operations drawn for *seed* (to print on a failure) and the program running them."""
    plan = _draw(random.Random(seed))

    def program(rt: ControlledRuntime) -> tuple[Any, ...]:
        locks = [rt.Lock(), rt.Lock()]
        cond = rt.Condition(locks[0])
        events = [rt.Event(), rt.Event()]
        logs: list[list[Any]] = [[], []]
        seen: list[list[bool]] = [[] for _ in plan]

        def run(i: int) -> None:
            for kind, n in plan[i]:
                if kind == "lock":
                    with locks[n]:
                        logs[n].append(i)
                elif kind == "both":
                    with locks[0], locks[1]:
                        logs[0].append((i, "both"))
                        logs[1].append((i, "both"))
                elif kind == "set":
                    events[n].set()
                elif kind == "clear":
                    events[n].clear()
                elif kind == "read":
                    seen[i].append(events[n].is_set())
                elif kind == "wait":
                    seen[i].append(events[n].wait(0.001))
                elif kind == "sleep":
                    rt.sleep(0.001)
                elif kind == "notify":
                    with cond:
                        logs[0].append((i, "notify"))
                        cond.notify()
                else:  # cwait
                    with cond:
                        cond.wait(0.001)
                        logs[0].append((i, "woke"))

        threads = [rt.start_thread(lambda i=i: run(i), f"t{i}") for i in range(1, len(plan))]
        run(0)
        for thread in threads:
            thread.join()
        return tuple(map(tuple, logs)) + tuple(map(tuple, seen))

    return plan, program
