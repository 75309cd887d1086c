"""The adapter of the split package: ``import threading`` / ``import time`` here only."""

from __future__ import annotations

import threading
import time

from tests._adapters.plain import RecvPart, SendPart


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it; its wait() is the interruptible sleep.
        self._stop = threading.Event()
        # Guards the FIFO, send ids and cancels; the SAVE thread waits on _send_cond.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._threads = [
            threading.Thread(target=self.save_loop, name="chunk-adapter-save", daemon=True),
            threading.Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake(self._send_cond, self._recv_cond)
        self.join_all(self._threads, time.monotonic)
