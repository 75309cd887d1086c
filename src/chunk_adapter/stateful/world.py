"""The recorded world of one example: connectors, builder, and the adapters under test.

A :class:`~chunk_adapter.bed.Bed` of
``RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector)))`` and its
recording ``GatedBuilder`` share one :class:`WatchedHistory`. By default the
factory builds a **pipeline** of two adapters over that connector, as a real
deployment does: a sender (``stage_id=0``) that gets ``save_async`` and
``cancel_sender``, and a receiver (``stage_id=1, src_stage_id=0``) that gets
``load_async``, ``poll_ready`` and ``cleanup_receiver``; ``stop()`` stops
both. An adapter may keep per-request state shared by its own send and
receive sides (vllm-omni's does, and wipes it when a request ends): that is
correct in a pipeline, so the machines never make one adapter receive its own
chunks unless asked to (``loopback=True``: one adapter, ``stage_id ==
src_stage_id == 1``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from ..bed.crashes import Crash, thread_crashes
from ..bed.stack import LOOPBACK_STAGE, RECEIVER_STAGE, SENDER_STAGE, Bed
from ..bed.waiting import call_in_thread
from ..connectors import GatedBuilder
from ..factory import AdapterFactory, AdapterLike
from ..oracles import RecordedPipeline
from .watch import WatchedHistory

__all__ = [
    "CLOSE_BOUND",
    "LOOPBACK_STAGE",
    "RECEIVER_STAGE",
    "SENDER_STAGE",
    "STOP_BOUND",
    "World",
    "bounded",
]

STOP_BOUND = 20.0
"""Seconds a ``stop()`` may take before it is reported (R18): the contract allows its
join timeout (1 s by default); this is far above it, for a loaded machine."""
CLOSE_BOUND = 3.0
"""Seconds :meth:`World.close` waits for each ``stop()`` when an example ends: cleanup,
not a check (a hung ``stop()`` was reported by the step that called it)."""


def bounded(fn: Callable[[], object], seconds: float) -> tuple[bool, BaseException | None]:
    """Run *fn* on a helper daemon thread; ``(returned, exception)`` within *seconds*.

    A call that never returns is then a finding the caller names, not a hang.
    """
    outcome = call_in_thread(fn, seconds, "stateful-bounded-call")
    return outcome.returned, outcome.error


@dataclass
class World:
    """One example's connectors, builder and adapters (module doc)."""

    history: WatchedHistory
    bed: Bed
    builder: GatedBuilder
    sender: AdapterLike
    receiver: AdapterLike
    adapter: RecordedPipeline

    @property
    def loopback(self) -> bool:
        return self.sender is self.receiver

    @property
    def send_stage(self) -> int:
        return LOOPBACK_STAGE if self.loopback else SENDER_STAGE

    crashes: list[Crash]
    """The threads started since the world was built that died of an uncaught exception,
    from the factory call to :meth:`close` (:attr:`deaths` is what is judged of them)."""
    hooks: contextlib.ExitStack
    judged_until: int | None = None  # len(crashes) when stop() began (None: not yet)

    @property
    def deaths(self) -> list[Crash]:
        """The adapters' thread deaths that are judged (R22): those before ``stop()`` began,
        as stress judges them; a thread that ends badly while being stopped breaks nothing
        the contract says."""
        return self.crashes[: self.judged_until]

    def stopping(self) -> None:
        """``stop()`` begins: deaths from here on are not judged."""
        if self.judged_until is None:
            self.judged_until = len(self.crashes)

    @classmethod
    def build(cls, factory: AdapterFactory, *, loopback: bool = False) -> World:
        history = WatchedHistory()
        bed = Bed(consume_on_get=True, gated=True, faulty=True, record=history)
        builder = bed.builder()
        hooks = contextlib.ExitStack()
        deaths = hooks.enter_context(thread_crashes(chain=True, since_now=True))
        try:
            sender, receiver = bed.pair(factory, build_payload=builder, loopback=loopback)
        except BaseException:
            hooks.close()
            raise
        adapter = RecordedPipeline(sender, receiver, history)
        return cls(history, bed, builder, sender, receiver, adapter, deaths, hooks)

    def close(self) -> None:
        """Open every gate and stop the adapters, each stop bounded; errors ignored."""
        self.bed.release_all()
        for raw in [self.sender] if self.loopback else [self.sender, self.receiver]:
            with contextlib.suppress(Exception):  # after a failure, the failure is what matters
                bounded(raw.stop, CLOSE_BOUND)
        self.hooks.close()
