"""Design B, ``striped``: per-request state sharded over N stripe locks.

Every piece of per-request state — the sender's next id and cancel mark, the
receiver's registration (token, next id) and ready list — lives in the stripe
``hash(request_id) % N``, behind that stripe's own lock, so calls for requests in
different stripes never contend. Two structures are global and have their own
condition: the SAVE FIFO (one SAVE thread, save order) and the RECV polling queue
(entries ``(request_id, token)``). No code path ever holds two of these locks at once,
except the cross-shard operations, which take every stripe lock in ascending index
order (``poll_ready``, ``stats``) and nothing else while holding them.

``poll_ready`` swaps every stripe's ready dict out while holding all stripe locks, so
it is one atomic cut across the shards. The RECV thread checks the registration's
token under the stripe lock before a get and again, with the commit, in one critical
section after it: ``cleanup_receiver`` (which forgets under the same stripe lock) is a
commit fence.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ._common import Settings, check_final, check_rid


class _Stripe:
    __slots__ = ("lock", "marks", "next_ids", "ready", "regs")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_ids: dict[str, int] = {}
        self.marks: set[str] = set()
        self.regs: dict[str, list] = {}  # rid -> [token, next_id, done]
        self.ready: dict[str, list] = {}


class StripedAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        stripes: int = 8,
        **options: Any,
    ) -> None:
        self._s = Settings(connector, stage_id, src_stage_id, build_payload, **options)
        if isinstance(stripes, bool) or not isinstance(stripes, int) or not 1 <= stripes <= 1024:
            raise ValueError(f"stripes must be an int in 1..1024, got {stripes!r}")
        self.join_timeout = self._s.join_timeout
        self.put_tries = self._s.put_tries
        self._conn = connector
        self._stripes = [_Stripe() for _ in range(stripes)]
        self._stop = threading.Event()
        self._fifo: deque = deque()
        self._fcond = threading.Condition(threading.Lock())
        self._polling: deque = deque()
        self._pcond = threading.Condition(threading.Lock())
        self._save_thread = threading.Thread(
            target=self._save_main, name="striped-save", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_main, name="striped-recv", daemon=True
        )
        self._save_thread.start()
        self._recv_thread.start()

    def _stripe(self, request_id: str) -> _Stripe:
        return self._stripes[hash(request_id) % len(self._stripes)]

    def _check_running(self) -> None:
        if self._stop.is_set():
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------ sender side
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._check_running()
        snap = self._snapshot(obj, is_final)
        self._enqueue(request_id, snap, is_final)

    def _snapshot(self, obj: Any, is_final: bool) -> Any:
        return self._s.snapshot(obj)

    def _enqueue(self, request_id: str, snap: Any, is_final: bool) -> None:
        with self._fcond:
            self._fifo.append((request_id, snap, is_final))
            self._fcond.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        st = self._stripe(request_id)
        with st.lock:
            st.marks.add(request_id)

    def _take(self) -> tuple | None:
        with self._fcond:
            while not self._fifo and not self._stop.is_set():
                self._fcond.wait(self._s.wait_timeout)
            if self._stop.is_set():
                return None
            return self._fifo.popleft()

    def _save_main(self) -> None:
        while True:
            item = self._take()
            if item is None:
                return
            try:
                self._send(*item)
            except Exception:
                self._s.log.exception("striped: sending %r failed", item[0])

    def _build(self, rid: str, snap: Any, final: bool) -> tuple[bool, Any]:
        """(send it?, payload). A failed build drops a non-final; a final goes with None."""
        try:
            return True, self._s.build(rid, snap, final)
        except Exception:
            self._s.log.warning("striped: build of %r failed", rid, exc_info=True)
            return final, None

    def _send(self, rid: str, snap: Any, final: bool) -> None:
        st = self._stripe(rid)
        with st.lock:
            cancelled = rid in st.marks
            chunk_id = st.next_ids.get(rid, 0)
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            go, payload = self._build(rid, snap, final)
            if not go:
                return
        if self._skip(payload, final, cancelled):
            return
        key = self._s.send_key(rid, chunk_id)
        value = {"data": payload, "finished": final}
        failures = 0
        while True:
            if self._stop.is_set():
                return
            try:
                self._conn.put(key, value)
                break
            except Exception:
                failures += 1
                if not final and failures >= self._s.put_tries:
                    self._s.log.warning("striped: dropped %s after %d tries", key, failures)
                    return
                self._stop.wait(self._s.backoff(failures))
        with st.lock:
            if final:
                self._forget(st, rid)
            else:
                st.next_ids[rid] = chunk_id + 1

    def _skip(self, payload: Any, final: bool, cancelled: bool) -> bool:
        """R8: a non-final whose payload is None uses no id; a final always goes."""
        return payload is None and not final

    def _forget(self, st: _Stripe, rid: str) -> None:
        """Under st.lock, once rid's final is put: its id counter and cancel mark go."""
        st.next_ids.pop(rid, None)
        st.marks.discard(rid)

    # ------------------------------------------------------------ receiver side
    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        st = self._stripe(request_id)
        with st.lock:
            if request_id in st.regs:
                return
            token = object()
            st.regs[request_id] = [token, 0, False]
        with self._pcond:
            self._polling.append((request_id, token))
            self._pcond.notify()

    def cleanup_receiver(self, request_id: str) -> None:
        check_rid(request_id)
        st = self._stripe(request_id)
        with st.lock:
            st.regs.pop(request_id, None)
            st.ready.pop(request_id, None)

    def poll_ready(self) -> dict[str, list]:
        out: dict[str, list] = {}
        held = []
        try:
            for st in self._stripes:  # ascending order, every stripe
                st.lock.acquire()
                held.append(st)
            for st in self._stripes:
                if st.ready:
                    out.update(st.ready)
                    st.ready = {}
        finally:
            for st in reversed(held):
                st.lock.release()
        return out

    def _recv_main(self) -> None:
        while not self._stop.is_set():
            with self._pcond:
                while not self._polling and not self._stop.is_set():
                    self._pcond.wait(self._s.wait_timeout)
                n = len(self._polling)
            progress = False
            for _ in range(n):
                if self._stop.is_set():
                    return
                with self._pcond:
                    if not self._polling:
                        break
                    rid, token = self._polling.popleft()
                try:
                    outcome = self._poll_one(rid, token)
                except Exception:
                    self._s.log.exception("striped: polling %r failed", rid)
                    outcome = "again"
                if outcome == "committed":
                    progress = True
                if outcome in ("again", "committed"):
                    with self._pcond:
                        self._polling.append((rid, token))
                elif outcome == "done":
                    progress = True
            if not progress and not self._stop.is_set():
                self._stop.wait(self._s.idle_backoff)

    def _poll_one(self, rid: str, token: object) -> str:
        st = self._stripe(rid)
        with st.lock:
            reg = st.regs.get(rid)
            if reg is None or reg[0] is not token or reg[2]:
                return "stale"
            chunk_id = reg[1]
        key = self._s.recv_key(rid, chunk_id)
        try:
            value = self._conn.get(key)
        except Exception:
            self._s.log.warning("striped: get %s failed", key, exc_info=True)
            return "again"
        if value is None:
            return "again"
        with st.lock:
            reg = st.regs.get(rid)
            if reg is None or reg[0] is not token:
                return "stale"  # fetched for a registration cleaned up meanwhile
            st.ready.setdefault(rid, []).append(value)
            reg[1] += 1
            if value.get("finished"):
                reg[2] = True
                return "done"
        return "committed"

    # ------------------------------------------------------------ stop
    def stop(self) -> None:
        self._stop.set()
        with self._fcond:
            self._fcond.notify_all()
        with self._pcond:
            self._pcond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for t in (self._save_thread, self._recv_thread):
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> StripedAdapter:
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
) -> StripedAdapter:
    return StripedAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
