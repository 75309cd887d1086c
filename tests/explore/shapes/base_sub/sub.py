"""The subclass: the receiver, its own lock and RECV thread, ``from threading import ...``."""

from __future__ import annotations

from threading import Condition, Lock

from tests._adapters.plain import RecvPart

from .base import BaseAdapter


class Adapter(BaseAdapter, RecvPart):
    def make_threads(self) -> None:
        super().make_threads()
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = Lock()
        self._recv_cond = Condition(self._recv_lock)
        self.start_thread(self.recv_loop, "chunk-adapter-recv")

    def wake_all(self) -> None:
        super().wake_all()
        self.wake(self._recv_cond)
