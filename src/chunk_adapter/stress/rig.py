"""The test bed of every scenario: wrapped connectors, a recording builder, an adapter.

One :class:`Rig` is one loopback pipeline: a single adapter built by the
factory under test with ``stage_id == src_stage_id``, so it receives exactly
what it sends, over ::

    Watch(RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector()))))

with a :class:`~chunk_adapter.connectors.GatedBuilder` as ``build_payload``,
everything recorded into one :class:`~chunk_adapter.history.History`. The
outer :class:`Watch` lets the driver wait for "the connector was called" on
a condition instead of sleeping.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..connectors import (
    FaultRule,
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
    RecordingConnector,
)
from ..connectors.base import Connector, ConnectorWrapper
from ..factory import AdapterFactory, AdapterLike
from ..history import History

__all__ = [
    "HELPER_PREFIX",
    "STAGE",
    "Rig",
    "Watch",
    "Watchdog",
    "accepted_options",
    "make_adapter",
    "setting",
]

STAGE = 1
HELPER_PREFIX = "stress-"
"""The loopback stage: the adapter sends as stage 1 and receives from stage 1."""


class Watch(ConnectorWrapper):
    """Wraps a connector and signals a condition after every put and get.

    ``wait_for(predicate, timeout)`` re-checks *predicate* each time the
    connector was called (and at least every ``slice`` seconds), so a driver
    waits for what it needs on an event, never on a guessed sleep.
    """

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        # Guards ops. Notified (all) after every put/get returns or raises;
        # wait_for() waits on it.
        self._cond = threading.Condition()
        self.ops = 0

    def _bump(self) -> None:
        with self._cond:
            self.ops += 1
            self._cond.notify_all()

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self.inner.put(key, value)
        finally:
            self._bump()

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return self.inner.get(key)
        finally:
            self._bump()

    def wait_for(
        self, predicate: Callable[[], bool], timeout: float, slice_: float = 0.005
    ) -> bool:
        """Wait until *predicate()* is true; ``False`` if *timeout* seconds pass first.

        *predicate* runs outside the condition's lock: it may call the adapter,
        whose threads may call the connector while holding locks of their own.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                seen = self.ops
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._cond:
                if self.ops == seen:
                    self._cond.wait(min(remaining, slice_))

    def __repr__(self) -> str:
        return f"Watch({self.inner!r})"


class Watchdog:
    """Calls *release* (opens gates) after *seconds* unless cancelled first.

    A scheduler call that wrongly waits for held work would otherwise wait
    forever, since the driver that opens the gate is the thread it blocks.
    With a watchdog it returns late instead, and ``fired`` says so.
    """

    def __init__(self, release: Callable[[], None], seconds: float) -> None:
        self.seconds = seconds
        self.fired = threading.Event()
        self._release = release
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.name = f"{HELPER_PREFIX}watchdog"
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired.set()
        self._release()

    def cancel(self) -> bool:
        """Stop the timer; ``True`` if it had already fired."""
        self._timer.cancel()
        return self.fired.is_set()


def accepted_options(factory: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The subset of *options* the factory's signature takes (all, if it has ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(options)
    return {k: v for k, v in options.items() if k in params}


def make_adapter(
    factory: AdapterFactory,
    connector: Any,
    *,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> AdapterLike:
    """Build a loopback adapter, passing only the *options* the factory accepts."""
    return factory(
        connector,
        stage_id=STAGE,
        src_stage_id=STAGE,
        build_payload=build_payload,
        **accepted_options(factory, options),
    )


def setting(adapter: Any, name: str, default: float) -> float:
    """The adapter's configured timeout *name* if it exposes a number, else *default*."""
    value = getattr(adapter, name, None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return default


@dataclass
class Rig:
    """The wrapped connectors and the builder of one scenario run (see module doc)."""

    history: History
    memory: MemoryConnector
    gated: GatedConnector
    faulty: FaultyConnector
    recording: RecordingConnector
    watch: Watch
    builder: GatedBuilder
    threads_before: set[threading.Thread] = field(default_factory=set)

    @classmethod
    def build(
        cls,
        *,
        seed: int,
        put_rate: float = 0.0,
        get_rate: float = 0.0,
        rules: Iterable[FaultRule] = (),
        consume_on_get: bool = False,
        notify: bool = False,
        build_fn: Callable[[str, Any, bool], Any] | None = None,
    ) -> Rig:
        history = History()
        memory = MemoryConnector(consume_on_get=consume_on_get, notify=notify)
        gated = GatedConnector(memory)
        faulty = FaultyConnector(
            gated, rules=rules, put_rate=put_rate, get_rate=get_rate, seed=seed
        )
        recording = RecordingConnector(faulty, history)
        builder = (
            GatedBuilder(history=history) if build_fn is None else GatedBuilder(build_fn, history)
        )
        return cls(history, memory, gated, faulty, recording, Watch(recording), builder)

    def adapter(self, factory: AdapterFactory, **options: Any) -> AdapterLike:
        """Build the adapter under test on this rig; remembers which threads existed before."""
        self.threads_before = set(threading.enumerate())
        return make_adapter(factory, self.watch, build_payload=self.builder, **options)

    def new_threads(self, exclude: Iterable[threading.Thread] = ()) -> list[threading.Thread]:
        """Live threads started since :meth:`adapter` (the adapter's), minus *exclude*.

        The scenarios' own helper threads are named ``stress-...`` and never counted.
        """
        skip = self.threads_before | set(exclude) | {threading.current_thread()}
        return [
            t
            for t in threading.enumerate()
            if t not in skip and t.is_alive() and not t.name.startswith(HELPER_PREFIX)
        ]

    def release_all(self) -> None:
        """Open every gate (teardown: lets held threads finish)."""
        self.gated.release_all()
        self.builder.release_all()
