"""The soak's sender (benchmarks/soak.py): a reference ChunkAdapter at stage 0 fed
orders over a pipe.

On shared memory and Redis it runs in a process of its own (:func:`sender_process`,
spawned), which the soak kills with SIGKILL and starts again; on the memory
connector in a thread of the soak's process (:func:`sender_loop`, the same loop).

The protocol, one message a line each way (a ``multiprocessing`` pipe):

* soak -> sender: ``("order", Order)``, ``("stop",)`` (no more orders: drain and
  stop the adapter), ``("exit",)`` (the receiver has everything: close the connector,
  which on shared memory unlinks what it put that nobody consumed);
* sender -> soak: ``(kind, stream ids, report)`` with kind ``ready``, ``finished``
  (``flush()`` returned ``True`` after the streams' finals were saved: every chunk of
  them is put or counted), ``unflushed`` (it returned ``False``), ``stopped`` or
  ``failed`` (the adapter refused work: a thread of it died). The report is the
  adapter's ``stats()``, the faults injected, whether both threads are alive and how
  many CRITICAL lines the adapter logged.

Faults on this side: puts fail at random (``PUT_RATE``) and in bursts (the next
``PUT_BURST`` puts, before a batch with probability ``PUT_BURST_P``) through
:class:`~chunk_adapter.connectors.FaultyConnector`; builds fail where the order says
(:func:`soak_streams.build`). ``PUT_TRIES`` is high enough that no burst and no Redis
restart of the soak can exhaust a non-final's tries (R10), so a chunk is missing only
when its build failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from reliability_probe import _open  # this folder is on sys.path (run as a script, spawned)
from soak_streams import BuildFault, Order, build

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import Connector, FaultyConnector

__all__ = ["LogWatch", "sender_loop", "sender_process"]

PUT_RATE = 0.01  # random put failures
PUT_BURST_P, PUT_BURST = 0.03, (3, 20)  # a burst before a batch: this many puts fail
PUT_TRIES = 200  # backoff 5 ms doubling to 100 ms: ~20 s of tries, past every outage made
PACE = 0.002  # up to this long between two saves, so that a kill lands mid-stream
BATCH = 32  # orders taken at most per batch
WAIT = 0.05  # how long the loop waits for an order before looking again


class LogWatch(logging.Handler):
    """The adapter's WARNING lines and worse to stderr, tagged (``chunk_adapter`` logger),
    but for the planned build failures; ``count`` counts the CRITICAL ones (R30: a
    thread of an adapter died)."""

    def __init__(self, tag: str) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter(f"[{tag}] %(levelname)s %(name)s: %(message)s"))
        self.count = 0
        logging.getLogger("chunk_adapter").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.count += record.levelno >= logging.CRITICAL
        planned = record.exc_info is not None and isinstance(record.exc_info[1], BuildFault)
        if not planned:  # a planned build failure is logged at ERROR, with its traceback
            sys.stderr.write(self.format(record) + "\n")

    def close(self) -> None:
        logging.getLogger("chunk_adapter").removeHandler(self)
        super().close()


def sender_process(where: tuple[str, str, str], seed: int, settle: float, pipe: Connection) -> None:
    """A sender process's life (spawned): open the connector, run :func:`sender_loop`,
    close the connector once told to exit (or when the soak is gone)."""
    logs = LogWatch(f"sender {where[0]} pid {os.getpid()}")
    conn = _open(where)
    try:
        sender_loop(conn, seed, settle, pipe, lambda: logs.count)
    finally:
        conn.close()


def sender_loop(
    conn: Connector, seed: int, settle: float, pipe: Connection, criticals: Callable[[], int]
) -> None:
    """Take orders, send each batch's streams interleaved, flush, report (module doc).
    *criticals* says how many CRITICAL lines the adapter logged so far."""
    rnd = random.Random(seed)
    faulty = FaultyConnector(conn, put_rate=PUT_RATE, seed=rnd.getrandbits(32))
    snd = ChunkAdapter(faulty, stage_id=0, build_payload=build, put_tries=PUT_TRIES)
    bursts = [0]

    def report(alive: bool | None = None) -> dict[str, Any]:
        live = all(t.is_alive() for t in snd.threads()) if alive is None else alive
        return {
            **snd.stats().as_dict(),
            "put_faults": faulty.injected["put"],
            "put_bursts": bursts[0],
            "alive": live,
            "critical": criticals(),
        }

    try:
        pipe.send(("ready", [], report()))
        stopping = False
        while not stopping:
            orders, stopping = _take_orders(pipe)
            if not orders:
                continue
            if rnd.random() < PUT_BURST_P:
                faulty.fail_next("put", times=rnd.randint(*PUT_BURST))
                bursts[0] += 1
            _save_interleaved(snd, orders, rnd)
            done = snd.flush(2 * settle)
            kind = "finished" if done else "unflushed"
            pipe.send((kind, [o.sid for o in orders], report()))
        alive = all(t.is_alive() for t in snd.threads())
        snd.stop(drain_timeout=settle)
        pipe.send(("stopped", [], report(alive)))
        pipe.recv()  # "exit": the receiver has taken everything
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the soak is gone
    except Exception as exc:  # AdapterFailed: a thread of the adapter died (R30)
        with contextlib.suppress(OSError):
            pipe.send(("failed", [], {**report(), "error": repr(exc)}))
    finally:
        snd.stop()


def _take_orders(pipe: Connection) -> tuple[list[Order], bool]:
    """The orders waiting (at most ``BATCH``; none after ``WAIT`` s without one) and
    whether the soak said stop."""
    orders: list[Order] = []
    stopping = False
    ready = pipe.poll(WAIT)
    while ready and len(orders) < BATCH and not stopping:
        message = pipe.recv()
        if message[0] == "order":
            orders.append(message[1])
        elif message[0] == "stop":
            stopping = True
        else:
            raise ValueError(f"sender: unexpected message {message!r} from the soak")
        ready = pipe.poll(0)
    return orders, stopping


def _save_interleaved(snd: ChunkAdapter, orders: list[Order], rnd: random.Random) -> None:
    """Save the orders' chunks, each stream in order, the streams interleaved at random,
    up to ``PACE`` s apart."""
    left = {o.sid: deque((o, i) for i in range(o.chunks + 1)) for o in orders}
    while left:
        sid = rnd.choice(list(left))
        order, i = left[sid].popleft()
        if not left[sid]:
            del left[sid]
        snd.save_async(sid, order.snapshot(i), i == order.chunks)
        time.sleep(rnd.uniform(0, PACE))
