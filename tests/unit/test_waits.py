"""R20 — every wait re-checks: lost notifications and spurious wake-ups are harmless.

The adapter under test gets a runtime (through ``runtime=``, when its factory
takes one) whose conditions lose every notification, or wake up early for no
reason. A lost notify may cost a condition-wait timeout, never a hang; an early
wake-up must be re-checked, never taken as "there is work".
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

import pytest

from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.runtime import ConditionLike, LockLike, ThreadingRuntime
from tests.unit._rig import Rig
from tests.unit._wait import returns_within, wait_until

WAIT_TIMEOUT = 0.05


class _OddCondition:
    """A real condition that can drop notifications and wake up early."""

    def __init__(self, lock: LockLike, *, lose_notify: bool, spurious: bool) -> None:
        self._cond = threading.Condition(lock)  # type: ignore[arg-type]
        self._lose_notify = lose_notify
        self._spurious = spurious
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        if self._spurious:
            self._cond.wait(0.001)
            return True  # claims a notification that never came
        return self._cond.wait(timeout)

    def notify(self, n: int = 1) -> None:
        if not self._lose_notify:
            self._cond.notify(n)

    def notify_all(self) -> None:
        if not self._lose_notify:
            self._cond.notify_all()

    def __enter__(self) -> bool:
        return self._cond.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._cond.__exit__(exc_type, exc, tb)


class OddRuntime(ThreadingRuntime):
    def __init__(self, *, lose_notify: bool = False, spurious: bool = False) -> None:
        self.lose_notify = lose_notify
        self.spurious = spurious
        self.conditions: list[_OddCondition] = []

    def Condition(self, lock: LockLike) -> ConditionLike:
        cond = _OddCondition(lock, lose_notify=self.lose_notify, spurious=self.spurious)
        self.conditions.append(cond)
        return cond


def _needs_runtime(rig: Rig) -> None:
    if not (rig.accepts("runtime") and rig.accepts("wait_timeout")):
        pytest.skip("the factory takes no runtime= / wait_timeout= (not explorable white-box)")


@pytest.mark.rule("R20")
def test_lost_notifications_cost_a_timeout_not_a_hang(rig: Rig, mem: MemoryConnector) -> None:
    _needs_runtime(rig)
    runtime = OddRuntime(lose_notify=True)
    snd, rcv, inbox = rig.receiving(mem, runtime=runtime, wait_timeout=WAIT_TIMEOUT)
    for round_ in range(3):  # each time both threads are idle in a wait first
        rid = f"r{round_}"
        start = time.monotonic()
        rcv.load_async(rid)
        snd.save_async(rid, round_, True)
        inbox.wait_final(rid, timeout=10.0)
        elapsed = time.monotonic() - start
        # A hang is the inbox's 10 s; a lost notify costs a few WAIT_TIMEOUTs. 5 s leaves room
        # for a CI process crowded with other tests' threads (2.9 s seen once).
        assert elapsed < 5.0, f"R20: delivery took {elapsed:.2f}s with lost notifies; {rig.repro}"
    for adapter in (snd, rcv):
        _, elapsed = returns_within(5.0, adapter.stop, "stop() with lost notifies")
        assert elapsed < WAIT_TIMEOUT + 1.0, f"R20: stop() took {elapsed:.2f}s"
    assert runtime.conditions, "the adapter did not take its conditions from the runtime"


@pytest.mark.rule("R20")
def test_spurious_wakeups_are_rechecked(rig: Rig, mem: MemoryConnector) -> None:
    _needs_runtime(rig)
    runtime = OddRuntime(spurious=True)
    snd, rcv, inbox = rig.receiving(mem, runtime=runtime, wait_timeout=WAIT_TIMEOUT)
    # Let both idle threads wake up for nothing many times before any work comes.
    before = sum(c.waits for c in runtime.conditions)
    wait_until(
        lambda: sum(c.waits for c in runtime.conditions) >= before + 50, what="50 early wake-ups"
    )
    rcv.load_async("r")
    for i in range(5):
        snd.save_async("r", i, i == 4)
    inbox.wait_final("r")
    assert inbox.data("r") == [0, 1, 2, 3, 4], rig.repro
