"""The adapter of the split package: ``import threading`` / ``import time`` here only."""

from __future__ import annotations

import threading
import time
from typing import Any

from .._parts import RecvPart, SendPart


class Adapter(SendPart, RecvPart):
    def __init__(self, connector: Any, stage_id: int, src_stage_id: int | None,
                 build_payload: Any, **options: Any) -> None:  # fmt: skip
        self.set_options(connector, stage_id, src_stage_id, build_payload, **options)
        self.init_send()
        self.init_recv()
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
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
