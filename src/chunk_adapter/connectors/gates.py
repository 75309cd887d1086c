"""Gates: hold a chosen put, get or build in flight until the test releases it.

A test arms a :class:`Gate` for the next call that matches (a key, a request
id, any predicate), then learns through ``wait_started`` when that call has
reached the gate and is held there. This is how tests force "a get is in
flight while ``cleanup_receiver`` runs" with events, not sleeps.

A gate never released holds its thread forever (in 0.1 s waits that re-check
the release flag), which is how tests model a connector or a build that hangs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .base import Connector, ConnectorWrapper

__all__ = ["Gate", "GateSet", "GatedConnector"]

Match = Callable[..., bool]

_WAIT_SLICE = 0.1


class Gate:
    """One armed hold. ``count`` calls are caught; each blocks until ``release()``."""

    def __init__(self, op: str, match: Match, description: str, count: int = 1) -> None:
        if count < 1:
            raise ValueError(f"Gate count must be at least 1, got count={count!r}")
        self.op = op
        self.match = match
        self.description = description
        self.remaining = count
        # started: set by the held thread once it is at the gate; the test waits on it.
        self.started = threading.Event()
        # released: set by release(); held threads wait on it in short slices.
        self.released = threading.Event()
        # returned: set by the held call's thread once the call it held has returned
        # (``result``: what a held get returned, written before it is set).
        self.returned = threading.Event()
        self.result: Any = None
        self.held = 0  # how many calls reached this gate (guarded by the GateSet lock)

    def wait_started(self, timeout: float = 10.0) -> bool:
        """Wait until a call is held at this gate; ``False`` if none came in *timeout*."""
        return self.started.wait(timeout)

    def release(self) -> None:
        """Let every held call (and later ones it catches) through. Idempotent."""
        self.released.set()

    def _hold(self) -> None:
        self.started.set()
        while not self.released.wait(_WAIT_SLICE):
            pass

    def __repr__(self) -> str:
        state = "released" if self.released.is_set() else "armed"
        return f"Gate({self.op} {self.description}, {state}, held={self.held})"


class GateSet:
    """The armed gates of one wrapper; matching consumes a gate's count."""

    def __init__(self) -> None:
        # Guards _gates, _every and each gate's remaining/held. Held only to
        # find and consume a gate, never while a call is held; nobody waits on it.
        self._lock = threading.Lock()
        self._gates: list[Gate] = []  # armed: still catching calls
        self._every: list[Gate] = []  # every gate ever armed, for release_all

    def arm(self, op: str, match: Match, description: str, count: int = 1) -> Gate:
        gate = Gate(op, match, description, count)
        with self._lock:
            self._gates.append(gate)
            self._every.append(gate)
        return gate

    def passage(self, op: str, *args: Any) -> Gate | None:
        """Called before the real operation: hold here if an armed gate matches (and
        return that gate, once released)."""
        with self._lock:
            gate = next(
                (g for g in self._gates if g.op == op and g.remaining > 0 and g.match(*args)),
                None,
            )
            if gate is None:
                return None
            gate.remaining -= 1
            gate.held += 1
            if gate.remaining == 0:
                self._gates.remove(gate)
        gate._hold()
        return gate

    def release_all(self) -> None:
        """Release every gate ever armed, holding or not, and disarm them (teardown)."""
        with self._lock:
            gates, self._gates = self._every, []
        for gate in gates:
            gate.release()

    def armed(self) -> list[Gate]:
        with self._lock:
            return list(self._gates)


def _key_match(key: str | None, predicate: Callable[[str], bool] | None) -> Match:
    if key is not None and predicate is not None:
        raise ValueError("pass key= or predicate=, not both")

    def match(k: str, *_: Any) -> bool:
        if key is not None:
            return k == key
        return predicate(k) if predicate is not None else True

    return match


class GatedConnector(ConnectorWrapper):
    """Wraps any connector; ``hold_put`` / ``hold_get`` arm gates on its calls."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        self.gates = GateSet()

    def hold_put(
        self,
        key: str | None = None,
        *,
        predicate: Callable[[str], bool] | None = None,
        count: int = 1,
    ) -> Gate:
        """Hold the next *count* puts of *key* (or matching *predicate*; default any key)."""
        return self.gates.arm("put", _key_match(key, predicate), f"key={key!r}", count)

    def hold_get(
        self,
        key: str | None = None,
        *,
        predicate: Callable[[str], bool] | None = None,
        count: int = 1,
    ) -> Gate:
        """Hold the next *count* gets of *key* (or matching *predicate*; default any key)."""
        return self.gates.arm("get", _key_match(key, predicate), f"key={key!r}", count)

    def release_all(self) -> None:
        self.gates.release_all()

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.gates.passage("put", key, value)
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        gate = self.gates.passage("get", key)
        value = None
        try:
            value = self.inner.get(key)
            return value
        finally:
            if gate is not None:
                gate.result = value
                gate.returned.set()

    def __repr__(self) -> str:
        return f"GatedConnector({self.inner!r})"
