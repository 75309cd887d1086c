"""The soak's streams (benchmarks/soak.py): what a sender is told to send, and the
receiver's check of what arrives.

An :class:`Order` is one stream: a unique request id (a uuid drawn from the soak's
seeded ``random.Random``), ``chunks`` non-final chunks (indices ``0 .. chunks-1``),
then the final (index ``chunks``), and the indices whose ``build_payload`` raises
(:func:`build`). Each chunk's data is tagged with its stream id and index, so the
receiver tells a foreign, repeated or missing chunk from the right one without
trusting the sender.

:class:`Check` judges one registration value by value: exactly the order's chunks,
in order, nothing twice, ending with the final. A chunk may be missing only when its
build failed (R7: dropped, logged, counted); a final whose build failed arrives with
data ``None`` (R7, R11). Any other gap is a lost chunk. Puts that fail are retried
(the soak configures enough tries that no put outage it makes can drop a chunk, R10),
so a drop after the put tries is a gap too, and so reported.

:class:`Sabotage` is the self-test: a receiving connector that spoils one value, so
that a run can prove the check says ``lost``, ``twice`` or ``mixed``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from chunk_adapter.connectors import Connector
from chunk_adapter.connectors.base import ConnectorWrapper

__all__ = [
    "LOST",
    "MIXED",
    "SABOTAGE",
    "TWICE",
    "BuildFault",
    "Check",
    "Order",
    "Sabotage",
    "build",
]

LOST, MIXED, TWICE = "lost", "mixed", "twice"
SABOTAGE = {"drop": LOST, "dup": TWICE, "mix": MIXED}  # mode -> what the check must say


class BuildFault(Exception):
    """A planned ``build_payload`` failure (the order names the chunk)."""


@dataclass(frozen=True)
class Order:
    """One stream to send: see the module doc."""

    sid: str
    chunks: int
    fails: frozenset[int]
    size: int

    def data(self, i: int) -> dict[str, Any]:
        """The wire data of chunk *i* when its build succeeds."""
        if i == self.chunks:
            return {"s": self.sid, "i": i, "end": True}
        return {"s": self.sid, "i": i, "x": "x" * self.size}

    def snapshot(self, i: int) -> dict[str, Any]:
        """What the sender saves for chunk *i*: the data and whether its build raises."""
        return {**self.data(i), "boom": i in self.fails}

    def arrivals(self) -> list[tuple[int, Any]]:
        """(index, data) of what must arrive, in order: the chunks whose build did not
        fail, then the final (data ``None`` when its build failed)."""
        kept = [(i, self.data(i)) for i in range(self.chunks) if i not in self.fails]
        final = None if self.chunks in self.fails else self.data(self.chunks)
        return [*kept, (self.chunks, final)]


def build(request_id: str, snap: dict[str, Any], is_final: bool) -> dict[str, Any]:
    """The sender's ``build_payload``: the snapshot's data, or :class:`BuildFault` when the
    order planned this chunk's build to fail."""
    if snap["boom"]:
        raise BuildFault(f"planned build failure: {request_id} chunk {snap['i']}")
    return {k: v for k, v in snap.items() if k != "boom"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class Check:
    """The receiver's judgement of one registration (module doc). ``take`` each value as
    ``poll_ready`` hands it out; ``problem`` is the first ``(kind, what)`` found."""

    def __init__(self, order: Order) -> None:
        self.order = order
        self._want = order.arrivals()
        self.pos = 0  # how many of the wanted arrivals came
        self.done = False  # the final came
        self.problem: tuple[str, str] | None = None

    def take(self, value: Any) -> None:
        if self.problem is None:
            self.problem = self._judge(value)

    def describe(self) -> str:
        """Where the stream stands, for a report."""
        if self.done:
            return "complete"
        index = self._want[self.pos][0]
        return (
            f"{self.pos} of {len(self._want)} arrivals came (chunks={self.order.chunks}, "
            f"build failures at {sorted(self.order.fails)}); waiting for index {index}"
        )

    def _judge(self, value: Any) -> tuple[str, str] | None:
        sid = self.order.sid
        if self.done:
            return TWICE, f"{sid}: a value after its final: {_short(value)}"
        if (
            not isinstance(value, dict)
            or set(value) != {"data", "finished"}
            or not isinstance(value["finished"], bool)
        ):
            return MIXED, f"{sid}: not a wire value {{data, finished}}: {_short(value)}"
        data = value["data"]
        if isinstance(data, dict) and data.get("s") != sid:
            return MIXED, f"{sid}: got a chunk of stream {data.get('s')!r}: {_short(data)}"
        if value["finished"]:
            return self._final(data)
        return self._chunk(data)

    def _final(self, data: Any) -> tuple[str, str] | None:
        sid, (index, want) = self.order.sid, self._want[self.pos]
        if self.pos < len(self._want) - 1:
            return LOST, (
                f"{sid}: the final came while chunk {index} is missing (its build did not "
                f"fail; {self.describe()})"
            )
        if data != want:
            return MIXED, f"{sid}: final data {_short(data)}, expected {_short(want)}"
        self.pos += 1
        self.done = True
        return None

    def _chunk(self, data: Any) -> tuple[str, str] | None:
        sid, (index, want) = self.order.sid, self._want[self.pos]
        got = data.get("i") if isinstance(data, dict) else None
        if not isinstance(got, int) or not 0 <= got < self.order.chunks:
            return MIXED, f"{sid}: a non-final that is no chunk of it: {_short(data)}"
        if got in self.order.fails:
            return MIXED, f"{sid}: chunk {got} arrived though its build raised: {_short(data)}"
        if got < index:
            return TWICE, f"{sid}: chunk {got} again (waiting for index {index})"
        if got > index:
            return LOST, (
                f"{sid}: chunk {index} missing, chunk {got} came next (its build did not fail)"
            )
        if data != want:
            return MIXED, f"{sid}: chunk {got} data {_short(data)}, expected {_short(want)}"
        self.pos += 1
        return None


class Sabotage(ConnectorWrapper):
    """A receiving connector that spoils one non-final value after *after* good ones:
    ``drop`` consumes it and says nothing is there (a lost chunk), ``dup`` hands out the
    stream's previous chunk again in its place (a chunk twice), ``mix`` hands out
    another stream's last chunk (a foreign chunk). Puts pass through."""

    KEEP = 256  # the last non-final remembered for this many streams

    def __init__(self, inner: Connector, mode: str, after: int = 50) -> None:
        if mode not in SABOTAGE:
            raise ValueError(f"sabotage mode must be one of {sorted(SABOTAGE)}, got {mode!r}")
        super().__init__(inner)
        self.mode, self.after = mode, after
        # Guards _seen, _last and spoiled: the RECV thread gets, the soak reads.
        # Never held while calling the inner connector; nobody waits on it.
        self._lock = threading.Lock()
        self._seen = 0
        self._last: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.spoiled: str | None = None  # the key whose value was spoiled

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.inner.get(key)
        if value is None or value.get("finished"):
            return value
        stream = key.rsplit("_", 1)[0]
        with self._lock:
            spoil, instead = self._spoil(key, stream)
            self._last[stream] = value
            self._last.move_to_end(stream)
            while len(self._last) > self.KEEP:
                self._last.popitem(last=False)
        return instead if spoil else value

    def _spoil(self, key: str, stream: str) -> tuple[bool, dict[str, Any] | None]:
        """Called with ``_lock`` held: whether to hand out another value for *key*, and
        which."""
        self._seen += 1
        if self.spoiled is not None or self._seen <= self.after:
            return False, None
        if self.mode == "drop":
            instead = None
        elif self.mode == "dup":
            if stream not in self._last:
                return False, None
            instead = self._last[stream]
        else:
            other = next((s for s in reversed(self._last) if s != stream), None)
            if other is None:
                return False, None
            instead = self._last[other]
        self.spoiled = key
        return True, instead
