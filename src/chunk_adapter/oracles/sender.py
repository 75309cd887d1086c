"""Sender-side oracles: what reached the connector, per request (R2, R4–R11, R18, R23).

Per put: the wire value (R2), contiguous ids per stream (R9), no put after the
sender's ``stop()`` returned (R18). Then :class:`~.aligner.Aligner` matches the
puts with the saves, stream by stream (R4–R8, R10, R11, R23).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..history import ConnectorOp
from ..rules import R2, R9, R18
from .aligner import Aligner, data_of, gives_up, is_final_put
from .timeline import Timeline, split_key
from .violations import Violation

__all__ = ["check_sender", "wire_problem", "wire_shaped"]


def check_sender(tl: Timeline, *, quiescent: bool, put_tries: int | None) -> list[Violation]:
    out: list[Violation] = []
    for rid in tl.sender_ids():
        puts = tl.puts.get(rid, [])
        out += _wire(rid, puts)
        out += _ids(rid, puts)
        out += _after_stop(rid, puts, tl.sender_stop_end)
        if tl.have_saves:  # else the sender is not recorded here: wire and id checks only
            out += Aligner(tl, rid, quiescent, put_tries).run()
    return out


def wire_shaped(value: Any) -> bool:
    """Whether *value* is a dict with exactly the wire value's keys (R2), whatever they hold:
    what a value handed out by ``poll_ready`` must be (the receiver oracle)."""
    return isinstance(value, dict) and set(value) == {"data", "finished"}


def wire_problem(value: Any) -> str | None:
    """What is wrong with *value* as a wire value (R2: exactly ``{"data": payload,
    "finished": <bool>}``), or ``None``: the one test of a value put, for the sender oracle
    and the examples stage alike."""
    if not wire_shaped(value):
        return f"must be exactly {{'data': ..., 'finished': bool}}, got {value!r}"
    if not isinstance(value["finished"], bool):
        return f"'finished' must be a bool, got {value['finished']!r}"
    return None


def _wire(rid: str, puts: list[ConnectorOp]) -> Iterator[Violation]:
    """R2: the value put is exactly {"data": payload, "finished": <bool>}."""
    for op in puts:
        problem = wire_problem(op.value)
        if problem is not None:
            yield Violation(R2, f"put value {problem}", rid, op.key, op.begin)


def _ids(rid: str, puts: list[ConnectorOp]) -> Iterator[Violation]:
    """R9: per stream, ids 0, 1, 2, ... with no gap, no repeat; a failed put uses no id.
    A final with data ``None`` refused for good ends its stream (R25: given up), and may
    be tried once more."""
    expected = 0
    given_up: str | None = None
    for op in puts:
        parsed = split_key(op.key)
        if parsed is None:
            continue
        cid = parsed[2]
        if given_up is not None:
            if given_up == op.key and is_final_put(op) and data_of(op) is None:
                expected = 0
                continue  # the given-up final once more (and its retries), or a new one at 0
            given_up = None  # only the request's next puts can be that
        if gives_up(op):
            given_up, expected = op.key, 0
            continue
        if op.outcome == "error":
            if cid != expected:
                yield Violation(
                    R9,
                    f"a put tried chunk id {cid} where id {expected} was next (a put that "
                    "raised uses no id; the retry or the next chunk must reuse it)",
                    rid,
                    op.key,
                    op.begin,
                )
            continue
        if cid != expected:
            what = "a gap" if cid > expected else "a repeat"
            yield Violation(
                R9,
                f"expected the stream's next put at chunk id {expected}, but chunk id {cid} "
                f"was put ({what})",
                rid,
                op.key,
                op.begin,
            )
        expected = 0 if is_final_put(op) else cid + 1


def _after_stop(rid: str, puts: list[ConnectorOp], stop_end: int | None) -> Iterator[Violation]:
    """R18: no put begins after stop() returned."""
    if stop_end is None:
        return
    for op in puts:
        if op.begin > stop_end:
            yield Violation(R18, "a put began after stop() had returned", rid, op.key, op.begin)
