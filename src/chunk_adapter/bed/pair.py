"""A sender and a receiver adapter, driven as the one adapter a scheduler sees.

Every driver builds a pipeline as a real deployment does: the factory under
test makes a sender (``stage_id=0``) and a receiver (``stage_id=1,
src_stage_id=0``), or one loopback adapter that receives its own chunks. The
scheduler calls both through one object: the sending calls (``save_async``,
``cancel_sender``) go to :attr:`AdapterPair.sender`, the receiving ones
(``load_async``, ``poll_ready``, ``cleanup_receiver``) to
:attr:`AdapterPair.receiver`; ``stop()`` stops the sender, then the receiver.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ..factory import AdapterLike

__all__ = ["AdapterPair"]

A = TypeVar("A", bound=AdapterLike)


class AdapterPair(Generic[A]):
    """Route the six contract calls to *sender* or *receiver* (the same object for a loopback)."""

    def __init__(self, sender: A, receiver: A) -> None:
        self.sender: A = sender
        self.receiver: A = receiver

    @property
    def loopback(self) -> bool:
        """One adapter receives its own chunks (``sender is receiver``)."""
        return self.sender is self.receiver

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self.sender.save_async(request_id, obj, is_final)

    def cancel_sender(self, request_id: str) -> None:
        self.sender.cancel_sender(request_id)

    def load_async(self, request_id: str) -> None:
        self.receiver.load_async(request_id)

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        return self.receiver.poll_ready()

    def cleanup_receiver(self, request_id: str) -> None:
        self.receiver.cleanup_receiver(request_id)

    def stop(self) -> None:
        """Stop the sender, then the receiver (also when the sender's stop raised)."""
        try:
            self.sender.stop()
        finally:
            if not self.loopback:
                self.receiver.stop()

    def __enter__(self) -> AdapterPair[A]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
