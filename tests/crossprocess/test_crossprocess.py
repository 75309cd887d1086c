"""A sender process and a receiver process streaming through shared memory and Redis.

Each child runs the adapter under test (``--adapter``) recorded into its own
History and checks its side with the oracles; the parent checks across the
processes: what the receiver was handed equals what the sender put, stream by
stream, and both match the seeded plan (cancelled streams: a prefix of the
chunks saved before the cancel, then a ``None`` final). Killing the sender
mid-stream leaves the receiver with exact prefixes, no partial chunk, and no
stale commit after ``cleanup_receiver``; a restarted sender's streams arrive
whole. Nothing is left in /dev/shm or Redis afterwards, and no process warns.

Rules: R2, R6, R9, R11, R12, R14, R16, R23 across processes.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from chunk_adapter.connectors.doorbell import Doorbell
from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.connectors.shm import SharedMemoryConnector
from tests.crossprocess._xproc_workers import (
    HUGE,
    SIZES,
    Got,
    Stream,
    digest,
    expected_chunks,
    make_connector,
    make_plan,
    receiver_main,
    sender_main,
    spin_reader_main,
)

CTX = multiprocessing.get_context("spawn")
TIMEOUT = 90.0  # for any one answer from a child: generous, never expected


class Child:
    """A spawned process and the parent's end of its pipe."""

    def __init__(self, name: str, target: Callable[..., None], *args: Any) -> None:
        self.name = name
        self.pipe, child_end = CTX.Pipe()
        self.proc = CTX.Process(target=target, args=(*args, child_end), name=name, daemon=True)
        self.proc.start()
        child_end.close()

    def expect(self, tag: str, context: str, timeout: float = TIMEOUT) -> Any:
        if not self.pipe.poll(timeout):
            raise AssertionError(f"{self.name}: no {tag!r} within {timeout} s ({context})")
        got, payload = self.pipe.recv()
        if got == "error":
            raise AssertionError(f"{self.name} failed ({context}):\n{payload}")
        assert got == tag, f"{self.name}: expected {tag!r}, got {got!r} ({context})"
        return payload

    def ask(self, command: str, arg: Any, reply: str, context: str) -> Any:
        self.pipe.send((command, arg))
        return self.expect(reply, context)

    def finish(self) -> None:
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        self.pipe.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    made: list[Child] = []
    yield made
    for child in made:
        child.finish()


@pytest.fixture(params=["shm", "shm-notify", "redis", "redis-notify"])
def transport(request: pytest.FixtureRequest) -> Iterator[tuple[Any, ...]]:
    """A connector spec for the children, and a checker of leftovers for the parent."""
    if request.param.startswith("shm"):
        namespace = request.getfixturevalue("shm_namespace")
        yield ("shm", namespace, request.param == "shm-notify")
        if request.param == "shm-notify":  # no subscriber socket left behind either
            directory = Doorbell(namespace).directory
            assert not os.path.exists(directory) or os.listdir(directory) == []
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = request.getfixturevalue("redis_prefix")
    yield ("redis", server.url, prefix, request.param == "redis-notify")


def leftovers(spec: tuple[Any, ...], *, committed: bool | None = None) -> list[str]:
    conn = make_connector(spec)
    try:
        if spec[0] == "shm":
            return list(conn.segments(committed=committed))
        return list(conn.keys())
    finally:
        conn.close()


@dataclass(frozen=True)
class Shape:
    """How big a run is: streams, their longest length, payload sizes, cancel rate."""

    streams: int
    max_len: int
    sizes: tuple[int, ...] = SIZES
    cancel_rate: float = 0.3


def wait_until_gone(spec: tuple[Any, ...], role: str, timeout: float = 30.0) -> None:
    """Wait until Redis has dropped every connection of *role* (and so ran its last commands)."""
    conn = make_connector(spec)
    try:
        end = time.monotonic() + timeout
        while any(c.get("name") == role for c in conn.client.client_list()):
            assert time.monotonic() < end, f"Redis still serves a dead {role} after {timeout} s"
            time.sleep(0.002)
    finally:
        conn.close()


