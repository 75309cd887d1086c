"""The base class: the stop event, the sender's lock and the SAVE thread."""

from __future__ import annotations

import threading
from time import monotonic
from typing import Any

from .._parts import SendPart


class BaseAdapter(SendPart):
    def __init__(self, connector: Any, *, stage_id: int, src_stage_id: int | None = None,
                 build_payload: Any = None, **options: Any) -> None:  # fmt: skip
        self.set_options(connector, stage_id, src_stage_id, build_payload, **options)
        self.init_send()
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
        deadline = monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - monotonic()))

    def wake_all(self) -> None:
        with self._send_cond:
            self._send_cond.notify_all()
