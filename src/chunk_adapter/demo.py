"""``chunk-adapter demo``: the contract's worked examples 2 and 3, run live.

Each example runs a sender and a receiver adapter over one recording
in-memory connector and prints the keys put and the chunks received, then
checks them against what the contract allows (exit status 1 if not).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from .adapter import ChunkAdapter
from .connectors import GatedBuilder, MemoryConnector, RecordingConnector

__all__ = ["run_demo"]

_DEADLINE = 10.0


def _until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: {what} did not happen within {_DEADLINE} s")
        time.sleep(0.001)


def _drain(rcv: ChunkAdapter, request_id: str, into: list[dict[str, Any]]) -> bool:
    """Add what poll_ready has for *request_id* to *into*; True once the final is in."""
    into.extend(rcv.poll_ready().get(request_id, []))
    return bool(into) and bool(into[-1]["finished"])


def example_2(out: TextIO) -> bool:
    conn = RecordingConnector(MemoryConnector())
    with ChunkAdapter(conn, stage_id=0) as snd, ChunkAdapter(conn, stage_id=1) as rcv:
        live = ["a"]
        rcv.load_async("v")
        snd.save_async("v", live, is_final=False)
        live.append("b")  # the scheduler keeps mutating its object
        snd.save_async("v", live, is_final=True)
        live.append("c")
        got: list[dict[str, Any]] = []
        _until(lambda: _drain(rcv, "v", got), "the final chunk of 'v'")
        print("Example 2 — snapshots, and poll_ready drains", file=out)
        print(f"  keys put:      {conn.puts}", file=out)
        print(f"  'v' received:  {[c['data'] for c in got]}", file=out)
        ok = conn.puts == ["v_0_0", "v_0_1"] and [c["data"] for c in got] == [["a"], ["a", "b"]]

        rcv.load_async("q")
        snd.save_async("q", 1, False)
        snd.save_async("q", 2, False)
        _until(lambda: snd.stats().chunks_put >= 4 and rcv.stats().committed >= 4, "q's chunks")
        first = rcv.poll_ready()
        second = rcv.poll_ready()
        snd.save_async("q", 3, True)
        third: list[dict[str, Any]] = []
        _until(lambda: _drain(rcv, "q", third), "the final chunk of 'q'")
        print(f"  poll_ready():  {first}", file=out)
        print(f"  poll_ready():  {second}", file=out)
        print(f"  poll_ready():  {{'q': {third}}}", file=out)
        ok = ok and first == {"q": [{"data": 1, "finished": False}, {"data": 2, "finished": False}]}
        ok = ok and second == {} and third == [{"data": 3, "finished": True}]
    return ok


def example_3(out: TextIO) -> bool:
    conn = RecordingConnector(MemoryConnector())
    builder = GatedBuilder()
    gate = builder.hold(predicate=lambda rid, snap, final: snap == "p0")
    with (
        ChunkAdapter(conn, stage_id=0, build_payload=builder) as snd,
        ChunkAdapter(conn, stage_id=1) as rcv,
    ):
        rcv.load_async("w")
        snd.save_async("w", "p0", False)
        if not gate.wait_started(_DEADLINE):
            raise TimeoutError("demo: the build of 'p0' never started")
        for part in ("p1", "p2", "p3"):
            snd.save_async("w", part, False)
        snd.save_async("w", "end", True)
        snd.cancel_sender("w")
        gate.release()
        got: list[dict[str, Any]] = []
        _until(lambda: _drain(rcv, "w", got), "the final chunk of 'w'")
    print("Example 3 — cancel while a build is blocked", file=out)
    print(f"  keys put:      {conn.puts}", file=out)
    print(f"  'w' received:  {got}", file=out)
    both = [
        (["w_0_0", "w_0_1"], [{"data": "p0", "finished": False}, {"data": None, "finished": True}]),
        (["w_0_0"], [{"data": None, "finished": True}]),
    ]
    return (conn.puts, got) in both


def run_demo(out: TextIO) -> int:
    """Run both examples; 0 if each matched what the contract allows, else 1."""
    status = 0
    for example in (example_2, example_3):
        ok = example(out)
        print(
            f"  -> {'as the contract says' if ok else 'NOT what the contract allows'}\n", file=out
        )
        status |= 0 if ok else 1
    return status