def check_stream(
    stream: Stream, chunks: list[Got], seed: int, inc: int, sizes: tuple[int, ...], *, whole: bool
) -> None:
    """*chunks* is the plan's stream (``whole``) or an exact prefix of it (sender killed)."""
    expected = expected_chunks(seed, inc, stream, sizes)
    got = [(finished, d) for _, finished, d, _, _ in chunks]
    where = f"stream {stream} (seed={seed}, incarnation {inc})"
    if stream.cancel_at is None:
        if whole:
            assert got == expected, f"{where}: received {got} != saved {expected}"
        else:
            assert got == expected[: len(got)], f"{where}: {got} is no prefix of {expected}"
        return
    # cancelled: a prefix of the chunks saved before the cancel, then a None final (R6)
    assert got and got[-1] == (True, digest(None)), f"{where}: final missing or not None: {got}"
    body = got[:-1]
    assert len(body) <= stream.cancel_at, f"{where}: a chunk saved after the cancel arrived"
    assert body == expected[: len(body)], f"{where}: {body} is no prefix of {expected}"


def quiet(err: str) -> None:
    for noise in ("resource_tracker", "leaked shared_memory", "Traceback", "UserWarning"):
        assert noise not in err, f"a process complained on stderr:\n{err}"


@pytest.mark.rule("R2")
def test_a_reader_process_never_sees_a_partial_shared_memory_value(
    shm_namespace: str, children: list[Child], seed: int
) -> None:
    """Another process spinning on get while megabyte values are written: whole or nothing.

    (In one process the GIL hides a wrong write order; across processes it cannot.)
    """
    rnd = random.Random(seed)
    values = [
        {"data": rnd.randbytes(rnd.choice([1 << 16, 1 << 20, 1 << 22])), "finished": False}
        for _ in range(24)
    ]
    keys = [f"big_1_{i}" for i in range(len(values))]
    reader = Child("reader", spin_reader_main, shm_namespace, keys)
    children.append(reader)
    reader.expect("ready", f"seed={seed}")
    with SharedMemoryConnector(shm_namespace) as writer:
        for i, (key, value) in enumerate(zip(keys, values, strict=True)):
            assert reader.expect("waiting", f"seed={seed}") == i  # it spins on this key now
            writer.put(key, value)
        seen = reader.expect("seen", f"seed={seed}")
    differ = [i for i, v in enumerate(values) if seen["digests"][i] != digest(v)]
    assert not differ, f"values {differ} differ from what was put (seed={seed})"
    assert seen["misses"] >= len(keys), "every key was polled before it was written"


def stream_across(
    transport: tuple[Any, ...], adapter_spec: str, children: list[Child], shape: Shape, seed: int
) -> None:
    """Stream a seeded plan from a sender process to a receiver process; check both sides."""
    context = f"seed={seed}, transport={transport[0]}, {shape}"
    plan = make_plan(seed, shape.streams, shape.max_len, shape.cancel_rate)
    rids = [s.rid for s in plan]
    receiver = Child("receiver", receiver_main, transport, adapter_spec)
    children.append(receiver)
    receiver.expect("ready", context)
    receiver.ask("register", rids[::2], "registered", context)
    sender = Child("sender", sender_main, transport, adapter_spec, seed, plan, 1, shape.sizes, None)
    children.append(sender)
    receiver.ask("register", rids[1::2], "registered", context)  # some after their puts (R12)
    sent = sender.expect("done", context)
    got = receiver.ask("finals", rids, "finals", context)
    sender.pipe.send("close")
    assert sender.expect("closed", context) >= 0
    result = receiver.ask("stop", None, "stopped", context)
    for child in children:
        child.finish()
        assert child.proc.exitcode == 0, f"{child.name} exited {child.proc.exitcode} ({context})"

    assert sent["violations"] == [], f"sender-side oracle ({context}): {sent['violations']}"
    assert result["violations"] == [], f"receiver-side oracle ({context}): {result['violations']}"
    assert result["stale"] == [], context
    for stream in plan:
        puts = [p for p in sent["puts"] if p[0] == stream.rid]
        assert got[stream.rid] == puts, f"{stream.rid}: received != put ({context})"
        check_stream(stream, got[stream.rid], seed, 1, shape.sizes, whole=True)
    assert leftovers(transport) == [], f"left in the store ({context})"


@pytest.mark.rule("R2", "R6", "R9", "R11", "R12", "R14", "R23")
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(Shape(streams=30, max_len=12), id="many-streams"),
        pytest.param(
            Shape(150, 40, HUGE, 0.2), id="long-streams-large-payloads", marks=pytest.mark.slow
        ),
    ],
)
def test_streams_with_cancels_cross_processes_intact(
    transport: tuple[Any, ...],
    adapter_spec: str,
    children: list[Child],
    capfd: pytest.CaptureFixture[str],
    seed: int,
    shape: Shape,
) -> None:
    stream_across(transport, adapter_spec, children, shape, seed)
    quiet(capfd.readouterr().err)


