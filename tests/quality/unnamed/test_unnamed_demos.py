"""Each unnamed adapter (tests/quality/unnamed) is broken, and sane otherwise.

One scripted demonstration per adapter shows its contract violation happening: the
connector wrappers (a recording ``Watch``, an ``Outage`` that ends when the test says
so, ``FaultyConnector``, ``GatedConnector``) and ``GatedBuilder`` order the run, and
every wait is bounded. Where the reference adapter gives the contract's outcome on the
same script cheaply, the test shows that too. The races (two_step_commit, burst,
batched) are forced with a gate; their docstrings say so. ``test_happy_path`` runs
every adapter through a plain stream of three chunks and a final.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import (
    FaultRule,
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
)
from chunk_adapter.connectors.base import Connector, ConnectorWrapper
from tests.quality.unnamed import (
    UNNAMED,
    batched,
    burst,
    config_factory,
    evented,
    keyed_inbox,
    lazy_cancel,
    patient,
    queue_worker,
    records,
    retiring,
    timed_build,
    two_step_commit,
)

Ready = dict[str, list[dict[str, Any]]]


class Watch(ConnectorWrapper):
    """Records every put and get of the adapters over it; tests wait on it (bounded)."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        # Guards the five lists; every append notifies it, and tests wait on it.
        self._cond = threading.Condition()
        self.put_calls: list[tuple[str, Any, float]] = []  # (key, data, when), even failed
        self.stored: list[tuple[str, dict[str, Any]]] = []  # puts that succeeded
        self.get_calls: list[tuple[str, float]] = []  # (key, when) as each get began
        self.answered: list[str] = []  # keys of the gets that returned (a value or None)
        self.got: list[str] = []  # keys whose get returned a value

    def _note(self, log: list[Any], entry: Any) -> None:
        with self._cond:
            log.append(entry)
            self._cond.notify_all()

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._note(self.put_calls, (key, value.get("data"), time.monotonic()))
        self.inner.put(key, value)
        self._note(self.stored, (key, value))

    def get(self, key: str) -> dict[str, Any] | None:
        self._note(self.get_calls, (key, time.monotonic()))
        value = self.inner.get(key)
        self._note(self.answered, key)
        if value is not None:
            self._note(self.got, key)
        return value

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def put_keys(self, prefix: str = "") -> list[str]:
        with self._cond:
            return [k for k, _ in self.stored if k.startswith(prefix)]

    def get_keys(self) -> set[str]:
        with self._cond:
            return {k for k, _ in self.get_calls}

    def data(self, prefix: str) -> list[Any]:
        with self._cond:
            return [v["data"] for k, v in self.stored if k.startswith(prefix)]

    def value(self, key: str) -> dict[str, Any] | None:
        with self._cond:
            return next((v for k, v in reversed(self.stored) if k == key), None)

    def calls(self, op: str, key: str) -> list[float]:
        with self._cond:
            if op == "put":
                return [t for k, _, t in self.put_calls if k == key]
            return [t for k, t in self.get_calls if k == key]

    def quiet(self, op: str, key: str, for_s: float, timeout: float) -> bool:
        """Wait until no *op* of *key* came for *for_s* seconds (after at least one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            times = self.calls(op, key)
            if times and time.monotonic() - times[-1] >= for_s:
                return True
            with self._cond:
                self._cond.wait(0.05)
        return False


class Outage(ConnectorWrapper):
    """Puts of ``puts`` and gets of ``gets`` raise ``ConnectionError`` until ``heal()``."""

    def __init__(
        self, inner: Connector, *, puts: Iterable[str] = (), gets: Iterable[str] = ()
    ) -> None:
        super().__init__(inner)
        self.puts, self.gets = set(puts), set(gets)
        self.healed = threading.Event()

    def heal(self) -> None:
        self.healed.set()

    def put(self, key: str, value: dict[str, Any]) -> None:
        if key in self.puts and not self.healed.is_set():
            raise ConnectionError(f"store down: put {key}")
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        if key in self.gets and not self.healed.is_set():
            raise ConnectionError(f"store down: get {key}")
        return self.inner.get(key)


@pytest.fixture
def keep() -> Iterator[Callable[[Any], Any]]:
    """Keeps the adapters a test makes, and stops them all at its end."""
    made: list[Any] = []

    def add(adapter: Any) -> Any:
        made.append(adapter)
        return adapter

    yield add
    for adapter in made:
        adapter.stop()


def save_stream(sender: Any, request_id: str, chunks: int) -> None:
    """``c0`` .. ``c{chunks-1}`` and a final ``"final"``."""
    for i in range(chunks):
        sender.save_async(request_id, f"c{i}", False)
    sender.save_async(request_id, "final", True)


def poll(receiver: Any, done: Callable[[Ready], bool], timeout: float = 5.0) -> Ready:
    """Call ``poll_ready`` as a scheduler does until *done* (or *timeout*): all it got."""
    got: Ready = {}
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not done(got) and time.monotonic() < deadline:
        for request_id, values in receiver.poll_ready().items():
            got.setdefault(request_id, []).extend(values)
        pause.wait(0.002)
    return got


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether *predicate* came true within *timeout* (checked every 2 ms)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        pause.wait(0.002)
    return True


def ended(request_id: str) -> Callable[[Ready], bool]:
    return lambda got: any(v["finished"] for v in got.get(request_id, []))


def data(got: Ready, request_id: str) -> list[Any]:
    return [v["data"] for v in got.get(request_id, [])]


# --------------------------------------------------------------- (a) configurations


@pytest.mark.rule("R1")
def test_config_factory_reads_stage_1_when_told_to_read_stage_0(keep: Any) -> None:
    conn = Watch(MemoryConnector())
    sender = keep(config_factory.make(conn, stage_id=0))
    receiver = keep(config_factory.make(conn, stage_id=2, src_stage_id=0))
    save_stream(sender, "r", 2)
    assert conn.wait_for(lambda: "r_0_2" in conn.put_keys())
    receiver.load_async("r")
    assert conn.wait_for(lambda: len(conn.get_calls) >= 3)
    asked = conn.get_keys()
    assert asked == {"r_1_0"}, asked  # R1: a stage-2 receiver of stage 0 must get r_0_0
    assert receiver.poll_ready() == {}
    reference = keep(ChunkAdapter(conn, stage_id=2, src_stage_id=0))
    reference.load_async("r")
    assert data(poll(reference, ended("r")), "r") == ["c0", "c1", "final"]


@pytest.mark.rule("R10")
def test_queue_worker_retries_a_chunk_that_put_tries_1_must_drop(keep: Any) -> None:
    def run(make: Any) -> Watch:
        flaky = FaultyConnector(MemoryConnector(), rules=[FaultRule("put", "r_0_0", times=1)])
        conn = Watch(flaky)
        sender = keep(make(conn, stage_id=0, put_tries=1))
        save_stream(sender, "r", 2)
        assert conn.wait_for(lambda: any(v["finished"] for _, v in conn.stored))
        return conn

    good = run(ChunkAdapter)
    assert good.data("r_") == ["c1", "final"]  # c0's one try failed: dropped; c1 takes id 0
    bad = run(queue_worker.make)
    assert [d for k, d, _ in bad.put_calls if k == "r_0_0"] == ["c0", "c0"]  # R10: retried
    assert bad.put_keys("r_") == ["r_0_0", "r_0_1", "r_0_2"]
    assert bad.data("r_") == ["c0", "c1", "final"]


@pytest.mark.rule("R17")
def test_evented_never_rings_a_request_id_with_an_underscore(keep: Any) -> None:
    """With the default re-poll (0.5 s) each chunk of ``job_7`` waits up to 0.5 s for it
    (R17); the 30 s re-poll here makes that wait outlast the test, so it shows as a stall."""
    conn = Watch(MemoryConnector(notify=True))
    sender = keep(evented.make(conn, stage_id=0))
    receiver = keep(evented.make(conn, stage_id=1, repoll_interval=30.0))
    receiver.load_async("plain")
    receiver.load_async("job_7")
    # Both catch-up gets came back empty: each registration now waits for a notification.
    assert conn.wait_for(lambda: {"plain_0_0", "job_7_0_0"} <= set(conn.answered))
    save_stream(sender, "plain", 2)
    save_stream(sender, "job_7", 2)
    assert conn.wait_for(lambda: {"plain_0_2", "job_7_0_2"} <= set(conn.put_keys()))
    got = poll(receiver, lambda g: ended("plain")(g) and ended("job_7")(g), timeout=1.5)
    assert data(got, "plain") == ["c0", "c1", "final"]
    assert data(got, "job_7") == []  # R17: its chunks wait for the re-poll (here: 30 s)
    assert len(conn.calls("get", "job_7_0_0")) == 1  # only the catch-up get at load_async
    store = MemoryConnector()  # on a polled connector the same request id is received
    polled = keep(evented.make(store, stage_id=1))
    for i, final in enumerate((False, False, True)):
        store.put(f"job_7_0_{i}", {"data": i, "finished": final})
    polled.load_async("job_7")
    assert data(poll(polled, ended("job_7")), "job_7") == [0, 1, 2]


# --------------------------------------------------------------- (b) long faults


@pytest.mark.slow
@pytest.mark.rule("R10", "R11")
def test_patient_gives_a_final_up_after_a_long_outage(keep: Any) -> None:
    outage = Outage(MemoryConnector(), puts={"r_0_1"})
    conn = Watch(outage)
    sender = keep(patient.make(conn, stage_id=0))
    sender.save_async("r", "c0", False)
    sender.save_async("r", "final", True)
    assert conn.wait_for(lambda: bool(conn.calls("put", "r_0_1")))
    # The final is retried at most 0.1 s apart; a second without a try means it was given up.
    assert conn.quiet("put", "r_0_1", for_s=1.0, timeout=10.0)
    tries = conn.calls("put", "r_0_1")
    assert tries[-1] - tries[0] >= 2.5, "it gave up only after seconds of failing puts"
    outage.heal()
    assert not conn.wait_for(lambda: "r_0_1" in conn.put_keys(), timeout=1.0)  # R10/R11: never put
    assert conn.put_keys("r_") == ["r_0_0"]


@pytest.mark.rule("R10")
def test_records_gives_the_next_chunk_up_after_one_failed_put(keep: Any) -> None:
    def run(make: Any) -> Watch:
        conn = Watch(FaultyConnector(MemoryConnector(), rules=[FaultRule("put", times=4)]))
        sender = keep(make(conn, stage_id=0))
        save_stream(sender, "r", 2)
        assert conn.wait_for(lambda: any(v["finished"] for _, v in conn.stored))
        return conn

    good = run(ChunkAdapter)  # 4 failures in a row: c0 dropped after 3, c1 in on its 2nd try
    assert good.data("r_") == ["c1", "final"]
    bad = run(records.make)
    assert [d for _, d, _ in bad.put_calls] == ["c0", "c0", "c0", "c1", "final"]
    assert bad.data("r_") == ["final"]  # R10: c1 was given up after ONE failed put


@pytest.mark.rule("R13")
def test_retiring_never_polls_again_after_a_long_get_outage(keep: Any) -> None:
    outage = Outage(MemoryConnector(), gets={"r_0_1"})
    conn = Watch(outage)
    sender = keep(ChunkAdapter(conn, stage_id=0))
    receiver = keep(retiring.make(conn, stage_id=1))
    save_stream(sender, "r", 2)
    assert conn.wait_for(lambda: "r_0_2" in conn.put_keys())
    receiver.load_async("r")
    assert conn.wait_for(lambda: len(conn.calls("get", "r_0_1")) >= 200, timeout=10.0)
    assert conn.quiet("get", "r_0_1", for_s=0.3, timeout=5.0)  # it polls every ~1 ms
    assert len(conn.calls("get", "r_0_1")) == 200
    outage.heal()
    got = poll(receiver, ended("r"), timeout=0.5)
    assert data(got, "r") == ["c0"]  # R13: c1 and the final are stored but never fetched
    assert len(conn.calls("get", "r_0_1")) == 200


@pytest.mark.slow
@pytest.mark.rule("R7")
def test_timed_build_puts_a_slow_final_with_data_none(keep: Any) -> None:
    builder = GatedBuilder()
    gate = builder.hold(predicate=lambda rid, snapshot, final: final)
    conn = Watch(MemoryConnector())
    sender = keep(timed_build.make(conn, stage_id=0, build_payload=builder))
    try:
        sender.save_async("r", "c0", False)
        sender.save_async("r", "final", True)
        assert gate.wait_started(5.0)
        assert conn.wait_for(lambda: "r_0_1" in conn.put_keys(), timeout=10.0)
        # R7: the final's build has not failed (it is still running, held at the gate).
        assert conn.value("r_0_1") == {"data": None, "finished": True}
        assert not gate.released.is_set()
    finally:
        gate.release()


# --------------------------------------------------------------- (c) races, forced


@pytest.mark.rule("R16")
def test_two_step_commit_commits_after_cleanup_returned(keep: Any) -> None:
    """The race between the token check and the commit is microseconds wide; a plain run
    does not hit it. The gate holds the RECV thread between the two lock sections."""
    conn = Watch(MemoryConnector())
    sender = keep(ChunkAdapter(conn, stage_id=0))
    receiver = keep(two_step_commit.make(conn, stage_id=1))
    checked, go = threading.Event(), threading.Event()
    check = receiver._still_registered

    def held_check(request_id: str, token: object, key: str) -> bool:
        current = bool(check(request_id, token, key))
        if current and not checked.is_set():
            checked.set()
            go.wait(5.0)
        return current

    receiver._still_registered = held_check
    sender.save_async("r", "c0", False)
    assert conn.wait_for(lambda: "r_0_0" in conn.put_keys())
    receiver.load_async("r")
    try:
        assert checked.wait(5.0)  # the get of r_0_0 returned c0 and passed the check
        receiver.cleanup_receiver("r")
    finally:
        go.set()
    got = poll(receiver, lambda g: "r" in g, timeout=2.0)
    assert data(got, "r") == ["c0"]  # R16: committed after cleanup_receiver returned


@pytest.mark.rule("R15", "R14")
def test_burst_appends_to_the_list_poll_ready_handed_out(keep: Any) -> None:
    """A poll_ready inside a burst is a race; the gate holds the burst's second get."""
    conn = Watch(MemoryConnector())
    gated = GatedConnector(conn)
    sender = keep(ChunkAdapter(conn, stage_id=0))
    save_stream(sender, "r", 3)
    assert conn.wait_for(lambda: "r_0_3" in conn.put_keys())
    gate = gated.hold_get("r_0_1")
    receiver = keep(burst.make(gated, stage_id=1))
    receiver.load_async("r")
    try:
        assert gate.wait_started(5.0)  # c0 committed; the burst waits in the get of r_0_1
        first = receiver.poll_ready()
        handed = data(first, "r")
    finally:
        gate.release()
    assert handed == ["c0"]
    # The burst goes on: c1, c2 and the final go into the list already handed out ...
    assert wait_until(lambda: len(first["r"]) == 4)
    assert data(first, "r") == ["c0", "c1", "c2", "final"]
    # ... and no later poll_ready hands them out (R14, R15).
    assert poll(receiver, ended("r"), timeout=0.5) == {}


