"""The base class: the stop event, the sender's lock and the SAVE thread."""

from __future__ import annotations

import threading
from time import monotonic
from typing import Any

from tests._adapters.plain import SendPart


class BaseAdapter(SendPart):
    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it.
        self._stop = threading.Event()
        # Guards the FIFO, send ids and cancels; the SAVE thread waits on _send_cond.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        self._threads: list[threading.Thread] = []
        self.start_thread(self.save_loop, "chunk-adapter-save")

    def start_thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self.wake_all()
        self.join_all(self._threads, monotonic)

    def wake_all(self) -> None:
        self.wake(self._send_cond)
