"""The contract's worked examples 2 and 3 as tests (docs/contract.md, "The worked examples")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter, examples
from chunk_adapter.bed.waiting import Hang
from chunk_adapter.connectors import MemoryConnector, RecordingConnector
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.examples import EXAMPLE_RULES, ExampleOutcome, expect_snapshots
from chunk_adapter.factory import REFERENCE
from tests.quality import broken_stateful
from tests.unit._rig import Rig, chunk, wait_recv_passed


@pytest.mark.rule("R4", "R9", "R15")
def test_example_2_snapshots_and_draining(rig: Rig, mem: MemoryConnector) -> None:
    rec = RecordingConnector(mem)
    snd, rcv, inbox = rig.receiving(rec)
    live = ["a"]
    rcv.load_async("v")
    snd.save_async("v", live, is_final=False)
    live.append("b")  # the scheduler keeps mutating its object
    snd.save_async("v", live, is_final=True)
    live.append("c")
    inbox.wait_final("v")
    assert inbox.of("v") == [chunk(["a"]), chunk(["a", "b"], True)], rig.repro
    assert mem.puts == ["v_0_0", "v_0_1"], rig.repro

    rcv.load_async("sentinel")  # never gets data: keeps the RECV thread polling
    rcv.load_async("q")
    snd.save_async("q", 1, False)
    snd.save_async("q", 2, False)
    # "wait a little", made exact: until the RECV thread has processed the get of q_0_1.
    wait_recv_passed(rec, "q_0_1")
    assert rcv.poll_ready() == {"q": [chunk(1), chunk(2)]}, rig.repro
    assert rcv.poll_ready() == {}, rig.repro
    snd.save_async("q", 3, True)
    wait_recv_passed(rec, "q_0_2")
    assert rcv.poll_ready() == {"q": [chunk(3, True)]}, rig.repro
    assert rcv.poll_ready() == {}, rig.repro


def _example_3(
    rig: Rig, mem: MemoryConnector, blocker: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Example 3. With *blocker*, an unrelated build is held instead of p0's."""
    builder = rig.gated_builder()
    snd, _rcv, inbox = rig.receiving(mem, "w", build_payload=builder)
    gate = builder.hold(blocker or "w")
    if blocker is not None:
        snd.save_async(blocker, "b0", False)
    snd.save_async("w", "p0", False)
    assert gate.wait_started(), "the held build never started"
    for payload in ("p1", "p2", "p3"):
        snd.save_async("w", payload, False)
    snd.save_async("w", "end", True)
    snd.cancel_sender("w")
    gate.release()
    inbox.wait_final("w")
    w_puts = [k for k in mem.puts if k.startswith("w_")]
    return inbox.of("w"), w_puts


@pytest.mark.rule("R6", "R9", "R11")
def test_example_3_cancel_while_build_blocked(rig: Rig, mem: MemoryConnector) -> None:
    received, puts = _example_3(rig, mem, blocker=None)
    outcomes = [
        ([chunk("p0"), chunk(None, True)], ["w_0_0", "w_0_1"]),
        ([chunk(None, True)], ["w_0_0"]),
    ]
    assert (received, puts) in outcomes, f"{received!r} {puts!r}; {rig.repro}"


@pytest.mark.rule("R6", "R9", "R11")
def test_example_3_cancel_before_p0_is_built(rig: Rig, mem: MemoryConnector) -> None:
    """The second outcome, forced: p0 is still queued when the cancel comes."""
    received, puts = _example_3(rig, mem, blocker="other")
    assert received == [chunk(None, True)], rig.repro
    assert puts == ["w_0_0"], rig.repro


@pytest.mark.rule("R6")
def test_example_3_p0_past_the_cancel_check_is_put(rig: Rig, mem: MemoryConnector) -> None:
    """The first outcome for the reference adapter: p0's build started before the cancel."""
    if rig.spec != REFERENCE:
        pytest.skip("which outcome happens is the reference adapter's choice")
    received, puts = _example_3(rig, mem, blocker=None)
    assert received == [chunk("p0"), chunk(None, True)]
    assert puts == ["w_0_0", "w_0_1"]


def _judged(got: list[dict[str, Any]]) -> tuple[str, ...]:
    out = ExampleOutcome("example 2", EXAMPLE_RULES["example_2"])
    expect_snapshots(out, got)
    return out.broken


@pytest.mark.rule("R4", "R15")
def test_a_chunk_handed_out_again_is_r15_not_a_wrong_snapshot() -> None:
    """A poll_ready without the swap hands 'v''s first chunk out again; that read as R4 (a
    wrong snapshot) first, so under a baseline accepting R15 one run of a five-bug adapter
    named a new R4 that the next run did not repeat."""
    a, ab = chunk(["a"]), chunk(["a", "b"], True)
    assert _judged([a, ab]) == ()
    assert _judged([a, a, ab]) == ("R15",)
    assert _judged([chunk(["a", "b"]), ab]) == ("R4",)  # no snapshot: still R4
    assert _judged([ab, chunk(["a", "b"]), ab])[0] == "R4"


