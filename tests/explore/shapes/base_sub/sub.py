"""The subclass: the receiver, its own lock and RECV thread, ``from threading import ...``."""

from __future__ import annotations

from threading import Condition, Lock
from typing import Any

from .._parts import RecvPart
from .base import BaseAdapter


class Adapter(BaseAdapter, RecvPart):
    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        self.init_recv()
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = Lock()
        self._recv_cond = Condition(self._recv_lock)
        self.start_thread(self.recv_loop, "chunk-adapter-recv")

    def wake_all(self) -> None:
        super().wake_all()
        with self._recv_cond:
            self._recv_cond.notify_all()
