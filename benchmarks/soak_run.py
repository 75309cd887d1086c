"""The soak of one connector (benchmarks/soak.py has the whole story): :class:`Soak`.

The soak's loop is the receiver's scheduler: one thread orders streams from the
sender (``WINDOW`` at a time), injects the faults of its side, kills and restarts the
sender and the redis-server, hands what the receiver gets to the ledger
(soak_ledger.py), samples, and at the end runs the checks that nothing leaked.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from operator_probe import rss_mib, until  # this folder is on sys.path (run as a script)
from soak_ledger import OUTCOMES, Ledger
from soak_parts import Backend, Incarnation
from soak_sender import LogWatch
from soak_streams import Order, Sabotage

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.bench import churn
from chunk_adapter.connectors import FaultyConnector

__all__ = ["Settings", "Soak"]

WINDOW = 8  # streams in flight at once (a killed sender's are set apart)
MAX_CHUNKS = 12  # non-final chunks of a stream: 0 .. 12
SIZES = (8, 256, 4096)  # bytes of a chunk's payload
BUILD_FAIL = 0.03  # a chunk's build raises
GET_RATE = 0.01  # random get failures
GET_BURST_EVERY, GET_BURST = (2.0, 6.0), (5, 60)  # the next 5-60 gets fail, every 2-6 s
KILL_EVERY = (4.0, 12.0)  # seconds between a sender's start and its SIGKILL
RESTART_EVERY, DOWN = (15.0, 35.0), (0.1, 1.5)  # redis-server: restarts, seconds down
GRACE = 1.0  # after a restart, streams ordered within this are still exposed to it
POLL = 0.001  # pacing of the soak's loop (it polls; every wait has a deadline)
# The live store (entries of streams in flight) stays within churn's bound, so its
# verdict (RSS after warm-up, store and depths bounded) applies as it stands.
assert WINDOW * (MAX_CHUNKS + 1) <= churn.IDS * (churn.CHUNKS + 1) and WINDOW <= churn.IDS
SENDER_FIGURES = (
    "chunks_put", "finals_put", "put_failures", "put_retries", "build_failures",
    "dropped_build_failed", "dropped_put_failed", "dropped_put_rejected", "finals_degraded",
    "finals_failed", "abandoned",
)  # fmt: skip
RECV_FIGURES = ("gets", "get_failures", "committed", "stale_discarded", "stalls_reported")
DEPTHS = (
    "save_queue_depth", "save_in_flight", "save_parked", "save_held", "cancel_marks",
    "open_streams", "poll_queue_depth", "registered", "ready_chunks", "stalled", "draining",
)  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """One connector's soak: how long, the seed, the bound for a stream (``settle``,
    soak_ledger.py), seconds between samples, and the self-test's sabotage mode."""

    seconds: float
    seed: int
    settle: float
    interval: float
    sabotage: str | None = None


