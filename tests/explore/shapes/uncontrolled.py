"""Adapters the explorer cannot control, for its detection (never correct or broken).

``HiddenThread`` starts its RECV thread through a ``_thread.start_new_thread``
it captured as a default argument when the module was imported, so neither the
patches nor the name rebinding reach it (as with a thread a C extension
starts). ``RealGate`` makes its SAVE thread wait on a ``threading.Event`` made
at import time, outside any execution: a real block the explorer cannot see.
"""

from __future__ import annotations

import _thread
import threading
import time
from typing import Any

from tests._adapters.plain import RecvPart, SendPart

__all__ = ["GATE", "HiddenThread", "RealGate", "make_hidden", "make_real_gate"]

GATE = threading.Event()  # made at import: a real event; never set


class _Base(SendPart, RecvPart):
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
        self._save.start()
        self.start_recv()

    def start_recv(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self.wake(self._send_cond, self._recv_cond)
        self._save.join(self.join_timeout)


class HiddenThread(_Base):
    def start_recv(self, _spawn: Any = _thread.start_new_thread) -> None:
        _spawn(self._quiet_recv, ())

    def _quiet_recv(self) -> None:
        try:
            self.recv_loop()
        except BaseException:  # the explorer refuses it; die quietly, it has been noted
            return


class RealGate(_Base):
    def start_recv(self) -> None:
        self._recv = threading.Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True)
        self._recv.start()

    def send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        GATE.wait(5.0)  # a real wait: 5 s of real time whatever the virtual clock says
        super().send_one(request_id, snap, is_final, cancelled)

    def stop(self) -> None:
        super().stop()
        self.join_all([self._recv], time.monotonic)


def make_hidden(connector: Any, **kwargs: Any) -> HiddenThread:
    return HiddenThread(connector, **kwargs)


def make_real_gate(connector: Any, **kwargs: Any) -> RealGate:
    return RealGate(connector, **kwargs)
