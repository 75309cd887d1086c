"""Recording the scheduler's side: every call on an adapter as a :class:`CallRecord`.

:class:`RecordedAdapter` wraps any adapter. Each of the six calls is timed
with the shared :class:`~chunk_adapter.history.History` (so it orders against
the connector operations and builds recorded there) and appended as one
``CallRecord``. ``save_async`` records a deep copy of the object taken at the
call: the snapshot the contract says the payload must be built from (R4).
Exceptions are recorded and re-raised unchanged. :class:`RecordedPipeline`
records a sender and a receiver (two adapters) driven by one scheduler.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..bed.pair import AdapterPair
from ..factory import AdapterLike
from ..history import History

__all__ = ["UNCOPYABLE", "CallName", "CallRecord", "RecordedAdapter", "RecordedPipeline"]

CallName = Literal[
    "save_async", "cancel_sender", "load_async", "poll_ready", "cleanup_receiver", "stop"
]


class _Uncopyable:
    """Stands for the snapshot of an object ``copy.deepcopy`` rejected."""

    def __repr__(self) -> str:
        return "<uncopyable>"


UNCOPYABLE: Any = _Uncopyable()


@dataclass(frozen=True)
class CallRecord:
    """One scheduler call on an adapter.

    ``args`` is ``(snapshot, is_final)`` for ``save_async`` (the deep copy of
    the object at the call) and ``()`` otherwise. ``result`` is what
    ``poll_ready`` returned (a deep copy), else ``None``. ``error`` is the
    exception the call raised, if any. ``adapter`` names the adapter when one
    history records several (a sender and a receiver).
    """

    call: CallName
    request_id: str | None
    args: tuple[Any, ...]
    result: Any
    error: BaseException | None
    begin: int
    end: int
    thread: str
    adapter: str = "adapter"


class RecordedAdapter:
    """Wraps *adapter*; records each call into *history* (see module doc)."""

    def __init__(self, adapter: AdapterLike, history: History, name: str = "adapter") -> None:
        self.adapter = adapter
        self.history = history
        self.name = name

    def _record(
        self,
        call: CallName,
        request_id: Any,
        args: tuple[Any, ...],
        fn: Callable[[], Any],
        keep_result: bool = False,
    ) -> Any:
        def record(begin: int, result: Any, exc: BaseException | None, end: int) -> CallRecord:
            stored = None
            if keep_result and exc is None:
                try:
                    stored = copy.deepcopy(result)
                except Exception:  # record what we can; the oracle will flag odd results
                    stored = result
            return CallRecord(
                call=call,
                request_id=request_id,
                args=args,
                result=stored,
                error=exc,
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
                adapter=self.name,
            )

        result, exc = self.history.timed(fn, record)
        if exc is not None:
            raise exc
        return result

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        try:
            expected = copy.deepcopy(obj)
        except Exception:
            expected = UNCOPYABLE
        self._record(
            "save_async",
            request_id,
            (expected, is_final),
            lambda: self.adapter.save_async(request_id, obj, is_final),
        )

    def cancel_sender(self, request_id: str) -> None:
        self._record(
            "cancel_sender", request_id, (), lambda: self.adapter.cancel_sender(request_id)
        )

    def load_async(self, request_id: str) -> None:
        self._record("load_async", request_id, (), lambda: self.adapter.load_async(request_id))

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        ready: dict[str, list[dict[str, Any]]] = self._record(
            "poll_ready", None, (), self.adapter.poll_ready, keep_result=True
        )
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        self._record(
            "cleanup_receiver", request_id, (), lambda: self.adapter.cleanup_receiver(request_id)
        )

    def stop(self) -> None:
        self._record("stop", None, (), self.adapter.stop)

    def __enter__(self) -> RecordedAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)  # stats(), threads() ... pass through unrecorded

    def __repr__(self) -> str:
        return f"RecordedAdapter({self.adapter!r}, name={self.name!r})"


class RecordedPipeline(AdapterPair[RecordedAdapter]):
    """A sender and a receiver adapter, recorded into one history, driven as one scheduler.

    The sending calls (``save_async``, ``cancel_sender``) go to *sender*, the
    receiving ones (``load_async``, ``poll_ready``, ``cleanup_receiver``) to
    *receiver*, each through its own :class:`RecordedAdapter` (``"sender"``,
    ``"receiver"``), so the oracles judge each call against its own adapter's
    ``stop()``. ``stop()`` stops the sender, then the receiver. When *sender*
    is *receiver* (a loopback: one adapter receiving its own chunks) there is
    one recorded adapter, named ``"adapter"``.
    """

    def __init__(self, sender: AdapterLike, receiver: AdapterLike, history: History) -> None:
        if sender is receiver:
            one = RecordedAdapter(sender, history, "adapter")
            super().__init__(one, one)
        else:
            super().__init__(
                RecordedAdapter(sender, history, "sender"),
                RecordedAdapter(receiver, history, "receiver"),
            )

    @property
    def sides(self) -> list[RecordedAdapter]:
        """The recorded adapters, the sender first (one for a loopback)."""
        return [self.sender] if self.loopback else [self.sender, self.receiver]

    def __repr__(self) -> str:
        return f"RecordedPipeline({self.sender!r}, {self.receiver!r})"