class Soak:
    """The soak of one connector (module doc); :meth:`run` returns its summary."""

    def __init__(self, backend: Backend, settings: Settings, out: TextIO) -> None:
        self.b, self.seconds, self.out = backend, settings.seconds, out
        self.settle, self.interval = settings.settle, settings.interval
        self.rnd = random.Random(f"soak:{settings.seed}:{backend.name}")
        self.failures: list[str] = []
        self.reports: dict[int, dict[str, Any]] = {}  # each sender's last report
        self.samples: list[churn.Sample] = []
        self.windows: list[list[float]] = []  # redis-server down .. back + GRACE (run's s)
        self.kills = self.restarts = self.get_bursts = self.planned_fails = 0
        self.held_back: list[float] = []  # how long shm restarts waited (_maybe_restart)
        self.holding = False  # the next start waits for the killed sender's streams
        self.sender: Incarnation | None = None  # None between a kill and the next start
        self.dead: Incarnation | None = None  # the last one killed
        self.down_until: float | None = None  # the redis-server is down until then
        self.end: dict[str, Any] = {}  # the end checks' findings
        self.logs = LogWatch(f"soak {backend.name}")
        inner = backend.receiver
        if settings.sabotage is not None:  # the self-test: one received value spoiled
            inner = Sabotage(inner, settings.sabotage)
        self.faulty = FaultyConnector(inner, get_rate=GET_RATE, seed=self.rnd.getrandbits(32))
        self.rcv = ChunkAdapter(self.faulty, stage_id=1)
        self.ledger = Ledger(self.rcv, backend.names, self.settle)

    # ------------------------------------------------------------------ the run
    def run(self) -> dict[str, Any]:
        self.t0 = now = time.monotonic()
        self.next_sample = now
        self.next_burst = now + self.rnd.uniform(*GET_BURST_EVERY)
        self.next_crash = now + self.rnd.uniform(0.2, 0.5) * min(self.seconds, 40.0)
        try:
            self._start_sender()
            while time.monotonic() < self.t0 + self.seconds and not self.failures:
                self._step(chaos=True)
            self._wind_down()
            self._end_checks()
        finally:
            self.rcv.stop()
            if self.sender is not None:
                self.sender.kill()
                self.sender.pipe.close()
            self.logs.close()
        return self._summary()

    def _step(self, chaos: bool) -> None:
        now = time.monotonic()
        if chaos:
            self._chaos(now)
        self._read_sender(now)
        if chaos:
            self._refill(now)
        self.ledger.receive()
        self.ledger.expire(now)
        self._sample(now)
        time.sleep(POLL)

    # -------------------------------------------------------------------- chaos
    def _chaos(self, now: float) -> None:
        if now >= self.next_burst:
            self.faulty.fail_next("get", times=self.rnd.randint(*GET_BURST))
            self.get_bursts += 1
            self.next_burst = now + self.rnd.uniform(*GET_BURST_EVERY)
        sender = self.sender
        if sender is not None and sender.kill_at is not None and now >= sender.kill_at:
            self._kill(sender, now)
        if self.b.outage is not None:
            self._redis(now)

    def _kill(self, sender: Incarnation, now: float) -> None:
        """SIGKILL the sender; what it reported before dying still counts."""
        sender.kill()
        for message in sender.messages():
            self._on_message(sender, message, now)
        sender.pipe.close()
        self.ledger.killed(sender.number, now)
        self.kills += 1
        self.dead, self.sender = sender, None

    def _maybe_restart(self, now: float) -> None:
        """Start the next sender; on shm only once the streams the killed one reported
        have arrived (its successor reclaims what it left unconsumed, docs/connectors.md
        "Crashed writers"), or ``settle`` passed (they are lost then)."""
        dead = self.dead
        assert dead is not None, "no sender, and none was killed"
        waiting = self.b.reclaims and self.ledger.awaited(dead.number)
        if waiting and now < dead.killed_at + self.settle:
            self.holding = True
            return
        if self.holding:
            self.held_back.append(time.monotonic() - dead.killed_at)
            self.holding = False
        self._start_sender()

    def _start_sender(self) -> None:
        number = len(self.reports) + 1
        self.reports[number] = {}
        self.sender = self.b.start(number, self.rnd.getrandbits(32), self.settle)

    def _redis(self, now: float) -> None:
        outage = self.b.outage
        assert outage is not None
        if self.down_until is None and now >= self.next_crash:
            outage.down()
            self.down_until = now + self.rnd.uniform(*DOWN)
            self.windows.append([now - self.t0, now - self.t0])
            self.ledger.expose_all()
        elif self.down_until is not None and now >= self.down_until:
            outage.up()
            self.restarts += 1
            self.down_until = None
            back = time.monotonic()
            self.windows[-1][1] = back + GRACE - self.t0
            self.next_crash = back + self.rnd.uniform(*RESTART_EVERY)

    def _exposed(self, now: float) -> bool:
        """Is a stream ordered now exposed to a redis-server restart (down, or back for
        less than ``GRACE``)?"""
        if self.down_until is not None:
            return True
        return bool(self.windows) and now - self.t0 <= self.windows[-1][1]

    # ------------------------------------------------------------------- sender
    def _refill(self, now: float) -> None:
        sender = self.sender
        while sender is not None and not sender.closed and self.ledger.in_flight() < WINDOW:
            order = self._new_order()
            try:
                self.ledger.open(order, now, sender.number, self._exposed(now))
            except Exception as exc:  # AdapterFailed: its RECV thread died (R30)
                self.failures.append(f"dead: the receiver refused load_async: {exc!r}")
                return
            self.planned_fails += len(order.fails)
            sender.send(("order", order))

    def _new_order(self) -> Order:
        rnd = self.rnd
        chunks = rnd.randint(0, MAX_CHUNKS)
        fails = frozenset(i for i in range(chunks + 1) if rnd.random() < BUILD_FAIL)
        sid = f"{rnd.getrandbits(128):032x}"  # a uuid's 128 bits, from the seeded random
        return Order(sid, chunks, fails, rnd.choice(SIZES))

    def _read_sender(self, now: float) -> None:
        sender = self.sender
        if sender is None:
            self._maybe_restart(now)
            return
        for message in sender.messages():
            self._on_message(sender, message, now)
        if sender.closed and not sender.stopped and not self.failures:
            self.failures.append(
                f"dead: sender {sender.number} ended on its own (exit code {sender.exitcode()})"
            )

    def _on_message(self, sender: Incarnation, message: tuple[Any, ...], now: float) -> None:
        kind, sids, report = message
        self.reports[sender.number] = report
        if not report.get("alive", True) or report.get("critical"):
            self.failures.append(f"dead: sender {sender.number} reported a dead thread")
        if kind == "ready" and self.b.kills:
            sender.kill_at = now + self.rnd.uniform(*KILL_EVERY)
        elif kind in ("finished", "unflushed"):
            self.ledger.reported(sids, now, flushed=kind == "finished")
        elif kind == "stopped":
            sender.stopped = True
        elif kind == "failed":
            self.failures.append(f"dead: sender {sender.number}: {report.get('error')}")

    # ------------------------------------------------------------------ samples
    def _sample(self, now: float) -> None:
        if now < self.next_sample:
            return
        self.next_sample += self.interval
        entries = self._entries()
        apart = self.ledger.orphans | self.ledger.set_apart()
        report, r = self._report(), self.rcv.stats()
        last = self.samples[-1].store if self.samples else 0
        sample = churn.Sample(
            t=round(now - self.t0, 1),
            rss_mib=round(rss_mib(), 1),
            store=last if entries is None else len(entries - apart),
            streams=self.ledger.tally["started"],
            open_streams=report.get("open_streams", 0),
            cancel_marks=report.get("cancel_marks", 0),
            registered=r.registered,
            save_pending=sum(report.get(k, 0) for k in DEPTHS[:4]),
        )
        self.samples.append(sample)
        extra = {
            "store_all": None if entries is None else len(entries),
            **{k: v for k, v in self.ledger.tally.items() if k != "started"},
            "kills": self.kills,
            "restarts": self.restarts,
            "get_faults": self.faulty.injected["get"],
        }
        print(json.dumps({"connector": self.b.name, **asdict(sample), **extra}), file=self.out)
        self.out.flush()

    def _entries(self) -> set[str] | None:
        try:
            return self.b.entries()
        except Exception:  # redis-server down: the sample keeps the last size
            return None

    def _report(self) -> dict[str, Any]:
        sender = self.sender
        return self.reports.get(sender.number, {}) if sender is not None else {}

    # ---------------------------------------------------------------- the end
    def _wind_down(self) -> None:
        """No more orders and faults: the sender drains and stops, every open stream
        ends (complete, or by its bound)."""
        if self.down_until is not None:  # the server must be up for the end checks
            self.down_until = time.monotonic()
            self._redis(self.down_until)
        limit = 4 * self.settle + 60
        deadline, told = time.monotonic() + limit, False
        while time.monotonic() < deadline and not self.failures:
            sender = self.sender
            if sender is not None and not told:
                told = sender.send(("stop",))
            if not self.ledger.tracks and sender is not None and sender.stopped:
                return
            self._step(chaos=False)
        if not self.failures:
            self.failures.append(
                f"stuck: {len(self.ledger.tracks)} stream(s) still open and the sender "
                f"{'stopped' if self.sender and self.sender.stopped else 'not stopped'} "
                f"{limit:.0f} s after the end"
            )

    def _end_checks(self) -> None:
        """Nothing leaked: threads, depths, the store, RSS (module doc)."""
        rcv, end = self.rcv, self.end
        if not all(t.is_alive() for t in rcv.threads()):
            self.failures.append("dead: a receiver thread is not alive")
        if self.logs.count:
            self.failures.append(f"dead: {self.logs.count} CRITICAL line(s) logged")
        until(lambda: not _depths(rcv.stats().as_dict()), self.settle)
        end["depths_not_zero"] = {**_depths(rcv.stats().as_dict()), **_depths(self._report())}
        if end["depths_not_zero"]:
            self.failures.append(f"leaked: depths not back to 0: {end['depths_not_zero']}")
        entries = self._entries() or set()  # the sender's adapter stopped, not yet closed
        leaked = sorted(entries - self.ledger.orphans)
        end.update(store_left=len(entries), store_leaked=len(leaked))
        if self.sender is not None and self.sender.send(("exit",)):
            self.sender.join(self.settle)  # it closes its connector, then exits
        rcv.stop()
        end["store_after_close"] = len(self._entries() or ())
        if leaked:
            self.failures.append(
                f"leaked: {len(leaked)} store entries of no stream that ended incomplete, "
                f"e.g. {leaked[:3]}"
            )
        end["rss"] = churn._verdict(self.samples)  # churn's own verdict (module doc)
        if end["rss"]["flat"] is False:
            self.failures.append(f"leaked: {end['rss']['summary']}")
        self._account()

    def _account(self) -> None:
        """What the ledger saw against the adapters' counters: the streams judged wrong,
        and on a run without kills or restarts every planned build failure raised once
        and every chunk put was committed."""
        for kind, count in self.ledger.failed().items():
            self.failures.append(f"{kind}: {count} stream(s)")
        if self.kills or self.restarts:
            return
        sent = _sum_reports(self.reports.values())
        committed = self.rcv.stats().committed
        if (sent.get("build_failures"), sent.get("chunks_put")) != (self.planned_fails, committed):
            self.failures.append(
                f"lost: the counters disagree: {sent.get('build_failures')} builds raised of "
                f"{self.planned_fails} planned, {sent.get('chunks_put')} chunks put and "
                f"{committed} committed"
            )

    def _summary(self) -> dict[str, Any]:
        sent, tally = _sum_reports(self.reports.values()), self.ledger.tally
        return {
            "connector": self.b.name,
            "seconds": self.seconds,
            "streams_started": tally["started"],
            "finished_by_sender": tally["finished"],
            "exposed_to_restart": tally["exposed"],
            **{k: tally[k] for k in OUTCOMES},
            "faults": {
                "put": sent.get("put_faults", 0),
                "put_bursts": sent.get("put_bursts", 0),
                "get": self.faulty.injected["get"],
                "get_bursts": self.get_bursts,
                "build": sent.get("build_failures", 0),
                "build_planned": self.planned_fails,
            },
            "kills": self.kills,
            "restarts_held_back": len(self.held_back),
            "held_back_s": round(sum(self.held_back), 2),
            "redis_restarts": self.restarts,
            "restart_windows_s": [[round(a, 1), round(b, 1)] for a, b in self.windows],
            "sender": {k: sent.get(k, 0) for k in SENDER_FIGURES},
            "receiver": {k: v for k, v in self.rcv.stats().as_dict().items() if k in RECV_FIGURES},
            **{k: v for k, v in self.end.items() if k != "rss"},
            "rss": self.end.get("rss", {}).get("summary"),
            "held": not self.failures,
            "failures": self.failures,
            "problems": self.ledger.problems,
        }


def _depths(stats: dict[str, Any]) -> dict[str, int]:
    """The depths of a ``stats()`` dict that are not 0."""
    return {k: stats[k] for k in DEPTHS if stats.get(k)}


def _sum_reports(reports: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The counters of every sender's last report, added up."""
    total: dict[str, int] = {}
    for report in reports:
        for k, v in report.items():
            if isinstance(v, int) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + v
    return total
