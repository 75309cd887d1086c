"""One test bed: the connector stack, the builders and the adapters of one run.

Every driver runs the adapter under test over the same layers, stacked in one
order, each optional but the first::

    outer(RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector()))))

- **memory** (:class:`~chunk_adapter.connectors.MemoryConnector`, or a *base*
  connector the caller brings): where the chunks are;
- **gated** (``gated=True``): a driver can hold a put or a get mid-call;
- **faulty** (``faulty=True``): scripted or random ``InjectedFault`` s;
- **recording** (``record=True`` or a :class:`~chunk_adapter.history.History`):
  every call, held or failed, lands in :attr:`Bed.history`;
- **outer** (:meth:`Bed.wrap`): wrappers the driver adds on top, each outside
  the one before, such as stress's :class:`~chunk_adapter.bed.progress.Progress`,
  the explorer's switch points or a counter.

The order is what the drivers observe: a fault fires before the gate (a
failed call is never held), and the recording sees every call as the adapter
made it, faults included, so the oracles judge failed puts and gets too.

The bed also makes the ``build_payload`` builders (:meth:`Bed.builder`, on the
bed's history) and the adapters: :meth:`Bed.adapter` calls the factory with
the outermost connector, bounded when asked (a factory that hangs is then a
:class:`SlowFactory`, not a hung driver), and
:meth:`Bed.pair` makes the sender and the receiver of a pipeline, or one
loopback adapter. :meth:`Bed.release_all` opens every gate it handed out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..connectors import (
    FaultRule,
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
    RecordingConnector,
)
from ..connectors.base import Connector
from ..connectors.builders import BuildFn, identity_build
from ..errors import UsageError
from ..factory import AdapterFactory, AdapterLike
from ..history import History
from .waiting import Hang, call_bounded, call_in_thread

__all__ = [
    "FACTORY",
    "LOOPBACK_STAGE",
    "RECEIVER_STAGE",
    "SENDER_STAGE",
    "Bed",
    "SlowFactory",
]

C = TypeVar("C")

FACTORY = 15.0
"""Seconds a bounded factory call may take to build an adapter (slow is not a violation)."""
SENDER_STAGE = 0
"""The sender's stage: its keys are ``f"{request_id}_0_{chunk_id}"``."""
RECEIVER_STAGE = 1  # reads SENDER_STAGE's keys
LOOPBACK_STAGE = 1  # the loopback variant: one adapter, stage_id == src_stage_id
STOP_AFTER_FAILED_BUILD = 3.0
"""Seconds :meth:`Bed.pair` waits for the sender's ``stop()`` when the receiver's factory
call raised: clean-up, not a check (the factory's exception is what is reported)."""


class SlowFactory(Hang):
    """A bounded factory call did not return within its bound (:meth:`Bed.adapter`).

    A :class:`~chunk_adapter.bed.waiting.Hang` of the factory, not of an adapter:
    slow, which says nothing about the contract (the examples stage calls it
    inconclusive).
    """


