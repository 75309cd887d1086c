"""R21 — bad input fails at the call, on the scheduler thread, with nothing queued.

"Nothing queued" is proven by what happens next: a good save of the same
request gets chunk id 0 and is the only put; a bad registration polls nothing.
Reference-only: the messages name the bad value, and constructor options are checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector, RecordingConnector
from chunk_adapter.errors import InvalidType, InvalidValue
from tests.unit._rig import Rig, chunk, gets
from tests.unit._wait import Inbox, wait_until

BAD_IDS: list[Any] = [1, None, b"r", 1.5, ("r",)]
BAD_FINALS: list[Any] = [1, 0, None, "True", 1.0]


def _only_put(rig: Rig, mem: MemoryConnector, expected: dict[str, Any]) -> None:
    wait_until(lambda: len(mem.puts) >= 1, what="the good save's put")
    # The good final is the last thing saved; once it is put the FIFO is empty.
    assert mem.puts == list(expected), f"R21: puts {mem.puts}, expected {list(expected)}"
    for key, value in expected.items():
        assert mem.get(key) == value, rig.repro


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_save_async_rejects_a_non_str_request_id(rig: Rig, mem: MemoryConnector, bad: Any) -> None:
    snd = rig.adapter(mem, stage_id=0)
    with pytest.raises(TypeError):
        snd.save_async(bad, "x", False)
    with pytest.raises(TypeError):
        snd.save_async(bad, "x", True)
    snd.save_async(str(bad), "good", True)
    _only_put(rig, mem, {f"{bad}_0_0": chunk("good", True)})


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", BAD_FINALS, ids=repr)
def test_save_async_rejects_a_non_bool_is_final(rig: Rig, mem: MemoryConnector, bad: Any) -> None:
    snd = rig.adapter(mem, stage_id=0)
    with pytest.raises(TypeError):
        snd.save_async("r", "bad", bad)
    snd.save_async("r", "good", True)
    _only_put(rig, mem, {"r_0_0": chunk("good", True)})


@pytest.mark.rule("R21")
def test_save_async_rejects_an_object_the_snapshot_cannot_copy(
    rig: Rig, mem: MemoryConnector
) -> None:
    snd = rig.adapter(mem, stage_id=0)
    with pytest.raises(TypeError):
        snd.save_async("r", threading.Lock(), False)
    with pytest.raises(TypeError):
        snd.save_async("r", {"nested": [threading.Lock()]}, True)
    snd.save_async("r", "good", True)
    _only_put(rig, mem, {"r_0_0": chunk("good", True)})


@pytest.mark.rule("R21")
def test_a_custom_snapshot_error_propagates_from_save_async(rig: Rig, mem: MemoryConnector) -> None:
    if not rig.accepts("snapshot"):
        pytest.skip("the factory takes no snapshot option")

    def picky(obj: Any) -> Any:
        if obj == "refuse":
            raise ValueError("cannot snapshot 'refuse'")
        return obj

    snd = rig.adapter(mem, stage_id=0, snapshot=picky)
    with pytest.raises(Exception, match="refuse"):
        snd.save_async("r", "refuse", False)
    snd.save_async("r", "good", True)
    _only_put(rig, mem, {"r_0_0": chunk("good", True)})


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_cancel_sender_rejects_a_non_str_request_id(
    rig: Rig, mem: MemoryConnector, bad: Any
) -> None:
    snd = rig.adapter(mem, stage_id=0)
    with pytest.raises(TypeError):
        snd.cancel_sender(bad)
    # Nothing was cancelled: not even the str form of the id.
    snd.save_async(str(bad), "kept", False)
    snd.save_async(str(bad), "end", True)
    wait_until(lambda: len(mem.puts) >= 2, what="both puts")
    assert mem.get(f"{bad}_0_0") == chunk("kept"), rig.repro


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_load_async_rejects_a_non_str_request_id(rig: Rig, mem: MemoryConnector, bad: Any) -> None:
    rec = RecordingConnector(mem)
    rcv = rig.adapter(rec, stage_id=1)
    with pytest.raises(TypeError):
        rcv.load_async(bad)
    mem.put(f"{bad}_0_0", chunk("x", True))
    rcv.load_async("sentinel")
    wait_until(lambda: len(gets(rec, "sentinel_")) >= 3, what="three rounds")
    stray = [op.key for op in gets(rec) if not op.key.startswith("sentinel_")]
    assert stray == [], f"R21: a rejected registration was polled: {stray}; {rig.repro}"
    assert rcv.poll_ready() == {}


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_cleanup_receiver_rejects_a_non_str_request_id(
    rig: Rig, mem: MemoryConnector, bad: Any
) -> None:
    rcv = rig.adapter(mem, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async(str(bad))
    with pytest.raises(TypeError):
        rcv.cleanup_receiver(bad)
    mem.put(f"{bad}_0_0", chunk("x", True))  # still registered: it arrives
    inbox.wait_final(str(bad))


@pytest.mark.rule("R21", "R22")
def test_bad_calls_leave_the_background_threads_serving(rig: Rig, mem: MemoryConnector) -> None:
    snd, rcv, inbox = rig.receiving(mem)
    bad_calls: list[Callable[[], object]] = [
        lambda: snd.save_async(1, "x", False),  # type: ignore[arg-type]
        lambda: snd.save_async("r", "x", "yes"),  # type: ignore[arg-type]
        lambda: snd.save_async("r", threading.Lock(), True),
        lambda: snd.cancel_sender(None),  # type: ignore[arg-type]
        lambda: rcv.load_async(b"r"),  # type: ignore[arg-type]
        lambda: rcv.cleanup_receiver(2),  # type: ignore[arg-type]
    ]
    for call in bad_calls:
        with pytest.raises(TypeError):
            call()
    rcv.load_async("r")
    snd.save_async("r", "a", False)
    snd.save_async("r", "b", True)
    inbox.wait_final("r")
    assert inbox.data("r") == ["a", "b"], rig.repro
    assert mem.puts == ["r_0_0", "r_0_1"]


# ----------------------------------------------------------- reference only


@pytest.mark.rule("R21")
def test_messages_name_the_bad_value_and_the_fix(mem: MemoryConnector) -> None:
    with ChunkAdapter(mem, stage_id=0) as adapter:
        with pytest.raises(
            InvalidType, match=r"save_async: request_id must be a str, got 7 \(int\)"
        ):
            adapter.save_async(7, "x", False)  # type: ignore[arg-type]
        with pytest.raises(InvalidType, match=r"is_final must be a bool, got 'no' \(str\)"):
            adapter.save_async("r", "x", "no")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"cannot snapshot lock object.*Nothing was queued"):
            adapter.save_async("r", threading.Lock(), False)
        for call in ("cancel_sender", "load_async", "cleanup_receiver"):
            with pytest.raises(InvalidType, match=rf"{call}: request_id must be a str, got None"):
                getattr(adapter, call)(None)
        assert adapter.stats().save_queue_depth == 0
        assert adapter.stats().registered == 0


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"stage_id": "1"}, InvalidType, "stage_id must be an int, got '1'"),
        ({"stage_id": True}, InvalidType, "stage_id must be an int"),
        ({"stage_id": 1, "src_stage_id": 0.5}, InvalidType, "src_stage_id must be an int"),
        ({"stage_id": 1, "build_payload": 3}, InvalidType, "build_payload must be callable"),
        ({"stage_id": 1, "snapshot": None}, InvalidType, "snapshot must be callable"),
        ({"stage_id": 1, "put_tries": 0}, InvalidValue, "put_tries .* >= 1, got 0"),
        ({"stage_id": 1, "put_tries": True}, InvalidValue, "put_tries"),
        ({"stage_id": 1, "wait_timeout": 0}, InvalidValue, "wait_timeout must be > 0"),
        ({"stage_id": 1, "idle_backoff": -1}, InvalidValue, "idle_backoff must be >= 0"),
        ({"stage_id": 1, "join_timeout": "1"}, InvalidType, "join_timeout must be a number"),
        ({"stage_id": 1, "put_backoff": -0.1}, InvalidValue, "put_backoff must be >= 0"),
        ({"stage_id": 1, "put_backoff_max": -1}, InvalidValue, "put_backoff_max"),
    ],
)
def test_constructor_rejects_bad_options(
    mem: MemoryConnector, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    before = set(threading.enumerate())
    with pytest.raises(error, match=match):
        ChunkAdapter(mem, **options)
    started = [t.name for t in set(threading.enumerate()) - before]
    assert started == [], f"a rejected adapter must start no thread, started {started}"


def test_constructor_rejects_a_connector_without_put_and_get() -> None:
    with pytest.raises(InvalidType, match=r"connector must have put.*and get"):
        ChunkAdapter({}, stage_id=1)  # type: ignore[arg-type]
