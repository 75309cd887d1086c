"""Waiting for asynchronous outcomes without sleeping blindly (the tests' side).

The waiting itself is :mod:`chunk_adapter.bed.waiting`'s, the one set of
bounded calls and waits the suite's drivers use too; this module gives the
tests their defaults and messages. ``wait_until`` polls a predicate inside a
bounded deadline and fails with a message that says what it waited for.
``holds_for`` is its negative twin: it watches a predicate for a fixed
*observation window* and fails as soon as it turns false (used only to show
that something does NOT happen, never to wait for something to happen).
``Inbox`` accumulates what ``poll_ready`` hands out. ``returns_within`` runs
a call that must not block on a helper thread, so a blocking adapter fails the
test instead of hanging it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chunk_adapter.bed import waiting

__all__ = ["Inbox", "holds_for", "returns_within", "wait_until"]

POLL_INTERVAL = 0.002


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    what: str = "the condition",
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll *predicate* every 2 ms until it is true; fail after *timeout* seconds."""
    waiting.wait_until(predicate, timeout, what, detail, POLL_INTERVAL)


def holds_for(
    predicate: Callable[[], object],
    window: float,
    what: str = "the condition",
    detail: Callable[[], str] | None = None,
) -> None:
    """Check *predicate* stays true for a *window* of seconds (an observation, not a wait)."""
    if not waiting.holds_for(predicate, window, POLL_INTERVAL):
        extra = f"; state: {detail()}" if detail is not None else ""
        raise AssertionError(f"expected {what} to hold for {window:.2f}s, it broke{extra}")


def returns_within(bound: float, fn: Callable[[], Any], what: str) -> tuple[Any, float]:
    """Run *fn* on a helper thread; fail if it does not return within *bound* seconds.

    Returns ``(result, elapsed)``. An exception from *fn* is re-raised here.
    """
    outcome = waiting.call_in_thread(fn, bound, f"returns-within:{what}")
    if outcome.elapsed is None:
        raise AssertionError(f"{what} did not return within {bound:.2f}s: it blocks")
    if outcome.error is not None:
        raise outcome.error
    return outcome.value, outcome.elapsed


class Inbox:
    """Everything an adapter's ``poll_ready`` handed out, per request, in order."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.chunks: dict[str, list[dict[str, Any]]] = {}
        self.polls = 0

    def poll(self) -> dict[str, list[dict[str, Any]]]:
        got: dict[str, list[dict[str, Any]]] = self.adapter.poll_ready()
        self.polls += 1
        assert isinstance(got, dict), f"R15: poll_ready must return a dict, got {got!r}"
        for rid, values in got.items():
            assert values, f"R15: poll_ready listed {rid!r} with nothing new: {got!r}"
            self.chunks.setdefault(rid, []).extend(values)
        return got

    def of(self, rid: str) -> list[dict[str, Any]]:
        return list(self.chunks.get(rid, []))

    def data(self, rid: str) -> list[Any]:
        return [value["data"] for value in self.chunks.get(rid, [])]

    def finished(self, rid: str) -> bool:
        values = self.chunks.get(rid, [])
        return bool(values) and values[-1].get("finished") is True

    def wait_final(self, *rids: str, timeout: float = 10.0) -> None:
        """Poll until every request in *rids* has received its final chunk."""

        def done() -> bool:
            self.poll()
            return all(self.finished(rid) for rid in rids)

        wait_until(done, timeout, f"the final chunk of {rids}", self.describe)

    def wait_count(self, rid: str, count: int, timeout: float = 10.0) -> None:
        """Poll until *rid* has received at least *count* chunks."""

        def enough() -> bool:
            self.poll()
            return len(self.chunks.get(rid, [])) >= count

        wait_until(enough, timeout, f"{count} chunks of {rid!r}", self.describe)

    def describe(self) -> str:
        return f"received so far {self.chunks!r}"
