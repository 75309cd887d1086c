"""The abstract half of the base_sub adapter: lifecycle, the two workers, stop()."""

from __future__ import annotations

import abc
import logging
import threading
import time
from typing import Any

_log = logging.getLogger(__name__)


class ChunkAdapterBase(abc.ABC):
    """Owns the stop event and the SAVE/RECV threads; subclasses supply one iteration each.

    A subclass implements :meth:`save_iteration` and :meth:`recv_iteration` (each
    returns after at most a short wait, so the loop re-checks the stop event) and
    :meth:`wake_workers` (notify every condition the workers wait on).
    """

    def __init__(self, *, join_timeout: float = 1.0, name: str = "chunk") -> None:
        self.join_timeout = join_timeout
        self.stop_requested = threading.Event()
        self._workers: list[threading.Thread] = [
            threading.Thread(target=self._loop, args=(self.save_iteration,),
                             name=f"{name}-save", daemon=True),
            threading.Thread(target=self._loop, args=(self.recv_iteration,),
                             name=f"{name}-recv", daemon=True),
        ]  # fmt: skip

    def start(self) -> None:
        for worker in self._workers:
            worker.start()

    def _loop(self, iteration: Any) -> None:
        while not self.stop_requested.is_set():
            try:
                iteration()
            except Exception:
                _log.exception("worker iteration failed; carrying on")

    @abc.abstractmethod
    def save_iteration(self) -> None:
        """Wait briefly for one FIFO item and send it."""

    @abc.abstractmethod
    def recv_iteration(self) -> None:
        """Wait briefly for requests, then poll each once."""

    @abc.abstractmethod
    def wake_workers(self) -> None:
        """Notify every condition a worker may be waiting on."""

    # -- shared checks --

    @staticmethod
    def require_request_id(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request id must be str, got {request_id!r}")

    def require_running(self, call: str) -> None:
        if self.stop_requested.is_set():
            raise RuntimeError(f"{type(self).__name__}.{call}() after stop()")

    # -- lifecycle --

    def stop(self) -> None:
        self.stop_requested.set()
        self.wake_workers()
        deadline = time.monotonic() + self.join_timeout
        for worker in self._workers:
            if worker is threading.current_thread() or not worker.is_alive():
                continue
            worker.join(timeout=max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ChunkAdapterBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