@pytest.mark.rule("R6")
def test_batched_sends_a_batch_cancelled_while_it_was_sent(keep: Any) -> None:
    """Contract Example 3 with the SAVE thread busy when the request's chunks are queued,
    so that they are taken as one batch before the cancel comes."""

    def run(make: Any) -> list[Any]:
        builder = GatedBuilder()
        hold_x = builder.hold("x")
        conn = Watch(MemoryConnector())
        sender = keep(make(conn, stage_id=0, build_payload=builder))
        try:
            sender.save_async("x", "x0", True)
            assert hold_x.wait_started(5.0)  # the SAVE thread is busy with x
            for i in range(3):
                sender.save_async("w", f"p{i}", False)
            sender.save_async("w", "pF", True)
            hold_w = builder.hold("w")
            hold_x.release()
            assert hold_w.wait_started(5.0)  # p0 is being built
            sender.cancel_sender("w")
            hold_w.release()
            assert conn.wait_for(lambda: any(v["finished"] for _, v in conn.stored[1:]))
        finally:
            builder.release_all()
        return conn.data("w_")

    assert run(ChunkAdapter) in (["p0", None], [None])  # the contract's Example 3
    assert run(batched.make) == ["p0", "p1", "p2", "pF"]  # R6: put after cancel returned


