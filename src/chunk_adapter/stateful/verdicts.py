"""Verdicts of the harness: comparing what was observed with the model, naming the rule.

``differs`` says whether the running counts match the model, or already
exceed it (no point waiting); ``count_violation`` and ``poll_violation`` turn
a mismatch into a :class:`~chunk_adapter.oracles.Violation` naming the rule
whose expectation was not met; ``sent_violation`` compares the puts in order.
"""

from __future__ import annotations

from typing import Any

from ..model import ContractModel
from ..oracles import Violation
from ..rules import R4, R6, R9, R10, R11, R13, R14, R15, R16, R23
from .watch import Counts

__all__ = ["count_violation", "differs", "is_prefix", "poll_violation", "sent_violation"]


def differs(c: Counts, m: ContractModel) -> str | None:
    """``"equal"``, a description of an excess (stop waiting), or ``None`` (keep waiting)."""
    for key, n in c.ok_puts.items():
        if n > m.ok_puts[key]:
            return f"put {key}"
    for key, n in c.ok_gets.items():
        if n > m.ok_gets[key]:
            return f"get {key}"
    for rid, n in c.builds.items():
        if n > m.builds[rid]:
            return f"build {rid}"
    if c.failed_puts > m.failed_puts:
        return "failed puts"
    if (c.ok_puts, c.ok_gets, c.builds, c.failed_puts) == (
        m.ok_puts,
        m.ok_gets,
        m.builds,
        m.failed_puts,
    ):
        return "equal"
    return None


def count_violation(diff: str | None, c: Counts, m: ContractModel, reached: bool) -> Violation:
    """Name what is missing or extra, and the rule it breaks."""
    missing_puts = sorted((m.ok_puts - c.ok_puts).elements())
    extra_puts = sorted((c.ok_puts - m.ok_puts).elements())
    missing_gets = sorted((m.ok_gets - c.ok_gets).elements())
    extra_gets = sorted((c.ok_gets - m.ok_gets).elements())
    extra_builds = sorted((c.builds - m.builds).elements())
    missing_builds = sorted((m.builds - c.builds).elements())
    finals = {k for k, v in m.sent if v.get("finished") is True}
    parts = []
    rule = R23
    if extra_puts:
        parts.append(f"unexpected puts {extra_puts}")
        rule = R6
    if extra_builds:
        parts.append(f"unexpected builds for {extra_builds}")
        rule = R6
    if extra_gets:
        parts.append(f"unexpected gets that returned a value: {extra_gets}")
        rule = R13
    if c.failed_puts != m.failed_puts:
        parts.append(f"{c.failed_puts} failed puts, expected {m.failed_puts}")
        rule = R10 if rule == R23 else rule
    if missing_puts:
        parts.append(f"puts never made: {missing_puts}")
        if any(k in finals for k in missing_puts) and rule == R23:
            rule = R11
    if missing_builds:
        parts.append(f"builds never made for {missing_builds}")
    if missing_gets:
        parts.append(f"values never received: {missing_gets}")
    how = "" if reached else " (not within the wait after both threads were seen idle)"
    return Violation(
        rule,
        "the adapter did not do what the contract requires"
        + how
        + ": "
        + "; ".join(parts or [diff or "?"]),
    )


def is_prefix(got: dict[str, list[Any]], expected: dict[str, list[Any]]) -> bool:
    return all(
        rid in expected and values == expected[rid][: len(values)] for rid, values in got.items()
    )


def poll_violation(
    expected: dict[str, list[Any]], got: dict[str, list[Any]], m: ContractModel
) -> Violation:
    for rid in sorted(set(expected) | set(got)):
        e, g = expected.get(rid, []), got.get(rid, [])
        if e == g:
            continue
        if rid not in m.regs and g:
            rule = R16
        elif len(g) > len(e):
            rule = R15  # more than was committed since the last call: not swapped out
        else:
            rule = R14
        return Violation(
            rule, f"poll_ready should hand out {e!r} for this request, handed out {g!r}", rid
        )
    return Violation(R14, f"poll_ready should return {expected!r}, returned {got!r}")


def sent_violation(
    expected: list[tuple[str, dict[str, Any]]], actual: list[tuple[str, Any]]
) -> Violation | None:
    """The first successful put that differs from the model's, stream by stream.

    The order asked for is within a stream (a key without its chunk id, R5, R9):
    an adapter may put another request's chunk while one waits for a retry, so
    the two lists are compared per stream, not as one sequence.
    """
    mine: dict[str, list[tuple[str, Any]]] = {}
    for key, value in actual:
        mine.setdefault(_stream(key), []).append((key, value))
    theirs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for key, value in expected:
        theirs.setdefault(_stream(key), []).append((key, value))
    for stream, wanted in theirs.items():
        for (ek, ev), (ak, av) in zip(wanted, mine.get(stream, []), strict=False):
            if (ek, ev) != (ak, av):
                rule = R9 if ek != ak else R6 if ev.get("data") is None else R4
                return Violation(
                    rule,
                    f"expected the put {ek!r} <- {ev!r}, but the adapter put {ak!r} <- {av!r}",
                    key=ek,
                )
    return None


def _stream(key: str) -> str:
    """``"req_0_3"`` -> ``"req_0"``: the request and stage a chunk key belongs to."""
    return key.rsplit("_", 1)[0]
