"""R29, stream identity: the framing's stream numbers and the receiving ledger, alone
(connectors/_stream_ids.py). The connectors and the adapter on them, with the bug as
measured: tests/connectors/test_stream_identity.py."""

from __future__ import annotations

import pytest

from chunk_adapter.connectors._stream_ids import StreamLedger, StreamNumbers, split_key

WRITER = b"w" * 16


def tag(number: int) -> bytes:
    return WRITER + number.to_bytes(8, "little")


def test_chunk_keys_split_into_stream_and_chunk() -> None:
    assert split_key("a_b_1_7") == ("a_b_1", 7)
    assert split_key("r_-1_0") == ("r_-1", 0)
    assert split_key("no-chunk-id") is None
    assert split_key("r_x_1") is None


@pytest.mark.rule("R29")
def test_a_stream_keeps_its_number_and_the_next_stream_gets_another() -> None:
    numbers = StreamNumbers()
    first = numbers.number("r_0_0")
    assert numbers.number("r_0_0") == first, "a failed chunk 0 retried keeps its number"
    numbers.stored("r_0_0", final=False)
    assert numbers.number("r_0_1") == first
    numbers.stored("r_0_1", final=True)
    second = numbers.number("r_0_0")
    assert second != first
    assert numbers.number("s_0_0") not in (first, second), "another request: its own"
    assert numbers.number("not a chunk key") == 0


@pytest.mark.rule("R29")
def test_a_sender_that_gave_up_a_final_starts_a_new_number_at_chunk_0() -> None:
    numbers = StreamNumbers()
    first = numbers.number("r_0_0")
    numbers.stored("r_0_0", final=False)  # its final is never stored
    assert numbers.number("r_0_0") != first


@pytest.mark.rule("R29")
def test_values_of_the_stream_left_are_thrown_away_until_its_final() -> None:
    ledger = StreamLedger()
    assert ledger.keep("r_0_0", tag(1), final=False)
    assert ledger.abandon("r_0_1")
    assert not ledger.keep("r_0_1", tag(1), final=False)
    assert ledger.keep("r_0_0", tag(2), final=False), "another stream's value is handed out"
    assert not ledger.keep("r_0_2", tag(1), final=True)
    assert ledger.keep("r_0_3", tag(1), final=False), "after its final, nothing is left"
    assert ledger.discarded == 2


@pytest.mark.rule("R29")
def test_a_reader_that_got_nothing_leaves_nothing() -> None:
    """The limit (docs/contract.md R29): nothing says which stream was its own."""
    ledger = StreamLedger()
    assert ledger.abandon("r_0_0") is False
    assert ledger.keep("r_0_0", tag(5), final=False), "the next reader's first stream"


@pytest.mark.rule("R29")
def test_a_finished_stream_is_never_left() -> None:
    ledger = StreamLedger()
    assert ledger.keep("r_0_0", tag(1), final=True)
    assert ledger.abandon("r_0_1") is False
    assert ledger.keep("r_0_1", tag(1), final=False)


@pytest.mark.rule("R29")
def test_the_sweep_looks_where_the_lowest_rest_starts_and_past_other_streams() -> None:
    ledger = StreamLedger()
    assert ledger.leftover("r_0_0") is None
    ledger.keep("r_0_0", tag(1), final=False)
    ledger.keep("r_0_1", tag(1), final=False)
    ledger.abandon("r_0_2")  # A left at 2
    ledger.keep("r_0_0", tag(2), final=False)
    ledger.abandon("r_0_1")  # B left at 1
    rest = ledger.leftover("r_0_0")
    assert rest is not None
    assert (rest.key, rest.tag, rest.abandoned) == ("r_0_1", tag(2), {tag(1), tag(2)})
    ledger.passed(rest)  # another stream's value at B's chunk 1
    rest = ledger.leftover("r_0_0")
    assert rest is not None and rest.key == "r_0_2"
    ledger.keep("r_0_2", tag(1), final=True)  # A's final swept
    ledger.keep("r_0_2", tag(2), final=True)  # B's final swept
    assert ledger.leftover("r_0_0") is None


@pytest.mark.rule("R29")
def test_the_ledger_keeps_only_what_is_open_or_left() -> None:
    """Unique request ids (the common case) cost nothing once their streams are read."""
    ledger = StreamLedger()
    for n in range(100):
        ledger.keep(f"r{n}_0_0", tag(n), final=False)
        ledger.keep(f"r{n}_0_1", tag(n), final=True)
    assert len(ledger) == 0
    ledger.keep("r_0_0", tag(1), final=False)
    assert len(ledger) == 1, "a stream being read"
    ledger.abandon("r_0_1")
    assert len(ledger) == 1, "a stream left"
    ledger.keep("r_0_1", tag(1), final=True)  # its final thrown away
    assert len(ledger) == 0
    assert not ledger.abandon("s_0_0")
    assert len(ledger) == 0, "nothing left, nothing remembered"
