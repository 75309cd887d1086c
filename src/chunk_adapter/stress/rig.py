"""The test bed of every scenario: wrapped connectors, a recording builder, the adapters.

One :class:`Rig` is one pipeline: the factory under test builds a **sender**
(``stage_id=0``: ``save_async``, ``cancel_sender``) and a **receiver**
(``stage_id=1, src_stage_id=0``: ``load_async``, ``poll_ready``,
``cleanup_receiver``), as a real deployment does, over ::

    Progress(RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector()))))

(a :class:`~chunk_adapter.bed.Bed` with a
:class:`~chunk_adapter.bed.progress.Progress` on top) with a
:class:`~chunk_adapter.connectors.GatedBuilder` as the sender's
``build_payload``, everything recorded into one
:class:`~chunk_adapter.history.History`. :class:`Pipeline` drives the two as
one scheduler sees them; ``stop()`` stops both. ``loopback=True`` builds one
adapter that receives its own chunks (``stage_id == src_stage_id == 1``)
instead: a variant, since an adapter may rightly share per-request state
between its send and receive sides. The outer :class:`Progress` lets the
driver wait for "the connector was called" on a condition instead of sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..bed.pair import AdapterPair
from ..bed.progress import Progress
from ..bed.stack import LOOPBACK_STAGE, RECEIVER_STAGE, Bed
from ..bed.stack import SENDER_STAGE as STAGE
from ..connectors import FaultRule, GatedBuilder
from ..connectors.base import Connector
from ..factory import AdapterFactory, AdapterLike, accepted_options, known_options
from ..history import History

__all__ = [
    "HELPER_PREFIX",
    "LOOPBACK_STAGE",
    "RECEIVER_STAGE",
    "STAGE",
    "Pipeline",
    "Rig",
    "Watchdog",
    "make_adapter",
    "setting",
]

HELPER_PREFIX = "stress-"


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
    connector: Connector | Bed,
    *,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    loopback: bool = False,
    **options: Any,
) -> Pipeline:
    """Build the adapters under test (module doc) over *connector* (a bed: its outermost
    connector), passing only the *options* the factory accepts. The receiver gets no
    ``build_payload``: it never builds."""
    bed = connector if isinstance(connector, Bed) else Bed(base=connector)
    accepted = accepted_options(factory, options)
    return Pipeline(*bed.pair(factory, build_payload=build_payload, loopback=loopback, **accepted))


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
    """The bed (wrapped connectors and builder) of one scenario run (see module doc)."""

    bed: Bed
    watch: Progress
    builder: GatedBuilder
    loopback: bool = False
    threads_before: set[threading.Thread] = field(default_factory=set)
    known: dict[str, Any] = field(default_factory=dict)
    """The options passed that the adapter was surely built with (:func:`known_options`)."""

    @property
    def put_tries(self) -> int | None:
        """The sender's tries per chunk in all (R10), for the oracles, when the suite knows
        it (``put_tries=N`` in :attr:`known`); else ``None`` (a drop needs one failed put;
        no upper bound). An attribute of that name is never read alone: an adapter may
        count puts in it, or its retries after the first try."""
        tries: Any = self.known.get("put_tries")
        return int(tries) if _is_count(tries) and tries >= 1 else None

    @property
    def history(self) -> History:
        return self.bed.history

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
        bed = Bed(
            consume_on_get=consume_on_get,
            notify=notify,
            gated=True,
            faulty=True,
            rules=rules,
            put_rate=put_rate,
            get_rate=get_rate,
            seed=seed,
            record=History(),
        )
        builder = bed.builder() if build_fn is None else bed.builder(build_fn)
        return cls(bed, bed.wrap(Progress), builder, loopback)

    def adapter(self, factory: AdapterFactory, **options: Any) -> Pipeline:
        """Build the adapters under test on this rig; remembers which threads existed before."""
        self.threads_before = set(threading.enumerate())
        pipeline = make_adapter(
            factory, self.bed, build_payload=self.builder, loopback=self.loopback, **options
        )
        self.known = known_options(factory, options, pipeline)
        return pipeline

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
        self.bed.release_all()
