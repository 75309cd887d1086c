"""Design C, ``timer_rounds``: receive rounds driven by a chain of ``threading.Timer``s.

There is no long-lived RECV thread. Each receive round runs on its own
``threading.Timer`` (a daemon); at its end, under the receive lock, it either arms
the next round — at once (delay 0) after progress, after ``idle_backoff`` (1 ms)
otherwise — or, when nothing is left to poll, disarms the chain. ``load_async``
arms a round under the same lock when the chain is disarmed, so "nothing to poll"
and "a registration arrives" are decided in one critical section and no wake-up is
lost; an idle adapter has no thread on the receive side at all.

``stop()`` sets the stop event, cancels the armed timer and joins the round that is
running (and any it armed just before seeing the event), all against one deadline
shared with the SAVE thread's join. A round checks the event under the lock before
arming, so no round is armed after ``stop()`` has looked.

The send side is one SAVE thread over a deque FIFO with its own condition; its put
retries wait on the stop event, so ``stop()`` interrupts a backoff.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ._common import Settings, check_final, check_rid


class TimerRoundsAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        **options: Any,
    ) -> None:
        self._s = Settings(connector, stage_id, src_stage_id, build_payload, **options)
        self.join_timeout = self._s.join_timeout
        self.put_tries = self._s.put_tries
        self._conn = connector
        self._stop = threading.Event()
        # send side
        self._fifo: deque = deque()
        self._scond = threading.Condition(threading.Lock())
        self._next_ids: dict[str, int] = {}
        self._marks: set[str] = set()
        # receive side
        self._rlock = threading.Lock()
        self._regs: dict[str, list] = {}  # rid -> [token, next_id, done]
        self._ready: dict[str, list] = {}
        self._polling: deque = deque()
        self._timer: threading.Timer | None = None  # the armed or running round
        self.rounds = 0
        self._save_thread = threading.Thread(target=self._save_main, name="timer-save", daemon=True)
        self._save_thread.start()

    def _check_running(self) -> None:
        if self._stop.is_set():
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------ sender side
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._check_running()
        snap = self._s.snapshot(obj)
        with self._scond:
            self._fifo.append((request_id, snap, is_final))
            self._scond.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        with self._scond:
            self._marks.add(request_id)

    def _save_main(self) -> None:
        while True:
            with self._scond:
                while not self._fifo and not self._stop.is_set():
                    self._scond.wait(self._s.wait_timeout)
                if self._stop.is_set():
                    return
                rid, snap, final = self._fifo.popleft()
                cancelled = rid in self._marks
                chunk_id = self._next_ids.get(rid, 0)
            self._send(rid, snap, final, cancelled, chunk_id)  # builds and puts guard themselves

    def _send(self, rid: str, snap: Any, final: bool, cancelled: bool, chunk_id: int) -> None:
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            try:
                payload = self._s.build(rid, snap, final)
            except Exception:
                self._s.log.warning("timer_rounds: build of %r failed", rid, exc_info=True)
                if not final:
                    return
                payload = None
        if payload is None and not final:
            return
        key = self._s.send_key(rid, chunk_id)
        if self._put_with_retries(rid, key, {"data": payload, "finished": final}, final):
            with self._scond:
                if final:
                    self._next_ids.pop(rid, None)
                    self._marks.discard(rid)
                else:
                    self._next_ids[rid] = chunk_id + 1

    def _put_with_retries(self, rid: str, key: str, value: dict, final: bool) -> bool:
        failures = 0
        while not self._stop.is_set():
            try:
                self._conn.put(key, value)
                return True
            except Exception:
                failures += 1
                if not final and failures >= self._s.put_tries:
                    self._s.log.warning("timer_rounds: dropped %s after %d tries", key, failures)
                    return False
                if self._give_up_final(rid, final):
                    return False
                self._stop.wait(self._s.backoff(failures))
        return False

    def _give_up_final(self, rid: str, final: bool) -> bool:
        return False  # a final is retried until it is put or stop()

    # ------------------------------------------------------------ receiver side
    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        with self._rlock:
            if request_id in self._regs:
                return
            token = object()
            self._regs[request_id] = [token, 0, False]
            self._polling.append((request_id, token))
            if self._timer is None:
                self._arm(0.0)

    def cleanup_receiver(self, request_id: str) -> None:
        check_rid(request_id)
        with self._rlock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def poll_ready(self) -> dict[str, list]:
        with self._rlock:
            out, self._ready = self._ready, {}
        return out

    def _arm(self, delay: float) -> None:
        """Under _rlock: start the next round (never after stop)."""
        if self._stop.is_set():
            self._timer = None
            return
        t = threading.Timer(delay, self._round)
        t.daemon = True
        t.name = "timer-round"
        self._timer = t
        t.start()

    def _after_get_error(self, key: str) -> str:
        """A failed get is retried later, like an empty one (and is not progress)."""
        return "again"

    def _round_delay(self, progress: bool) -> float:
        return 0.0 if progress else self._s.idle_backoff

    def _round(self) -> None:
        self.rounds += 1
        progress = False
        try:
            progress = self._round_body()
        finally:  # whatever happened, the chain goes on (or is disarmed) under the lock
            with self._rlock:
                if self._timer is not threading.current_thread():
                    return  # stop() took over  # noqa: B012 (the author's design)
                if not self._polling or self._stop.is_set():
                    self._timer = None
                    return  # noqa: B012
                self._arm(self._round_delay(progress))

    def _round_body(self) -> bool:
        progress = False
        with self._rlock:
            n = len(self._polling)
        for _ in range(n):
            if self._stop.is_set():
                break
            with self._rlock:
                if not self._polling:
                    break
                rid, token = self._polling.popleft()
                reg = self._regs.get(rid)
                if reg is None or reg[0] is not token or reg[2]:
                    continue
                chunk_id = reg[1]
            key = self._s.recv_key(rid, chunk_id)
            try:
                value = self._conn.get(key)
            except Exception:
                self._s.log.warning("timer_rounds: get %s failed", key, exc_info=True)
                value = None
                outcome = self._after_get_error(key)
                if outcome == "drop":
                    continue
                progress = progress or outcome == "again_now"
            with self._rlock:
                reg = self._regs.get(rid)
                if reg is None or reg[0] is not token:
                    continue  # cleaned up while the get was in flight: discard
                if value is None:
                    self._polling.append((rid, token))
                    continue
                self._ready.setdefault(rid, []).append(value)
                reg[1] += 1
                progress = True
                if value.get("finished"):
                    reg[2] = True
                else:
                    self._polling.append((rid, token))
        return progress

    # ------------------------------------------------------------ stop
    def stop(self) -> None:
        self._stop.set()
        with self._scond:
            self._scond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        if self._save_thread is not threading.current_thread():
            self._save_thread.join(max(0.0, deadline - time.monotonic()))
        while True:
            with self._rlock:
                t = self._timer
            if t is None or t is threading.current_thread():
                return
            t.cancel()
            t.join(max(0.0, deadline - time.monotonic()))
            with self._rlock:
                if self._timer is t:
                    if not t.is_alive():
                        self._timer = None
                    return
            if time.monotonic() >= deadline:
                return

    def __enter__(self) -> TimerRoundsAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> TimerRoundsAdapter:
    return TimerRoundsAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
