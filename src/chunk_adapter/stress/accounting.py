"""An adapter's own counters against what the recording shows.

The reference adapter (and any adapter that offers the same ``stats()``)
counts what it did: puts, failed puts, dropped chunks, gets, builds. After a
run has settled (everything saved was handled, the threads are stopped), each
counter must equal the number the recorded history implies. Counters an
adapter does not have are skipped; an adapter without ``stats()`` is not
compared at all.
"""

from __future__ import annotations

from typing import Any

from ..history import BuildCall, ConnectorOp, History

__all__ = ["expected_counters", "stats_mismatches"]


def _is_final(value: Any) -> bool:
    return isinstance(value, dict) and value.get("finished") is True


def _dropped_after_failed_puts(puts: list[ConnectorOp]) -> int:
    """Non-final chunks given up: runs of failed tries of one value that never succeeded.

    A stream's chunks are put one at a time, in order (R5), so a stream's puts in
    begin order form runs of tries of one (key, value); a run ends at its first
    success. Other streams' puts may come between two tries (R5 orders a request's
    chunks only: an adapter may go on with other requests while one retries), so
    the runs are read per stream (the key without its chunk id).
    """
    streams: dict[str, list[ConnectorOp]] = {}
    for op in puts:
        streams.setdefault(op.key.rsplit("_", 1)[0], []).append(op)
    dropped = 0
    for mine in streams.values():
        i = 0
        while i < len(mine):
            ident = (mine[i].key, mine[i].value)
            succeeded = False
            while i < len(mine) and (mine[i].key, mine[i].value) == ident:
                i += 1
                if mine[i - 1].outcome == "ok":
                    succeeded = True
                    break
            if not succeeded and not _is_final(ident[1]):
                dropped += 1
    return dropped


def expected_counters(history: History, nonfinal_saves: int) -> dict[str, int]:
    """Counter values implied by *history* for a settled run with *nonfinal_saves*."""
    ops: list[ConnectorOp] = sorted(history.records(ConnectorOp), key=lambda o: o.begin)
    builds: list[BuildCall] = history.records(BuildCall)
    puts = [o for o in ops if o.op == "put"]
    gets = [o for o in ops if o.op == "get"]
    put_failures = sum(o.outcome == "error" for o in puts)
    dropped_put = _dropped_after_failed_puts(puts)
    nonfinal_builds = [b for b in builds if not b.is_final]
    return {
        "chunks_put": sum(o.outcome == "ok" for o in puts),
        "finals_put": sum(o.outcome == "ok" and _is_final(o.value) for o in puts),
        "put_failures": put_failures,
        "put_retries": put_failures - dropped_put,
        "dropped_put_failed": dropped_put,
        "build_failures": sum(b.outcome == "error" for b in builds),
        "dropped_build_failed": sum(b.outcome == "error" for b in nonfinal_builds),
        "skipped_none": sum(b.outcome == "ok" and b.result is None for b in nonfinal_builds),
        "dropped_cancelled": nonfinal_saves - len(nonfinal_builds),
        "gets": len(gets),
        "gets_empty": sum(o.outcome == "none" for o in gets),
        "get_failures": sum(o.outcome == "error" for o in gets),
    }


def stats_mismatches(stats: Any, history: History, nonfinal_saves: int) -> list[str]:
    """``"counter: stats() says A, the recording shows B"`` for every disagreeing counter."""
    if stats is None:
        return []
    out = []
    expected = expected_counters(history, nonfinal_saves)
    committed_plus_stale = sum(
        o.op == "get" and o.outcome == "ok" for o in history.records(ConnectorOp)
    )
    got_committed = getattr(stats, "committed", None)
    got_stale = getattr(stats, "stale_discarded", 0)
    if isinstance(got_committed, int) and got_committed + got_stale != committed_plus_stale:
        out.append(
            f"committed + stale_discarded: stats() says {got_committed} + {got_stale}, "
            f"the recording shows {committed_plus_stale} gets that returned a value"
        )
    for name, want in expected.items():
        got = getattr(stats, name, None)
        if isinstance(got, int) and got != want:
            out.append(f"{name}: stats() says {got}, the recording shows {want}")
    return out
