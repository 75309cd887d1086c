"""Shape: ``make(connector, **options)`` reads what it needs and drops ``runtime=``.

Its signature accepts ``runtime=``, so a signature check says "white-box"; the
adapter never sees the runtime and uses ``threading`` in this module.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tests._adapters.plain import RecvPart, SendPart

__all__ = ["Adapter", "make"]


def make(connector: Any, **options: Any) -> Adapter:
    return Adapter(
        connector,
        options["stage_id"],
        options.get("src_stage_id"),
        options.get("build_payload"),
        wait_timeout=options.get("wait_timeout", 0.1),
        idle_backoff=options.get("idle_backoff", 0.001),
        put_tries=options.get("put_tries", 3),
    )


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it.
        self._stop = threading.Event()
        # Guards the FIFO, send ids and cancels; the SAVE thread waits on _send_cond.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._save = threading.Thread(target=self.save_loop, name="chunk-adapter-save", daemon=True)
        self._recv = threading.Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True)
        self._save.start()
        self._recv.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake(self._send_cond, self._recv_cond)
        self.join_all((self._save, self._recv), time.monotonic)
