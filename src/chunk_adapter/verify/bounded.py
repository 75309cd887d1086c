"""Run a call on a helper thread with a deadline, so a hang is a finding, not a hung tool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

__all__ = ["Hang", "bounded", "stopping", "wait_until"]

T = TypeVar("T")


class Hang(AssertionError):
    """A call under verification did not return within its bound."""


def bounded(fn: Callable[[], T], seconds: float, what: str) -> T:
    """Return ``fn()``; raise :class:`Hang` if it has not returned after *seconds*.

    The call runs on a daemon thread, which is abandoned if it hangs (the
    verify worker is a separate process that exits afterwards).
    """
    box: dict[str, Any] = {}
    # done: set by the helper thread when fn returned or raised; we wait on it.
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"verify-{what}", daemon=True).start()
    if not done.wait(seconds):
        raise Hang(f"{what} did not return within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def wait_until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll *predicate* (every ms) until it holds; :class:`Hang` after *seconds*."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise Hang(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.001)


@contextmanager
def stopping(
    *adapters: Any, seconds: float = 2.0, first: Callable[[], None] = lambda: None
) -> Iterator[None]:
    """Stop *adapters* (bounded) when the block ends, after calling *first* (release gates).

    After a failure in the block they are stopped quietly, so the first
    finding stands instead of a hang in the clean-up hiding it.
    """
    try:
        yield
    except BaseException:
        first()
        for adapter in adapters:
            with suppress(Exception):
                bounded(adapter.stop, seconds, "stop()")
        raise
    first()
    for adapter in adapters:
        bounded(adapter.stop, seconds, "stop()")