def kill_mid_stream(
    transport: tuple[Any, ...], adapter_spec: str, children: list[Child], shape: Shape, seed: int
) -> int:
    """Kill the sender halfway, check the receiver, restart; returns how many torn segments."""
    context = f"seed={seed}, transport={transport[0]}, {shape}"
    plan = make_plan(seed, shape.streams, shape.max_len, cancel_rate=0.0)
    streams = {s.rid: s for s in plan}
    rids = list(streams)
    half = sum(s.length for s in plan) // 2
    receiver = Child("receiver", receiver_main, transport, adapter_spec)
    children.append(receiver)
    receiver.expect("ready", context)
    receiver.ask("register", rids, "registered", context)
    sender = Child("sender", sender_main, transport, adapter_spec, seed, plan, 1, shape.sizes, half)
    children.append(sender)
    sender.expect("paused", context)  # its SAVE thread is still working off the backlog
    sender.proc.kill()
    sender.proc.join(10)
    assert sender.proc.exitcode is not None and sender.proc.exitcode < 0, context
    if transport[0] == "redis":  # the server has run whatever the dead sender had sent
        wait_until_gone(transport, "sender")

    drained = receiver.ask("drain", rids, "drained", context)
    incomplete = [r for r in rids if not (drained[r] and drained[r][-1][1])]
    assert incomplete, f"pausing halfway leaves streams without their final ({context})"
    handed = receiver.ask("cleanup", incomplete, "cleaned", context)
    for rid in rids:  # whole streams and exact prefixes: no partial, no corrupt chunk
        chunks = handed.get(rid, drained[rid]) if rid in incomplete else drained[rid]
        check_stream(streams[rid], chunks, seed, 1, shape.sizes, whole=rid not in incomplete)
    assert leftovers(transport, committed=True) == [], f"committed values undrained ({context})"
    torn = leftovers(transport)
    in_flight = 1 if transport[0] == "shm" else 0  # a Redis SET is atomic: nothing half-done
    assert len(torn) <= in_flight, f"half-written values left: {torn} ({context})"
    received = sum(len(handed.get(r, drained[r])) for r in rids)
    print(f"killed after {half} saves, {received} received; torn segments: {len(torn)}")
    if transport[0] == "shm":
        conn = make_connector(transport)
        assert conn.purge() == len(torn)
        conn.close()

    # a restarted sender reuses the request ids: only the new incarnation arrives
    plan2 = [Stream(rid, streams[rid].length % 7 + 1, None) for rid in incomplete]
    receiver.ask("register", incomplete, "registered", context)
    sender2 = Child(
        "sender2", sender_main, transport, adapter_spec, seed, plan2, 2, shape.sizes, None
    )
    children.append(sender2)
    sent2 = sender2.expect("done", context)
    got2 = receiver.ask("finals", incomplete, "finals", context)
    sender2.pipe.send("close")
    sender2.expect("closed", context)
    result = receiver.ask("stop", None, "stopped", context)
    assert sent2["violations"] == [], f"restarted sender's oracle ({context})"
    assert result["violations"] == [], f"receiver-side oracle ({context}): {result['violations']}"
    assert result["stale"] == [], f"handed out after cleanup_receiver ({context})"
    for stream in plan2:
        check_stream(stream, got2[stream.rid], seed, 2, shape.sizes, whole=True)
    assert leftovers(transport) == [], f"left in the store ({context})"
    return len(torn)


@pytest.mark.rule("R2", "R9", "R12", "R14", "R16")
def test_killing_the_sender_mid_stream_leaves_the_receiver_consistent(
    transport: tuple[Any, ...], adapter_spec: str, children: list[Child], seed: int
) -> None:
    kill_mid_stream(transport, adapter_spec, children, Shape(streams=16, max_len=30), seed)


@pytest.mark.slow
@pytest.mark.rule("R2", "R9", "R12", "R14", "R16")
def test_killing_a_sender_of_large_payloads_again_and_again(
    transport: tuple[Any, ...], adapter_spec: str, seed: int
) -> None:
    """Ten kills while megabyte values are being written: some land mid-write."""
    torn = 0
    for k in range(10):
        children: list[Child] = []
        try:
            torn += kill_mid_stream(transport, adapter_spec, children, Shape(8, 30, HUGE), seed + k)
        finally:
            for child in children:
                child.finish()
    print(f"torn segments over 10 kills: {torn}")