class Bed:
    """The layers of one run in the fixed order (module doc); each layer optional.

    *consume_on_get*, *notify* and *keep_puts* (``MemoryConnector(history=...)``)
    configure the memory layer; *base* replaces it with another connector.
    *rules*, *put_rate*, *get_rate* and *seed* configure the faulty layer and
    need ``faulty=True``. ``record=True`` records into a new
    :class:`~chunk_adapter.history.History`; a History records into that one.
    """

    def __init__(
        self,
        *,
        consume_on_get: bool = False,
        notify: bool = False,
        keep_puts: int | None = 10_000,
        base: Connector | None = None,
        gated: bool = False,
        faulty: bool = False,
        rules: Iterable[FaultRule] = (),
        put_rate: float = 0.0,
        get_rate: float = 0.0,
        seed: int | None = None,
        record: bool | History = False,
    ) -> None:
        rules = tuple(rules)
        if not faulty and (rules or put_rate or get_rate or seed is not None):
            raise UsageError(
                f"Bed got fault options (rules={rules!r}, put_rate={put_rate!r}, "
                f"get_rate={get_rate!r}, seed={seed!r}) but no faulty layer: pass faulty=True"
            )
        self.memory: MemoryConnector | None = None
        """The memory layer (``None`` when the bed stands on a *base* connector)."""
        bottom: Connector
        if base is None:
            self.memory = MemoryConnector(
                consume_on_get=consume_on_get, notify=notify, history=keep_puts
            )
            bottom = self.memory
        else:
            bottom = base
        self._gated = GatedConnector(bottom) if gated else None
        below_faults: Connector = self._gated if self._gated is not None else bottom
        self._faulty = (
            FaultyConnector(
                below_faults, rules=rules, put_rate=put_rate, get_rate=get_rate, seed=seed
            )
            if faulty
            else None
        )
        below_record: Connector = self._faulty if self._faulty is not None else below_faults
        self._recording: RecordingConnector | None = None
        if record is not False:
            history = record if isinstance(record, History) else None
            self._recording = RecordingConnector(below_record, history)
        self.connector: Connector = self._recording if self._recording is not None else below_record
        """The outermost layer: what the factory gets."""
        self._builders: list[GatedBuilder] = []

    # -- the layers -------------------------------------------------------------

    @property
    def gated(self) -> GatedConnector:
        """The gated layer (``gated=True``)."""
        return _layer(self._gated, "gated")

    @property
    def faulty(self) -> FaultyConnector:
        """The faulty layer (``faulty=True``)."""
        return _layer(self._faulty, "faulty")

    @property
    def recording(self) -> RecordingConnector:
        """The recording layer (``record=True`` or a History)."""
        return _layer(self._recording, "record")

    @property
    def history(self) -> History:
        """The history the recording layer (and, by default, every builder) records into."""
        return self.recording.history

    def wrap(self, outer: Callable[[Connector], C]) -> C:
        """Put the outermost layer on: ``outer(connector)`` becomes :attr:`connector`.

        Returns it (typed as *outer* makes it). Called again, the next wrapper goes
        outside this one.
        """
        wrapped = outer(self.connector)
        self.connector = wrapped  # type: ignore[assignment]  # a wrapper is a Connector
        return wrapped

    # -- builders and adapters --------------------------------------------------

    def builder(
        self,
        fn: BuildFn = identity_build,
        *,
        recorded: bool = True,
        history: History | None = None,
    ) -> GatedBuilder:
        """A :class:`~chunk_adapter.connectors.GatedBuilder` that :meth:`release_all` opens.

        It records its builds into *history*, else into the bed's history if
        the bed records; ``recorded=False`` records none.
        """
        if recorded and history is None and self._recording is not None:
            history = self._recording.history
        builder = GatedBuilder(fn, history if recorded else None)
        self._builders.append(builder)
        return builder

    def adapter(
        self,
        factory: AdapterFactory,
        *,
        bound: float | None = None,
        what: str = "the factory",
        **kwargs: Any,
    ) -> AdapterLike:
        """``factory(connector, **kwargs)``; with *bound*, on a helper thread that may take
        at most *bound* seconds (:class:`SlowFactory` naming *what*); what the factory
        raises is re-raised here."""
        connector = self.connector
        if bound is None:
            return factory(connector, **kwargs)
        outcome = call_in_thread(lambda: factory(connector, **kwargs), bound, f"bounded-{what}")
        if not outcome.returned:
            raise SlowFactory(what, bound)
        if outcome.error is not None:
            raise outcome.error
        adapter: AdapterLike = outcome.value  # type: ignore[assignment]  # the factory returned
        return adapter

    def pair(
        self,
        factory: AdapterFactory,
        *,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        loopback: bool = False,
        **options: Any,
    ) -> tuple[AdapterLike, AdapterLike]:
        """``(sender, receiver)`` of a pipeline from *factory*, called on this thread.

        The sender (``stage_id=0``) gets *build_payload*; the receiver
        (``stage_id=1, src_stage_id=0``) never builds. ``loopback=True`` makes
        one adapter that receives its own chunks (``stage_id == src_stage_id ==
        1``), returned twice. *options* go to every factory call. When the
        receiver's factory call raises, the sender is stopped (bounded, quietly)
        and the exception propagates.
        """
        if loopback:
            one = self.adapter(
                factory,
                stage_id=LOOPBACK_STAGE,
                src_stage_id=LOOPBACK_STAGE,
                build_payload=build_payload,
                **options,
            )
            return one, one
        sender = self.adapter(
            factory, stage_id=SENDER_STAGE, build_payload=build_payload, **options
        )
        try:
            receiver = self.adapter(
                factory, stage_id=RECEIVER_STAGE, src_stage_id=SENDER_STAGE, **options
            )
        except BaseException:
            with contextlib.suppress(Exception):  # the factory's exception is the finding
                call_bounded(sender.stop, STOP_AFTER_FAILED_BUILD, "stop()")
            raise
        return sender, receiver

    def release_all(self) -> None:
        """Open every gate: the gated layer's and every builder's (teardown)."""
        if self._gated is not None:
            self._gated.release_all()
        for builder in self._builders:
            builder.release_all()

    def __repr__(self) -> str:
        return f"Bed({self.connector!r})"


L = TypeVar("L")


def _layer(layer: L | None, option: str) -> L:
    if layer is None:
        raise UsageError(f"this Bed has no {option!r} layer: build it with Bed({option}=True)")
    return layer
