"""Issue 27 point 4, R32: two pipelines sharing a shared-memory namespace are refused,
never mixed.

Two pipelines started from one parent share the default namespace (one process
group). Before, their senders wrote the same keys and their receivers consumed
each other's chunks (the operator probe: 147 of 420 chunks swapped, finals
included, no error). Now the second *process* to write a stage's keys, or to
consume them, gets ``NamespaceShared`` (permanent: nothing stored or read) naming
the process that holds the stage; a process that dies, however it dies, frees it.
Children are spawned and answer on pipes; nothing waits on a sleep.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.connectors import NamespaceShared, SharedMemoryConnector, is_permanent
from chunk_adapter.errors import InvalidType
from tests.crossprocess._claim_workers import WAIT, call_main, sender_main

CTX = multiprocessing.get_context("spawn")


@pytest.fixture
def namespace() -> Any:
    name = f"claim{os.urandom(4).hex()}"
    yield name
    SharedMemoryConnector(name, exclusive_stages=False).purge()


class Child:
    """A spawned child running *target*; ``answer()`` is what it sent back."""

    def __init__(self, target: Any, *args: Any) -> None:
        self.pipe, child_end = CTX.Pipe()
        self.proc = CTX.Process(target=target, args=(*args, child_end))
        self.proc.start()
        child_end.close()

    def answer(self) -> tuple[str, Any]:
        assert self.pipe.poll(WAIT), "the child did not answer"
        kind, value = self.pipe.recv()
        assert kind != "error", value
        return kind, value

    def end(self) -> None:
        if self.proc.is_alive():
            self.pipe.send("exit")
        self.proc.join(WAIT)
        assert self.proc.exitcode is not None, "the child did not exit"


def call(namespace: str, op: str, key: str, hold: bool = False, **options: Any) -> Child:
    return Child(call_main, namespace, op, key, hold, options)


def test_r32_a_second_process_writing_a_stage_is_refused_naming_the_holder(
    namespace: str,
) -> None:
    mine = SharedMemoryConnector(namespace)
    mine.put("a_0_0", {"data": "mine", "finished": False})
    child = call(namespace, "put", "a_0_1")
    kind, message = child.answer()
    child.end()
    assert kind == "refused"
    assert f"process {os.getpid()} already writes stage 0" in message
    assert "namespace=" in message and "exclusive_stages=False" in message  # the fixes
    assert mine.contains("a_0_0") and not mine.contains("a_0_1"), "nothing stored"
    other = call(namespace, "put", "a_1_0")  # another stage is another claim
    assert other.answer() == ("ok", None)
    other.end()
    mine.close()


def test_r32_a_second_consumer_of_a_stage_is_refused_and_reads_nothing(namespace: str) -> None:
    writer = SharedMemoryConnector(namespace)
    writer.put("a_0_0", {"data": "x", "finished": True})
    first = call(namespace, "get", "b_0_0", True)  # consumes stage 0 from now on
    assert first.answer() == ("ok", None)
    second = call(namespace, "get", "a_0_0")
    kind, message = second.answer()
    second.end()
    assert kind == "refused" and "already consumes stage 0" in message
    assert writer.contains("a_0_0"), "the refused get consumed nothing"
    keeper = call(namespace, "get", "a_0_0", consume_on_get=False)  # keeps: claims nothing
    assert keeper.answer() == ("ok", {"data": "x", "finished": True})
    keeper.end()
    first.end()
    writer.close()


@pytest.mark.parametrize("how", ["close", "sigkill"])
def test_r32_the_stage_is_free_once_its_holder_closed_or_died(namespace: str, how: str) -> None:
    holder = call(namespace, "put", "a_0_0", True)
    assert holder.answer() == ("ok", None)
    refused = call(namespace, "put", "a_0_1")
    assert refused.answer()[0] == "refused"
    refused.end()
    if how == "sigkill":
        os.kill(holder.proc.pid, signal.SIGKILL)  # the kernel drops the lock with it
    holder.end()
    after = call(namespace, "put", "a_0_1")
    assert after.answer() == ("ok", None)
    after.end()


def test_r32_stages_several_processes_serve_on_purpose_are_not_refused(namespace: str) -> None:
    mine = SharedMemoryConnector(namespace, exclusive_stages=False)
    mine.put("a_0_0", {"data": "mine", "finished": True})
    child = call(namespace, "put", "b_0_0", exclusive_stages=False)
    assert child.answer() == ("ok", None)
    child.end()
    mine.close()


def test_r32_two_pipelines_in_one_namespace_never_mix(namespace: str) -> None:
    """Pipeline A (sender and receiver here) and pipeline B's sender (a child) save the
    same request ids on stage 0: A's receiver gets A's chunks only, all of them; B's
    sender is refused loudly (its finals counted failed), nothing of it stored."""
    requests, chunks = 5, 4
    with SharedMemoryConnector(namespace) as conn:
        sender = ChunkAdapter(conn, stage_id=0)
        receiver = ChunkAdapter(conn, stage_id=1)
        sender.save_async("req-0", {"tag": "A", "n": -1}, False)  # A claims stage 0 first
        assert sender.flush(timeout=WAIT)
        b = Child(sender_main, namespace, requests, chunks, "B")
        kind, b_stats = b.answer()
        b.end()
        assert kind == "stats"
        assert b_stats["finals_failed"] == requests, b_stats  # refused, counted, logged
        got: dict[str, list[Any]] = {}
        for r in range(requests):
            receiver.load_async(f"req-{r}")
        for n in range(chunks):
            for r in range(requests):
                sender.save_async(f"req-{r}", {"tag": "A", "n": n}, n == chunks - 1)
        assert sender.flush(timeout=WAIT)

        def done() -> bool:
            for rid, values in receiver.poll_ready().items():
                got.setdefault(rid, []).extend(values)
            return all(got.get(f"req-{r}", [{}])[-1].get("finished") for r in range(requests))

        from chunk_adapter.bed.waiting import wait_until

        wait_until(done, WAIT, "pipeline A's receiver got every final")
        sender.stop()
        receiver.stop()
    tags = {v["data"]["tag"] for values in got.values() for v in values}
    assert tags == {"A"}, f"pipeline B's chunks reached pipeline A: {tags}"
    assert [v["data"]["n"] for v in got["req-1"]] == list(range(chunks))
    assert [v["data"]["n"] for v in got["req-0"]] == [-1, *range(chunks)]


def test_r32_exclusive_stages_must_be_a_bool(namespace: str) -> None:
    with pytest.raises(InvalidType, match="exclusive_stages must be True or False, got 'no'"):
        SharedMemoryConnector(namespace, exclusive_stages="no")  # type: ignore[arg-type]


def test_r32_a_namespace_shared_error_is_permanent() -> None:
    from chunk_adapter.connectors import is_permanent

    assert is_permanent(NamespaceShared("x"))


def test_r32_a_refusal_stops_the_whole_namespace_while_both_sides_live(namespace: str) -> None:
    """Pipeline B's receiver (a child) consumes stage 0 and pipeline A's sender (here)
    writes it: alone, they would pair across pipelines. B's sender's refusal marks the
    namespace shared: every put and get in it is refused (transiently), until the refused
    side is gone."""
    b_receiver = call(namespace, "get", "x_0_0", True)
    assert b_receiver.answer() == ("ok", None)
    a_sender = SharedMemoryConnector(namespace)
    a_sender.put("a_0_0", {"data": "A", "finished": False})
    b_sender = call(namespace, "put", "a_0_1", True)
    assert b_sender.answer()[0] == "refused"
    with pytest.raises(NamespaceShared, match="is shared by two pipelines") as caught:
        a_sender.put("a_0_1", {"data": "A", "finished": True})
    assert not is_permanent(caught.value)  # once one side is gone, the other goes on
    assert f"process {b_sender.proc.pid} refused put-0, held by process {os.getpid()}" in str(
        caught.value
    )
    b_sender.end()
    a_sender.put("a_0_1", {"data": "A", "finished": True})  # the conflict is over
    b_receiver.end()
    a_sender.close()
