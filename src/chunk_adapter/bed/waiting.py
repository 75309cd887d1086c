"""Bounded calls and waits: the one place a driver or a test waits with a deadline.

Every wait here has a deadline recomputed from ``time.monotonic()``, so a hung
adapter becomes a finding (or a failed test), never a hung tool:

- :func:`call_in_thread` runs a call on a daemon helper thread and waits at
  most a bound for it; the :class:`Outcome` says whether it returned, what it
  returned or raised, and how long it took. An abandoned helper is left
  running (the callers are test processes, or verify workers that exit).
- :func:`call_bounded` is that call for a caller that wants the value:
  :class:`Hang` if it did not return in time, its exception re-raised.
- :func:`wait_until` polls a predicate until it holds (:class:`Hang` after the
  bound); :func:`holds_for` watches one for a fixed window, to show that
  something does *not* happen (never to wait for something to happen).
- :func:`stopping` stops adapters, bounded, when a block ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..finding import Finding, first_line
from ..outcome import raised_by_suite
from ..rules import R3, R18, R23

__all__ = [
    "FREE_STOP_BOUND",
    "POLL_INTERVAL",
    "STOP_RULES",
    "UNKNOWN_JOIN_STOP_BOUND",
    "Hang",
    "Outcome",
    "Raised",
    "blocked_stop_bound",
    "call_bounded",
    "call_in_thread",
    "holds_for",
    "join_bound",
    "shown_stop_bound",
    "stopping",
    "wait_until",
]

T = TypeVar("T")

POLL_INTERVAL = 0.001
"""Seconds between two looks at a predicate (a look is cheap; the wait is what is bounded)."""
STOP_RULES = (R18,)
"""The rule a ``stop()`` that does not return within its bound breaks (docs/contract.md)."""
FREE_STOP_BOUND = 0.25
"""Seconds ``stop()`` may take when nothing is blocked (the contract: well under 0.1 s)."""


def blocked_stop_bound(join_timeout: float | None) -> float:
    """Seconds ``stop()`` may take when a build, put or get is blocked forever.

    The contract: within the join timeout. Allowed: 1.5 x that plus 0.25 s of
    scheduling slack, far above the milliseconds a correct adapter overshoots
    by, and below the 2 x of joining each thread with the full timeout. When the
    adapter's join timeout is unknown (``None``: it exposes no ``join_timeout``),
    the bound is :data:`UNKNOWN_JOIN_STOP_BOUND`, what any sane join timeout keeps.
    """
    if join_timeout is None:
        return UNKNOWN_JOIN_STOP_BOUND
    return 1.5 * join_timeout + 0.25


UNKNOWN_JOIN_STOP_BOUND = 5.0
"""Seconds ``stop()`` may take with work blocked forever when the suite cannot read the
adapter's join timeout (R18): an adapter that keeps its own (say 2 s) must not be held
to the reference's 1 s. The same 5 s the examples stage's stop probe allows."""


def shown_stop_bound(shown: float | None) -> float:
    """:func:`blocked_stop_bound` for a join timeout the adapter shows (a ``join_timeout``
    attribute) but was not surely given: it only ever loosens the bound (it may mean
    something else: milliseconds, one thread's share), and the reference's 1 s is never
    assumed. ``None``: it shows none."""
    if shown is None:
        return blocked_stop_bound(None)
    return max(blocked_stop_bound(None), blocked_stop_bound(shown))


def join_bound(adapter: Any) -> float:
    """:func:`shown_stop_bound` for *adapter*'s ``join_timeout`` attribute, if a number."""
    try:
        shown = getattr(adapter, "join_timeout", None)
    except Exception:  # an adapter whose attribute lookup raises shows no join timeout
        shown = None
    if isinstance(shown, (int, float)) and not isinstance(shown, bool):
        return shown_stop_bound(float(shown))
    return shown_stop_bound(None)


class Hang(AssertionError):
    """A call did not return, or a condition did not come about, within its bound.

    It carries what a reader of the finding needs as data: *what* was waited for,
    the bound in *seconds*, *call* (``True``: a call that did not return; ``False``:
    a condition that did not come about), and the contract *rules* the caller says
    such a hang breaks (``()``: the caller named none). The message says the same
    for humans, the rules first: ``"R11: the final chunk of 'v' did not happen
    within 10 s"``; nothing reads the rules back out of it.
    """

    def __init__(
        self,
        what: str,
        seconds: float,
        call: bool = True,
        rules: tuple[str, ...] = (),
        state: str = "",
    ) -> None:
        self.what = what
        self.seconds = seconds
        self.call = call
        self.rules = tuple(rules)
        self.state = state
        named = f"{', '.join(self.rules)}: " if self.rules else ""
        verb = "return" if call else "happen"
        super().__init__(f"{named}{what} did not {verb} within {seconds:g} s{state}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its data (a worker hands it on)
        return (type(self), (self.what, self.seconds, self.call, self.rules, self.state))

    @property
    def broken(self) -> tuple[str, ...]:
        """The rules this hang breaks: those its caller named, else R3 for a call that did
        not return (a scheduler call must not block) and R23 for a wait that ran out
        (something that must happen did not)."""
        return self.rules or ((R3,) if self.call else (R23,))

    @property
    def finding(self) -> Finding:
        """This hang as every driver reports a failure: the rules its caller named (``()``:
        none; the caller decides what an unnamed hang breaks), kind ``"hang"`` for a call
        that did not return and ``"timeout"`` for a condition that did not come about, the
        message, and the state it ended in as the evidence."""
        text = str(self)
        return Finding(
            self.rules, "hang" if self.call else "timeout", first_line(text), self.state.strip()
        )


@dataclass
class Outcome(Generic[T]):
    """What :func:`call_in_thread` saw: ``elapsed`` is ``None`` when the call had not
    returned within the bound (it may still be running on :attr:`thread`)."""

    thread: threading.Thread
    elapsed: float | None = None
    value: T | None = None
    error: BaseException | None = None
    after: Any = None  # what the *after* hook returned, on the helper thread

    @property
    def returned(self) -> bool:
        return self.elapsed is not None


def call_in_thread(
    fn: Callable[[], T],
    seconds: float,
    name: str,
    after: Callable[[], Any] | None = None,
) -> Outcome[T]:
    """Call *fn* on a daemon thread named *name*; wait at most *seconds* for it.

    *after*, if given, is called on the helper thread right after *fn* ended
    (returned or raised): a history's sequence number taken there orders
    later events after the call.
    """
    box: dict[str, Any] = {}
    # done: set by the helper thread once fn ended and *after* ran; the caller waits on it.
    done = threading.Event()

    def run() -> None:
        start = time.perf_counter()
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller through the outcome
            box["error"] = exc
        finally:
            box["elapsed"] = time.perf_counter() - start
            if after is not None:
                box["after"] = after()
            done.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not done.wait(seconds):
        return Outcome(thread)
    return Outcome(thread, box["elapsed"], box.get("value"), box.get("error"), box.get("after"))


class Raised(AssertionError):
    """A call that must return raised instead (``stop()``, R18: it returns, and a second
    call is as good as the first). It carries *what* was called, the *error*'s repr and
    the contract *rules* the caller says the call keeps; the message says the same,
    the rules first."""

    def __init__(self, what: str, error: str, rules: tuple[str, ...]) -> None:
        self.what, self.error, self.rules = what, error, tuple(rules)
        super().__init__(f"{', '.join(self.rules)}: {what} raised {error}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its data (a worker hands it on)
        return (type(self), (self.what, self.error, self.rules))


def call_bounded(
    fn: Callable[[], T],
    seconds: float,
    what: str,
    name: str = "",
    *,
    rules: tuple[str, ...] = (),
) -> T:
    """Return ``fn()``; raise :class:`Hang` (carrying *rules*) if it has not returned
    after *seconds*.

    An exception from *fn* is re-raised here; given *rules* (the call must return, as
    ``stop()`` must: R18), one raised through the adapter's code is :class:`Raised`,
    carrying them. *name* names the helper thread (default ``"bounded-" + what``).
    """
    outcome = call_in_thread(fn, seconds, name or f"bounded-{what}")
    if not outcome.returned:
        raise Hang(what, seconds, call=True, rules=rules)
    if outcome.error is not None:
        if rules and not raised_by_suite(outcome.error):
            raise Raised(what, repr(outcome.error), rules) from outcome.error
        raise outcome.error
    value: T = outcome.value  # type: ignore[assignment]  # fn returned: value is its result
    return value


def wait_until(
    predicate: Callable[[], object],
    seconds: float,
    what: str,
    detail: Callable[[], str] | None = None,
    interval: float = POLL_INTERVAL,
    *,
    rules: tuple[str, ...] = (),
) -> None:
    """Look at *predicate* every *interval* seconds until it holds; :class:`Hang` after
    *seconds*, naming *what*, carrying *rules* and, with *detail*, the state it ended in."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() >= deadline:
            state = f"; state: {detail()}" if detail is not None else ""
            raise Hang(what, seconds, call=False, rules=rules, state=state)
        time.sleep(interval)


def holds_for(
    predicate: Callable[[], object], window: float, interval: float = POLL_INTERVAL
) -> bool:
    """Whether *predicate* stays true for *window* seconds: ``False`` as soon as it breaks.

    An observation, not a wait: use it to show that something does not happen.
    """
    deadline = time.monotonic() + window
    while predicate():
        if time.monotonic() >= deadline:
            return True
        time.sleep(interval)
    return False


@contextmanager
def stopping(
    *adapters: Any, seconds: float = 2.0, first: Callable[[], None] = lambda: None
) -> Iterator[None]:
    """Stop *adapters* (bounded) when the block ends, after calling *first* (release gates).

    After a failure in the block they are stopped quietly, so the first
    finding stands instead of a hang in the clean-up hiding it. A ``stop()``
    that does not return is a :class:`Hang` carrying R18 (stop is prompt).
    """
    try:
        yield
    except BaseException:
        first()
        for adapter in adapters:
            with suppress(Exception):
                call_bounded(adapter.stop, seconds, "stop()", rules=STOP_RULES)
        raise
    first()
    for adapter in adapters:
        call_bounded(adapter.stop, seconds, "stop()", rules=STOP_RULES)
