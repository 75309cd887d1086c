"""The test bed of every scenario: wrapped connectors, a recording builder, the adapters.

One :class:`Rig` is one pipeline: the factory under test builds a **sender**
(``stage_id=0``: ``save_async``, ``cancel_sender``) and a **receiver**
(``stage_id=1, src_stage_id=0``: ``load_async``, ``poll_ready``,
``cleanup_receiver``), as a real deployment does, over ::

    Watch(RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector()))))

with a :class:`~chunk_adapter.connectors.GatedBuilder` as the sender's
``build_payload``, everything recorded into one
:class:`~chunk_adapter.history.History`. :class:`Pipeline` drives the two as
one scheduler sees them; ``stop()`` stops both. ``loopback=True`` builds one
adapter that receives its own chunks (``stage_id == src_stage_id == 1``)
instead: a variant, since an adapter may rightly share per-request state
between its send and receive sides. The outer :class:`Watch` lets the driver
wait for "the connector was called" on a condition instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..bed.pair import AdapterPair
from ..connectors import (
    FaultRule,
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
    RecordingConnector,
)
from ..connectors.base import Connector, ConnectorWrapper
from ..factory import AdapterFactory, AdapterLike, accepted_options
from ..history import History

__all__ = [
    "HELPER_PREFIX",
    "LOOPBACK_STAGE",
    "RECEIVER_STAGE",
    "STAGE",
    "Pipeline",
    "Rig",
    "Watch",
    "Watchdog",
    "make_adapter",
    "setting",
]

STAGE = 0
"""The sender's stage: its keys are ``f"{request_id}_0_{chunk_id}"``."""
RECEIVER_STAGE = 1  # reads STAGE's keys
LOOPBACK_STAGE = 1  # the loopback variant: one adapter, stage_id == src_stage_id
HELPER_PREFIX = "stress-"


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


class Pipeline(AdapterPair[AdapterLike]):
    """A sender and a receiver (or one loopback adapter), driven as one scheduler drives them.

    The sending calls go to :attr:`sender`, the receiving ones to
    :attr:`receiver`; ``stop()`` stops the sender, then the receiver.
    """

    @property
    def sides(self) -> list[tuple[str, AdapterLike]]:
        """``(name, adapter)`` of each distinct adapter, the sender first."""
        if self.loopback:
            return [("adapter", self.sender)]
        return [("sender", self.sender), ("receiver", self.receiver)]

    def stats(self) -> Any | None:
        """Both sides' ``stats()`` counters added up (``None`` if the adapters have none).

        The sender counts puts and builds, the receiver gets and commits; the
        sum is what one adapter doing both would count.
        """
        parts = []
        for _, side in self.sides:
            fn = getattr(side, "stats", None)
            if not callable(fn):
                return None
            parts.append(fn())
        if len(parts) == 1:
            return parts[0]
        names = {n for p in parts for n in dir(p) if not n.startswith("_")}
        total = {
            n: sum(getattr(p, n, 0) for p in parts)
            for n in names
            if all(_is_count(getattr(p, n, 0)) for p in parts)
        }
        return SimpleNamespace(**total)

    def threads(self) -> list[threading.Thread]:
        """The adapters' own ``threads()``, where they offer it."""
        out: list[threading.Thread] = []
        for _, side in self.sides:
            fn = getattr(side, "threads", None)
            if callable(fn):
                out += list(fn())
        return out

    def __getattr__(self, name: str) -> Any:
        # Settings a scenario reads (put_tries, idle_backoff...): the side that uses them.
        if name.startswith("_"):
            raise AttributeError(name)
        side = self.receiver if name in _RECEIVER_SETTINGS else self.sender
        return getattr(side, name)

    def __repr__(self) -> str:
        return f"Pipeline(sender={self.sender!r}, receiver={self.receiver!r})"


_RECEIVER_SETTINGS = frozenset({"idle_backoff", "wait_timeout", "repoll_interval", "event_driven"})


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def make_adapter(
    factory: AdapterFactory,
    connector: Any,
    *,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    loopback: bool = False,
    **options: Any,
) -> Pipeline:
    """Build the adapters under test (module doc), passing only the *options* the factory
    accepts. The receiver gets no ``build_payload``: it never builds."""
    accepted = accepted_options(factory, options)
    if loopback:
        one = factory(
            connector,
            stage_id=LOOPBACK_STAGE,
            src_stage_id=LOOPBACK_STAGE,
            build_payload=build_payload,
            **accepted,
        )
        return Pipeline(one, one)
    sender = factory(connector, stage_id=STAGE, build_payload=build_payload, **accepted)
    try:
        receiver = factory(connector, stage_id=RECEIVER_STAGE, src_stage_id=STAGE, **accepted)
    except BaseException:
        sender.stop()
        raise
    return Pipeline(sender, receiver)


def setting(adapter: Any, name: str, default: float) -> float:
    """The adapter's configured timeout *name* if it exposes a number, else *default*.

    For a :class:`Pipeline`, the larger of the two sides' values.
    """
    if isinstance(adapter, Pipeline):
        return max(setting(side, name, default) for _, side in adapter.sides)
    try:
        value = getattr(adapter, name, None)
    except Exception:  # an adapter whose attribute lookup raises has no such setting
        return default
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
    loopback: bool = False
    threads_before: set[threading.Thread] = field(default_factory=set)

    @property
    def stage(self) -> int:
        """The stage the sender's keys carry: ``f"{request_id}_{rig.stage}_{chunk_id}"``."""
        return LOOPBACK_STAGE if self.loopback else STAGE

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
        loopback: bool = False,
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
        return cls(history, memory, gated, faulty, recording, Watch(recording), builder, loopback)

    def adapter(self, factory: AdapterFactory, **options: Any) -> Pipeline:
        """Build the adapters under test on this rig; remembers which threads existed before."""
        self.threads_before = set(threading.enumerate())
        return make_adapter(
            factory, self.watch, build_payload=self.builder, loopback=self.loopback, **options
        )

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
