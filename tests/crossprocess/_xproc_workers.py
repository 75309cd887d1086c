"""Sender and receiver processes for the cross-process tests (spawned, not forked).

Everything a child does is determined by the seed: :func:`make_plan` lists the
streams (length, cancel point) and :func:`payload` the data of each chunk, so
the parent knows what was saved without trusting the child. Values travel
back as digests (:func:`digest`), not as data.

The sender saves its plan (interleaving streams, cancelling some, saving a few
chunks after a cancel), optionally pausing after ``pause_after`` saves so the
parent can kill it mid-stream, and reports every successful put and the
sender-side oracle verdict. The receiver is driven by commands from the parent
(register, finals, drain, cleanup, stop) and answers each.

Both run the adapter named by ``adapter_spec`` through ``RecordedAdapter`` over a
``RecordingConnector`` and check their own side's history with the oracles.
"""

from __future__ import annotations

import hashlib
import pickle
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from chunk_adapter.bed.waiting import wait_until
from chunk_adapter.connectors import RecordingConnector, chunk_key
from chunk_adapter.factory import load_factory
from chunk_adapter.history import ConnectorOp, History
from chunk_adapter.oracles import RecordedAdapter, check

__all__ = [
    "HUGE",
    "SIZES",
    "Got",
    "Stream",
    "digest",
    "expected_chunks",
    "got_of",
    "make_connector",
    "make_plan",
    "payload",
    "receiver_main",
    "sender_main",
    "spin_reader_main",
]

POLL = 0.002  # pacing of the children's polling loops; every loop has a deadline
SENDER_STAGE, RECEIVER_STAGE = 1, 2

SIZES = (0, 64, 4096, 65536)  # payload blob sizes, default tier
HUGE = (0, 4096, 1 << 18, 1 << 20)  # slow tier: writes long enough to be killed mid-way

# (rid, finished, digest of the data, incarnation, chunk index) of one chunk
Got = tuple[str, bool, str, int, int]


@dataclass(frozen=True)
class Stream:
    """``length`` saves, the last one final; ``cancel_sender`` right before save ``cancel_at``."""

    rid: str
    length: int
    cancel_at: int | None


def make_plan(seed: int, streams: int, max_len: int, cancel_rate: float) -> list[Stream]:
    rnd = random.Random(f"plan:{seed}")
    plan = []
    for j in range(streams):
        length = rnd.randint(1, max_len)
        cancel = rnd.randint(0, length - 1) if rnd.random() < cancel_rate else None
        plan.append(Stream(f"req{j}", length, cancel))
    return plan


