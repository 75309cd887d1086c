"""Design A, ``mailbox``: message passing to state-owner threads.

The scheduler's calls never touch the workers' state. ``save_async`` and
``cancel_sender`` post messages to the SAVE owner's ``queue.SimpleQueue``;
``load_async`` and ``cleanup_receiver`` post to the RECV owner's. Each owner
thread is the only one that reads or writes its own bookkeeping (next ids, cancel
marks; registrations, the polling queue, the commit log), so neither needs a lock.

The SAVE owner drains every message waiting before it takes the next item to send,
so a cancel posted after a save is always seen before that save's item is taken.

The RECV owner drains its messages before every get (so the get is for the
registration as the scheduler last left it), commits what it gets to an append-only
log of ``(seq, request_id, token, value)`` and publishes it as an immutable
newest-first chain of pairs ``(entry, older)`` by one reference assignment (a commit
costs O(1); an ``ack`` rebuilds the chain without what was handed out). ``poll_ready``
never waits on the owner: it reads
the published tuple, hands out the entries past its own cursor (a sequence number)
whose token is still the scheduler's current token for that request, moves the cursor
and posts an ``ack`` so the owner trims the log. The scheduler-side token table is
what makes ``cleanup_receiver`` a commit fence: once it returns, no entry of the old
registration passes the filter, whenever the owner commits it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any

from ._common import Settings, check_final, check_rid

_STOP = ("stop",)


class MailboxAdapter:
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
        self._sq: queue.SimpleQueue = queue.SimpleQueue()  # -> SAVE owner
        self._rq: queue.SimpleQueue = queue.SimpleQueue()  # -> RECV owner
        # Scheduler-side state (only scheduler calls touch it; the lock is for several
        # scheduler threads and is never held across anything slow).
        self._slock = threading.Lock()
        self._current: dict[str, object] = {}  # request id -> token of its registration
        self._cursor = 0  # highest log seq handed out / skipped
        # Published by the RECV owner: an immutable newest-first chain
        # ((seq, rid, token, value), older) ... ending in None.
        self._published: tuple | None = None
        self.counters = {
            "puts": 0,
            "put_failures": 0,
            "dropped": 0,
            "build_failures": 0,
            "skipped": 0,
            "gets": 0,
            "get_failures": 0,
            "committed": 0,
        }
        self._save_thread = threading.Thread(
            target=self._save_main, name="mailbox-save", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_main, name="mailbox-recv", daemon=True
        )
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------ scheduler calls
    def _check_running(self) -> None:
        if self._stop.is_set():
            raise RuntimeError("adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._check_running()
        snap = self._s.snapshot(obj)
        self._sq.put(("item", request_id, snap, is_final))

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        self._sq.put(("cancel", request_id))

    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._check_running()
        with self._slock:
            if request_id in self._current:
                return
            token = object()
            self._current[request_id] = token
            self._rq.put(("load", request_id, token))

    def cleanup_receiver(self, request_id: str) -> None:
        check_rid(request_id)
        with self._slock:
            token = self._current.pop(request_id, None)
            if token is not None and not self._stop.is_set():
                self._rq.put(("cleanup", request_id, token))

    def poll_ready(self) -> dict[str, list]:
        with self._slock:
            node = self._published
            fresh = []
            while node is not None and node[0][0] > self._cursor:
                fresh.append(node[0])
                node = node[1]
            out: dict[str, list] = {}
            high = self._cursor
            for seq, rid, token, value in reversed(fresh):  # oldest first: id order
                high = seq
                if self._current.get(rid) is token:
                    out.setdefault(rid, []).append(value)
            if high > self._cursor:
                self._cursor = high
                if not self._stop.is_set():
                    self._rq.put(("ack", high))
            return out

    def stop(self) -> None:
        self._stop.set()
        self._sq.put(_STOP)
        self._rq.put(_STOP)
        deadline = time.monotonic() + self.join_timeout
        for t in (self._save_thread, self._recv_thread):
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> MailboxAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ SAVE owner
    def _apply_save_msg(self, msg: tuple, pending: deque, marks: set) -> None:
        if msg[0] == "item":
            pending.append(msg[1:])
        elif msg[0] == "cancel":
            marks.add(msg[1])

    def _drain_save(self, pending: deque, marks: set, block: bool) -> None:
        try:
            msg = self._sq.get(timeout=self._s.wait_timeout) if block else self._sq.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply_save_msg(msg, pending, marks)
            try:
                msg = self._sq.get_nowait()
            except queue.Empty:
                return

    def _has_work(self, pending: deque) -> bool:
        return bool(pending)

    def _take_next(self, pending: deque) -> tuple:
        return pending.popleft()

    def _save_main(self) -> None:
        pending: deque = deque()
        marks: set = set()
        next_ids: dict[str, int] = {}
        while not self._stop.is_set():
            self._drain_save(pending, marks, block=not self._has_work(pending))
            if self._stop.is_set():
                break
            if not self._has_work(pending):
                continue
            rid, snap, final = self._take_next(pending)
            try:
                self._send(rid, snap, final, marks, next_ids)
            except Exception:  # never let one chunk end the owner
                self._s.log.exception("mailbox: sending %r failed", rid)
        self._on_save_stop(pending, marks, next_ids)

    def _on_save_stop(self, pending: deque, marks: set, next_ids: dict) -> None:
        """What stop() abandons stays abandoned (counted, not put)."""
        self.counters["dropped"] += len(pending)

    def _wire_value(self, payload: Any, final: bool, cancelled: bool) -> dict:
        return {"data": payload, "finished": final}

    def _send(self, rid: str, snap: Any, final: bool, marks: set, next_ids: dict) -> None:
        cancelled = rid in marks
        if cancelled and not final:
            self.counters["dropped"] += 1
            return
        payload = None
        if not cancelled:
            try:
                payload = self._s.build(rid, snap, final)
            except Exception:
                self.counters["build_failures"] += 1
                self._s.log.warning("mailbox: build of %r failed", rid, exc_info=True)
                if not final:
                    self.counters["dropped"] += 1
                    return
                payload = None
        if payload is None and not final:
            self.counters["skipped"] += 1
            return
        chunk_id = next_ids.get(rid, 0)
        self._put(
            self._s.send_key(rid, chunk_id),
            self._wire_value(payload, final, cancelled),
            final,
            chunk_id,
            rid,
            marks,
            next_ids,
        )

    def _put(
        self,
        key: str,
        value: dict,
        final: bool,
        chunk_id: int,
        rid: str,
        marks: set,
        next_ids: dict,
    ) -> None:
        failures = 0
        while True:
            if self._stop.is_set():
                return
            try:
                self._conn.put(key, value)
            except Exception:
                failures += 1
                self.counters["put_failures"] += 1
                if not final and failures >= self._s.put_tries:
                    self.counters["dropped"] += 1
                    self._s.log.warning("mailbox: dropped %s after %d tries", key, failures)
                    return
                self._stop.wait(self._s.backoff(failures))
                continue
            break
        self.counters["puts"] += 1
        if final:
            next_ids.pop(rid, None)
            marks.discard(rid)
        else:
            next_ids[rid] = chunk_id + 1

    # ------------------------------------------------------------ RECV owner
    def _drain_recv(self, st: dict, block: bool) -> None:
        try:
            msg = self._rq.get(timeout=self._s.wait_timeout) if block else self._rq.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply_recv_msg(msg, st)
            try:
                msg = self._rq.get_nowait()
            except queue.Empty:
                return

    def _apply_recv_msg(self, msg: tuple, st: dict) -> None:
        kind = msg[0]
        regs, polling = st["regs"], st["polling"]
        if kind == "load":
            _, rid, token = msg
            regs[rid] = [token, 0]
            polling.append((rid, token))
        elif kind == "cleanup":
            _, rid, token = msg
            reg = regs.get(rid)
            if reg is not None and reg[0] is token:
                del regs[rid]
            if any(e[2] is token for e in st["log"]):
                st["log"] = [e for e in st["log"] if e[2] is not token]
                self._publish_all(st)
        elif kind == "ack":
            acked = msg[1]
            st["log"] = [e for e in st["log"] if e[0] > acked]
            self._publish_all(st)

    def _publish_all(self, st: dict) -> None:
        head = None
        for entry in st["log"]:
            head = (entry, head)
        self._published = head

    def _recv_main(self) -> None:
        st: dict = {"regs": {}, "polling": deque(), "log": [], "seq": 0}
        while not self._stop.is_set():
            polling = st["polling"]
            self._drain_recv(st, block=not polling)
            progress = False
            for _ in range(len(polling)):
                if self._stop.is_set():
                    return
                self._drain_recv(st, block=False)
                if not polling:
                    break
                rid, token = polling.popleft()
                reg = st["regs"].get(rid)
                if reg is None or reg[0] is not token:
                    continue  # a registration cleaned up: its entry goes
                key = self._s.recv_key(rid, reg[1])
                try:
                    self.counters["gets"] += 1
                    value = self._conn.get(key)
                except Exception:
                    self.counters["get_failures"] += 1
                    self._s.log.warning("mailbox: get %s failed", key, exc_info=True)
                    value = None
                if value is None:
                    polling.append((rid, token))
                    continue
                progress = True
                self._commit(st, rid, token, reg, value)
            if polling and not progress and not self._stop.is_set():
                # a short pause; a message (load, cleanup, ack, stop) ends it early
                try:
                    msg = self._rq.get(timeout=self._s.idle_backoff)
                except queue.Empty:
                    continue
                self._apply_recv_msg(msg, st)

    def _commit(self, st: dict, rid: str, token: object, reg: list, value: dict) -> None:
        st["seq"] += 1
        entry = (st["seq"], rid, token, value)
        st["log"].append(entry)
        self._published = (entry, self._published)
        self.counters["committed"] += 1
        reg[1] += 1
        if value.get("finished"):
            del st["regs"][rid]  # done: never polled again (the scheduler keeps the token)
        else:
            st["polling"].append((rid, token))


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> MailboxAdapter:
    return MailboxAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
