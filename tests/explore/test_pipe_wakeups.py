"""A thread woken through a pipe its ``select`` watches is under the explorer (R23, R18).

An adapter whose RECV thread sleeps in ``selectors.DefaultSelector().select(timeout)``
and is rung by one byte written to a pipe (``load_async``, ``stop()``) wakes at once on
real threads. Under the explorer the select waits in virtual time, so a write the
explorer did not see would leave it asleep to its timeout: a chunk would look never
received (a false R23) or ``stop()`` slow (a false R18, first met on an outside
adapter). Every ``os.write`` a task makes ends such waits; a wait that times out with
a descriptor ready that nothing seen wrote to (a socket's ``send``) ends the execution
as uncontrolled: no verdict, never a red.
"""

from __future__ import annotations

import os
import selectors
import socket
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.explore.engine.explorer import explore
from chunk_adapter.explore.scenarios.scenario import Scenario, load, poll, save, settle
from chunk_adapter.explore.strategies import RandomStrategy

WAIT = 5.0  # the select's timeout: longer than the script's quiet wait (settle)


class PipeWoken(ChunkAdapter):
    """The reference adapter whose RECV thread, with nothing registered, sleeps in a
    selector on a pipe that ``load_async`` and ``stop()`` ring (a correct design)."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        self._bell_r, self._bell_w = self._bell()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._bell_r, selectors.EVENT_READ)
        super().__init__(connector, wait_timeout=WAIT, **kwargs)

    def _bell(self) -> tuple[Any, Any]:
        read, write = os.pipe()
        os.set_blocking(read, False)
        return read, write

    def _ring(self) -> None:
        os.write(self._bell_w, b"!")

    def _quiet_bell(self) -> None:
        try:
            while os.read(self._bell_r, 64):
                pass
        except BlockingIOError:
            pass

    def load_async(self, request_id: str) -> None:
        super().load_async(request_id)
        self._ring()

    def stop(self) -> None:
        self._stop.set()
        self._ring()
        super().stop()

    def _recv_rounds(self) -> None:
        while not self._stop.is_set():
            with self._recv_lock:
                idle = not self._queue
            if idle:
                if self._sel.select(WAIT):  # until load_async or stop() rings
                    self._quiet_bell()
                continue
            with self._recv_lock:
                entries, signal = len(self._queue), self._recv_signal
                self._get_failed = False
            if not self._recv_round(entries) and self._idle(signal):
                return


class SocketWoken(PipeWoken):
    """The same, rung through a socket pair: a ``send`` the explorer does not see."""

    def _bell(self) -> tuple[Any, Any]:
        read, write = socket.socketpair()
        read.setblocking(False)
        self._socks = (read, write)
        return read, write

    def _ring(self) -> None:
        self._bell_w.send(b"!")

    def _quiet_bell(self) -> None:
        try:
            while self._bell_r.recv(64):
                pass
        except BlockingIOError:
            pass


def _factory(cls: type[PipeWoken]) -> Any:
    """A factory of *cls* that takes no ``runtime=``: the explorer controls it by
    substitution, as an outside adapter (the reference would take the runtime)."""

    def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
             build_payload: Any = None) -> PipeWoken:  # fmt: skip
        return cls(connector, stage_id=stage_id, src_stage_id=src_stage_id,
                   build_payload=build_payload)  # fmt: skip

    return make


pipe_woken, socket_woken = _factory(PipeWoken), _factory(SocketWoken)


SCRIPT = Scenario(
    "pipe", (settle(), load("a"), save("a", 0), save("a", 1, True), settle(), poll())
)  # the RECV thread asleep in its select first: the load_async's ring must wake it (R23)


@pytest.mark.rule("R23")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_select_rung_through_a_pipe_wakes_when_the_byte_is_written(seed: int) -> None:
    report = explore(
        SCRIPT, RandomStrategy(seed=seed, executions=5), factory=pipe_woken, substitute="auto"
    )
    assert report.failure is None, report.describe_failure()
    assert report.executions == 5


@pytest.mark.rule("R18")
def test_a_select_rung_through_a_socket_the_explorer_did_not_see_is_no_verdict() -> None:
    report = explore(
        SCRIPT, RandomStrategy(seed=0, executions=5), factory=socket_woken, substitute="auto"
    )
    assert report.failure is not None
    kinds = {f.kind for f in report.failure.failures}
    assert kinds == {"uncontrolled"}, report.describe_failure()
    assert "nothing the explorer saw wrote to" in report.describe_failure()