class _NoFinals(ChunkAdapter):
    """Never queues a final: the stream never ends, cancelled or not."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not is_final:
            super().save_async(request_id, obj, is_final)


@pytest.mark.rule("R6", "R11")
def test_example_3_names_the_cancel_when_the_final_comes_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A final that never comes in example 3 is R6 when the same example without its
    cancel_sender delivers it (a cancelled final dropped; it read as R11, a second root
    cause beside R6 for one defect, and a baseline entry another seed did not see), and
    stays R11 when no final comes either way."""
    monkeypatch.setattr(examples, "ARRIVE", 1.0)  # the waits that run out, shorter
    with pytest.raises(Hang) as dropped:
        examples.example_3(broken_stateful.final_dropped_on_cancel)
    assert dropped.value.broken == ("R6", "R11") and "root R6" in str(dropped.value)
    with pytest.raises(Hang) as never:
        examples.example_3(_NoFinals)
    assert never.value.broken == ("R11",), never.value
    assert examples.example_3(ChunkAdapter).ok  # the reference: the example holds


class _MarkedConnector(ConnectorWrapper):
    """Puts every final with a key the wire value does not have (``"cancelled"``)."""

    def put(self, key: str, value: dict[str, Any]) -> None:
        if value.get("finished"):
            value = {**value, "cancelled": value["data"] is None}
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


def _marks_finals(connector: Any, **options: Any) -> ChunkAdapter:
    return ChunkAdapter(_MarkedConnector(connector), **options)


@pytest.mark.rule("R2")
def test_a_value_with_a_key_too_many_is_the_wire_value_first() -> None:
    """An adapter whose finals carry a key too many (a ``"cancelled"`` flag): both
    examples name R2 first, the sender oracle's test of the value's shape; example 3 read
    it as R6 only ("neither outcome the contract allows"), the rule of its cancel."""
    for example in (examples.example_2, examples.example_3):
        outcome = example(_marks_finals)
        assert outcome.broken[:1] == ("R2",), (example.__name__, outcome.problems)
    assert examples.example_2(ChunkAdapter).ok and examples.example_3(ChunkAdapter).ok


class _FromOne(ConnectorWrapper):
    """Puts every chunk one id late: a stream's ids start at 1."""

    def put(self, key: str, value: dict[str, Any]) -> None:
        head, _, cid = key.rpartition("_")
        self.inner.put(f"{head}_{int(cid) + 1}", value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


@pytest.mark.rule("R9", "R11")
def test_a_final_that_never_comes_for_an_id_gap_names_the_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream whose ids start at 1 never reaches its receiver (it waits for chunk 0): the
    example's hang names R9 first, the sender oracle's id check of what was put, with R11
    its consequence; it said R11 alone, a lost final."""
    monkeypatch.setattr(examples, "ARRIVE", 1.0)  # the wait that runs out, shorter
    with pytest.raises(Hang) as gap:
        examples.example_2(lambda connector, **kw: ChunkAdapter(_FromOne(connector), **kw))
    assert gap.value.broken == ("R9", "R11"), gap.value


@pytest.mark.rule("R3")
def test_a_poll_ready_that_never_returns_stays_r3_beside_an_id_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The id check reads only a final that never came: a ``poll_ready`` that does not
    return stays R3 (a call that waited), though the stream's ids skip one too."""
    import threading

    monkeypatch.setattr(examples, "ARRIVE", 1.0)
    monkeypatch.setattr(examples, "CALL", 1.0)
    release = threading.Event()

    class _StuckPoll(ChunkAdapter):
        def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
            release.wait(30)
            return super().poll_ready()

    try:
        with pytest.raises(Hang) as stuck:
            examples.example_2(lambda connector, **kw: _StuckPoll(_FromOne(connector), **kw))
    finally:
        release.set()
    assert stuck.value.call and stuck.value.broken == ("R3",), stuck.value


class _FinalFirst(ChunkAdapter):
    """Saves a request's non-finals only after its final: the final overtakes its stream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: dict[str, list[Any]] = {}

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not is_final:
            self._held.setdefault(request_id, []).append(copy.deepcopy(obj))
            return
        super().save_async(request_id, obj, True)
        for held in self._held.pop(request_id, []):
            super().save_async(request_id, held, False)


@pytest.mark.rule("R5")
def test_a_final_put_before_its_stream_is_read_at_the_sender(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The examples record the sender's calls: a final that overtakes its stream's chunks
    is named R5 (save order, the sender oracle's aligner) before what the receiver then
    saw (a final that never came, R11, or 'v' with the final alone: a missing snapshot,
    R4) — whichever the example ends with."""
    monkeypatch.setattr(examples, "ARRIVE", 1.0)  # the waits that run out, shorter
    for example in (examples.example_2, examples.example_3):
        try:
            broken = example(_FinalFirst).broken
        except Hang as hang:
            broken = hang.rules
        assert broken[:1] == ("R5",), (example.__name__, broken)
    assert examples.example_2(ChunkAdapter).ok and examples.example_3(ChunkAdapter).ok


class _StaleData(ConnectorWrapper):
    """Puts every non-final with data that was never saved (``"stale"``)."""

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not value.get("finished"):
            value = {**value, "data": "stale"}
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


@pytest.mark.rule("R4", "R6")
def test_an_example_that_fails_reads_the_sender_first() -> None:
    """A finished example that failed puts the sender oracle's reading first: example 3's
    'w' got p0 as data never saved, which read as R6 ("neither outcome the contract
    allows", the example's own rule); the root is the payload put, no snapshot (R4)."""
    outcome = examples.example_3(lambda connector, **kw: ChunkAdapter(_StaleData(connector), **kw))
    assert outcome.broken[:2] == ("R4", "R6"), outcome.problems