def payload(seed: int, inc: int, rid: str, i: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    rnd = random.Random(f"data:{seed}:{inc}:{rid}:{i}")
    return {"rid": rid, "inc": inc, "i": i, "blob": rnd.randbytes(rnd.choice(sizes))}


def digest(data: Any) -> str:
    return hashlib.sha1(pickle.dumps(data, protocol=4)).hexdigest()


def expected_chunks(
    seed: int, inc: int, stream: Stream, sizes: tuple[int, ...]
) -> list[tuple[bool, str]]:
    """(finished, digest) of every chunk the plan saves, before cancellation drops any."""
    out = []
    for i in range(stream.length):
        final = i == stream.length - 1
        cancelled = stream.cancel_at is not None and i >= stream.cancel_at
        data = None if (final and cancelled) else payload(seed, inc, stream.rid, i, sizes)
        out.append((final, digest(data)))
    return out


def got_of(rid: str, value: dict[str, Any]) -> Got:
    """The digest form of one wire value, as both sides report it."""
    data = value["data"]
    inc, index = (-1, -1) if data is None else (data["inc"], data["i"])
    return (rid, bool(value["finished"]), digest(data), inc, index)


def make_connector(spec: tuple[Any, ...], role: str = "parent") -> Any:
    """The connector *spec* names; a Redis client is named *role* (see ``CLIENT LIST``)."""
    kind = spec[0]
    if kind == "shm":
        from chunk_adapter.connectors.shm import SharedMemoryConnector

        return SharedMemoryConnector(spec[1], notify=spec[2])
    if kind == "redis":
        from chunk_adapter.connectors.redis import RedisConnector

        return RedisConnector(url=f"{spec[1]}?client_name={role}", prefix=spec[2], notify=spec[3])
    raise ValueError(f"unknown connector spec {spec!r}")


def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    wait_until(predicate, timeout, what, interval=POLL)


def _guard(pipe: Connection, body: Callable[[], None]) -> None:
    """Run *body*; any exception goes to the parent as ("error", traceback)."""
    try:
        body()
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
        raise


# ------------------------------------------------------------------- sender
def _puts_ok_at_least(rec: RecordingConnector, count: int) -> bool:
    return sum(1 for op in rec.ops() if op.op == "put" and op.outcome == "ok") >= count


def sender_main(*args: Any) -> None:
    """:func:`_sender` in the child: its arguments (the pipe last); errors go to the parent."""
    _guard(args[-1], lambda: _sender(*args))


def _sender(
    spec: tuple[Any, ...],
    adapter_spec: str,
    seed: int,
    plan: list[Stream],
    inc: int,
    sizes: tuple[int, ...],
    pause_after: int | None,
    pipe: Connection,
) -> None:
    conn = make_connector(spec, "sender")
    history = History()
    rec = RecordingConnector(conn, history)
    snd = RecordedAdapter(load_factory(adapter_spec)(rec, stage_id=SENDER_STAGE), history, "snd")
    rnd = random.Random(f"order:{seed}:{inc}")
    position = {s.rid: 0 for s in plan}
    streams = {s.rid: s for s in plan}
    open_ids = [s.rid for s in plan]
    saves = 0
    while open_ids:
        if saves == pause_after:
            # paused with a backlog: a quarter of these saves put, the rest still being put
            _until(partial(_puts_ok_at_least, rec, saves // 4), 60, "a quarter of saves put")
            pipe.send(("paused", saves))
            pipe.poll(120)  # the parent kills us here (bounded in case it does not)
            return
        rid = rnd.choice(open_ids)
        stream, i = streams[rid], position[rid]
        if stream.cancel_at == i:
            snd.cancel_sender(rid)
        final = i == stream.length - 1
        snd.save_async(rid, payload(seed, inc, rid, i, sizes), final)
        saves += 1
        position[rid] = i + 1
        if final:
            open_ids.remove(rid)
    finals = len(plan)
    _until(
        lambda: sum(1 for op in rec.ops() if op.op == "put" and op.outcome == "ok"
                    and op.value["finished"]) >= finals,
        60, "every final to be put",
    )  # fmt: skip
    violations = [str(v) for v in check(history, quiescent=True, put_tries=3)]
    puts: list[Got] = []
    for op in rec.ops():
        if op.op == "put" and op.outcome == "ok":
            puts.append(got_of(op.key.rsplit("_", 2)[0], op.value))
    pipe.send(("done", {"puts": puts, "violations": violations, "saves": saves}))
    if pipe.poll(120) and pipe.recv() == "close":
        snd.stop()
        pending = getattr(conn, "pending", lambda: 0)()
        conn.close()
        pipe.send(("closed", pending))


# ----------------------------------------------------------------- receiver
def receiver_main(spec: tuple[Any, ...], adapter_spec: str, pipe: Connection) -> None:
    _guard(pipe, lambda: _Receiver(spec, adapter_spec, pipe).serve())


class _Receiver:
    def __init__(self, spec: tuple[Any, ...], adapter_spec: str, pipe: Connection) -> None:
        self.conn = make_connector(spec, "receiver")
        self.history = History()
        rec = RecordingConnector(self.conn, self.history)
        adapter = load_factory(adapter_spec)(rec, stage_id=RECEIVER_STAGE)
        self.rcv = RecordedAdapter(adapter, self.history, "rcv")
        self.pipe = pipe
        self.got: dict[str, list[Got]] = {}
        self.cleaned: set[str] = set()  # cleaned up and not registered again
        self.stale: list[str] = []  # anything handed out for a cleaned-up request

    def collect(self) -> None:
        for rid, values in self.rcv.poll_ready().items():
            if rid in self.cleaned:
                self.stale.append(f"{rid}: {values!r}")
            self.got.setdefault(rid, []).extend(got_of(rid, v) for v in values)

    def has_final(self, rid: str) -> bool:
        chunks = self.got.get(rid)
        return bool(chunks) and chunks[-1][1]

    def serve(self) -> None:
        self.pipe.send(("ready", None))
        handlers: dict[str, Callable[[Any], tuple[str, Any]]] = {
            "register": self._register,
            "finals": self._finals,
            "drain": self._drain,
            "cleanup": self._cleanup,
            "stop": self._stop,
        }
        while True:
            if not self.pipe.poll(POLL):
                self.collect()
                continue
            command, arg = self.pipe.recv()
            self.pipe.send(handlers[command](arg))
            if command == "stop":
                return

    def _register(self, rids: list[str]) -> tuple[str, Any]:
        for rid in rids:
            self.cleaned.discard(rid)
            self.got.pop(rid, None)
            self.rcv.load_async(rid)
        return ("registered", None)

    def _finals(self, rids: list[str]) -> tuple[str, Any]:
        def all_final() -> bool:
            self.collect()
            return all(self.has_final(r) for r in rids)

        _until(all_final, 60, f"the finals of {len(rids)} streams")
        return ("finals", {r: self.got[r] for r in rids})

    def _cleanup(self, rids: list[str]) -> tuple[str, Any]:
        """cleanup_receiver each; reply with what was handed out before the fence."""
        self.collect()
        for rid in rids:
            self.rcv.cleanup_receiver(rid)
            self.cleaned.add(rid)
        return ("cleaned", {r: self.got.get(r, []) for r in rids})

    def _stop(self, _: Any) -> tuple[str, Any]:
        self.collect()
        self.rcv.stop()
        violations = [str(v) for v in check(self.history, quiescent=True)]
        self.conn.close()
        return ("stopped", {"violations": violations, "stale": self.stale})

    def _drain(self, rids: list[str]) -> tuple[str, Any]:
        """After the sender died: wait until the RECV thread has found each stream's next
        key empty (a get that returned nothing, begun after the death), so nothing
        committed is still waiting for these streams."""
        since = self.history.tick()

        def settled() -> bool:
            self.collect()
            empty = {
                op.key
                for op in self.history.records(ConnectorOp)
                if op.op == "get" and op.outcome == "none" and op.begin > since
            }
            return all(
                chunk_key(r, SENDER_STAGE, len(self.got.get(r, []))) in empty
                for r in rids
                if not self.has_final(r)
            )

        _until(settled, 60, "the streams of the dead sender to drain")
        return ("drained", {r: list(self.got.get(r, [])) for r in rids})


# ------------------------------------------------------------- spin reader
def spin_reader_main(namespace: str, keys: list[str], pipe: Connection) -> None:
    """Spin on get for each key in turn; report the digests, and any error, to the parent."""
    _guard(pipe, lambda: _spin_reader(namespace, keys, pipe))


def _spin_reader(namespace: str, keys: list[str], pipe: Connection) -> None:
    from chunk_adapter.connectors.shm import SharedMemoryConnector

    conn = SharedMemoryConnector(namespace)
    pipe.send(("ready", None))
    seen, misses = [], 0
    end = time.monotonic() + 60
    for i, key in enumerate(keys):
        first = True
        while (value := conn.get(key)) is None:  # a busy spin: the widest window for a race
            misses += 1
            if first:  # spinning on this key now: the writer may write it
                pipe.send(("waiting", i))
                first = False
            if time.monotonic() > end:
                raise TimeoutError(f"{key!r} never arrived")
        seen.append(digest(value))
    pipe.send(("seen", {"digests": seen, "misses": misses}))


def default_namespace_put_main(new_session: bool, key: str, pipe: Connection) -> None:
    """Put *key* through a connector on the default namespace, optionally from a new
    session (another process group: an unrelated pipeline); answer its namespace."""
    import os

    from chunk_adapter.connectors.shm import SharedMemoryConnector

    def body() -> None:
        if new_session:
            os.setsid()
        conn = SharedMemoryConnector()
        conn.put(key, {"data": os.getpid(), "finished": True})
        pipe.send(("namespace", conn.namespace))  # left for the parent; it purges

    _guard(pipe, body)