# --------------------------------------------------------------- (d) other


@pytest.mark.rule("R15")
def test_keyed_inbox_hands_chunk_10_out_before_chunk_2(keep: Any) -> None:
    conn = Watch(MemoryConnector())
    sender = keep(keyed_inbox.make(conn, stage_id=0))
    receiver = keep(keyed_inbox.make(conn, stage_id=1))
    save_stream(sender, "r", 12)
    assert conn.wait_for(lambda: "r_0_12" in conn.put_keys())
    receiver.load_async("r")
    assert conn.wait_for(lambda: "r_0_12" in conn.got)  # chunks 0..11 are committed
    got = data(poll(receiver, ended("r")), "r")
    assert sorted(got, key=str) == sorted([f"c{i}" for i in range(12)] + ["final"])
    assert got[:4] == ["c0", "c1", "c10", "c11"]  # R15: not id order


@pytest.mark.rule("R6")
def test_lazy_cancel_forgets_a_cancel_made_before_the_first_save(keep: Any) -> None:
    def run(make: Any) -> list[Any]:
        conn = Watch(MemoryConnector())
        sender = keep(make(conn, stage_id=0))
        sender.cancel_sender("r")
        save_stream(sender, "r", 2)
        assert conn.wait_for(lambda: any(v["finished"] for _, v in conn.stored))
        return conn.data("r_")

    assert run(ChunkAdapter) == [None]  # R6/R27: the mark cuts the stream saved after it
    assert run(lazy_cancel.make) == ["c0", "c1", "final"]


# --------------------------------------------------------------- every adapter, plain


def _factory(spec: str) -> Any:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("spec", sorted(UNNAMED), ids=lambda s: s.rsplit(".", 1)[-1])
def test_happy_path(spec: str, keep: Any) -> None:
    """Three chunks and a final, each received before the next is saved (a scheduler that
    keeps up), from a stage-0 sender to a stage-1 receiver over a MemoryConnector."""
    make = _factory(spec)
    conn = Watch(MemoryConnector())
    sender = keep(make(conn, stage_id=0))
    receiver = keep(make(conn, stage_id=1, src_stage_id=0))
    receiver.load_async("req-1")
    got: list[dict[str, Any]] = []
    for i, final in enumerate((False, False, False, True)):
        sender.save_async("req-1", {"tokens": [i]}, final)
        more = poll(receiver, lambda g: "req-1" in g)
        assert list(more) == ["req-1"], f"chunk {i}: {more}"
        got.extend(more["req-1"])
    assert got == [{"data": {"tokens": [i]}, "finished": i == 3} for i in range(4)]
    assert conn.put_keys() == [f"req-1_0_{i}" for i in range(4)]
    assert receiver.poll_ready() == {}
    receiver.cleanup_receiver("req-1")
