"""Fault injection: make chosen or random puts and gets raise.

Two kinds of fault, freely combined:

* scripted, as :class:`FaultRule` ("fail the 2nd put of key k", "fail the next
  5 gets of any key"), given at construction or added later with ``fail_next``;
* random, at a rate per operation, from a ``random.Random(seed)`` of its own,
  so a run is reproduced by its seed;
* in time, through :attr:`FaultyConnector.timed` (:mod:`.timed`): outages that
  fail every matching call for a while, and slow calls.

An injected fault raises :class:`~chunk_adapter.errors.InjectedFault` *before*
the inner connector is called: a put that raised stored nothing, as the
contract requires.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InjectedFault, InvalidValue
from .base import Connector, ConnectorWrapper
from .fatal import check_raises, injected
from .timed import TimedFaults

__all__ = ["FaultRule", "FaultyConnector"]

Op = Literal["put", "get"]


@dataclass(frozen=True)
class FaultRule:
    """Fail matching calls number ``nth`` .. ``nth + times - 1`` (counted from 1).

    ``key=None`` matches every key. ``FaultRule("put", "r_0_3", nth=2)`` fails
    the second put of ``r_0_3``; ``FaultRule("get", times=5)`` the next five gets;
    ``stream="r_0"`` matches only the keys of that stream (a key without its chunk
    id: request ``r``, stage 0), so ``FaultRule("put", stream="r_0", times=3)``
    fails the stream's next three puts, whatever other streams put meanwhile.
    """

    op: Op
    key: str | None = None
    nth: int = 1
    times: int = 1
    stream: str | None = None
    raises: str | None = None
    """What a failed call raises: ``None``, ``InjectedFault``; or one of
    :data:`~.fatal.RAISES` (``"exit"``: a ``SystemExit``...), for R30."""

    def matches(self, op: str, key: str) -> bool:
        return (
            op == self.op
            and (self.key is None or self.key == key)
            and (self.stream is None or _stream(key) == self.stream)
        )

    def __post_init__(self) -> None:
        if self.op not in ("put", "get"):
            raise InvalidValue(f"FaultRule op must be 'put' or 'get', got op={self.op!r}")
        check_raises(self.raises)
        if self.nth < 1 or self.times < 1:
            raise InvalidValue(
                f"FaultRule nth and times count from 1, got nth={self.nth!r}, times={self.times!r}"
            )


def _check_rate(name: str, rate: float) -> float:
    if not 0.0 <= rate <= 1.0:
        raise InvalidValue(f"{name} is a probability in [0, 1], got {name}={rate!r}")
    return rate


def _stream(key: str) -> str:
    """The stream a chunk key belongs to: the key without its chunk id (``"r_0"``)."""
    return key.rsplit("_", 1)[0]


def _bucket(rule: FaultRule) -> tuple[str, ...]:
    """Where :class:`FaultyConnector` files *rule*: under its key, its stream, or its op."""
    if rule.key is not None:
        return (rule.op, rule.key)
    if rule.stream is not None:
        return (rule.op, "", rule.stream)
    return (rule.op,)


class FaultyConnector(ConnectorWrapper):
    """Wraps any connector and makes chosen calls raise ``InjectedFault``."""

    def __init__(
        self,
        inner: Connector,
        *,
        rules: Iterable[FaultRule] = (),
        put_rate: float = 0.0,
        get_rate: float = 0.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(inner)
        self._rates = {
            "put": _check_rate("put_rate", put_rate),
            "get": _check_rate("get_rate", get_rate),
        }
        if (put_rate or get_rate) and seed is None:
            raise InvalidValue(
                "random faults need a seed so a failing run can be reproduced: "
                "pass seed=<int> along with put_rate/get_rate"
            )
        self.seed = seed
        # Guards _live, _added, _random and injected: every call consults them.
        # Never held while calling the inner connector; nobody waits on it.
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        # The rules that can still fail a call, by what they match: (op, key), (op,
        # stream) or op alone (any key). Each entry is [order added, rule, matching calls
        # seen]; a rule is dropped once its last failing call is seen, so a long run
        # (a world repeated a thousand times) scans only its live rules per call.
        self._live: dict[tuple[str, ...], list[list[Any]]] = {}
        self._added = 0
        self.injected: dict[str, int] = {"put": 0, "get": 0}
        self.timed = TimedFaults()
        """Outages and slow calls (:mod:`.timed`); real time unless given another clock."""
        for rule in rules:
            self.add_rule(rule)

    def add_rule(self, rule: FaultRule) -> None:
        with self._lock:
            self._live.setdefault(_bucket(rule), []).append([self._added, rule, 0])
            self._added += 1

    def fail_next(
        self,
        op: Op,
        key: str | None = None,
        times: int = 1,
        *,
        stream: str | None = None,
        raises: str | None = None,
    ) -> None:
        """Fail the next *times* calls of *op* (on *key*, on the keys of *stream*, or on
        any key), raising ``InjectedFault`` or what *raises* names (:mod:`.fatal`)."""
        self.add_rule(FaultRule(op, key, nth=1, times=times, stream=stream, raises=raises))

    def set_rates(self, *, put: float | None = None, get: float | None = None) -> None:
        """Change the random failure rates (``None`` leaves one unchanged)."""
        with self._lock:
            if (put or get) and self.seed is None:
                raise InvalidValue("random faults need a seed: construct with seed=<int>")
            if put is not None:
                self._rates["put"] = _check_rate("put", put)
            if get is not None:
                self._rates["get"] = _check_rate("get", get)

    def _failure(self, op: Op, key: str) -> BaseException | None:
        """What this *op* call on *key* raises, or ``None`` when it goes through."""
        if self.timed.before(op, key):
            with self._lock:
                self.injected[op] += 1
            return InjectedFault(f"injected {op} failure for key {key!r}")
        with self._lock:
            fail = False
            raises: str | None = None
            buckets = [(op, key), (op, "", _stream(key)), (op,)]
            entries = [e for b in buckets for e in self._live.get(b, ())]
            for entry in sorted(entries, key=lambda e: e[0]):  # in the order added
                rule = entry[1]
                if not rule.matches(op, key):
                    continue
                entry[2] += 1
                if rule.nth <= entry[2] < rule.nth + rule.times:
                    fail = True
                    raises = raises or rule.raises
                if entry[2] >= rule.nth + rule.times - 1:  # no call fails by it again
                    bucket = _bucket(rule)
                    self._live[bucket].remove(entry)
                    if not self._live[bucket]:
                        del self._live[bucket]
            rate = self._rates[op]
            if not fail and rate and self._random.random() < rate:
                fail = True
            if not fail:
                return None
            self.injected[op] += 1
        message = f"injected {op} failure for key {key!r}"
        return InjectedFault(message) if raises is None else injected(raises, message)

    def put(self, key: str, value: dict[str, Any]) -> None:
        failure = self._failure("put", key)
        if failure is not None:
            raise failure
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        failure = self._failure("get", key)
        if failure is not None:
            raise failure
        return self.inner.get(key)

    def __repr__(self) -> str:
        return f"FaultyConnector({self.inner!r}, seed={self.seed!r})"
