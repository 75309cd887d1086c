"""The per-call watchdog of a verify worker: a stuck call is named, a slow stage is not a bug.

Every adapter a stage builds through the watched factory is wrapped in a
:class:`WatchedAdapter`, which registers each of the six contract calls while
it runs. A watchdog thread looks at the calls in flight: one past its own
bound (a scheduler call blocked for seconds breaks R3; a ``stop()`` that does
not return breaks R18) is a finding that names the call. A stage that merely
runs out of budget, with no call stuck, is inconclusive — never a violation.

The bounds are far above what the contract allows (scheduler calls return in
microseconds; ``stop()`` within its join timeout, 1 s by default), so a loaded
machine running two verifies at once cannot trip them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..factory import AdapterFactory
from ..rules import R3, R18

__all__ = ["CALL_BOUNDS", "CallWatch", "Stuck", "WatchedAdapter"]

CALL_BOUNDS: dict[str, tuple[float, str]] = {
    "save_async": (10.0, R3),
    "cancel_sender": (10.0, R3),
    "load_async": (10.0, R3),
    "poll_ready": (10.0, R3),
    "cleanup_receiver": (10.0, R3),
    "stop": (20.0, R18),
}
"""Per call: seconds before a call in flight is stuck, and the rule it then breaks."""


@dataclass(frozen=True)
class Stuck:
    """A call into the adapter that has been in flight past its bound."""

    call: str
    seconds: float
    bound: float
    rule: str

    def describe(self) -> str:
        why = (
            "stop() must return within its join timeout even with work blocked"
            if self.rule == R18
            else "a scheduler call must never block on the connector, a build or a lock "
            "held across slow work"
        )
        return (
            f"{self.call} did not return within {self.bound:g} s (still in flight after "
            f"{self.seconds:.1f} s): {self.rule}, {why}"
        )


class CallWatch:
    """The calls in flight on every watched adapter of one worker."""

    def __init__(self, bounds: dict[str, tuple[float, str]] | None = None) -> None:
        self.bounds = dict(CALL_BOUNDS if bounds is None else bounds)
        # _lock guards _inflight; taken briefly by every calling thread (enter/leave)
        # and by the watchdog when it looks. Nobody waits on it for long.
        self._lock = threading.Lock()
        self._inflight: dict[int, tuple[str, str, float]] = {}  # token -> (method, text, start)
        self._tokens = itertools.count()

    def enter(self, method: str, text: str) -> int:
        token = next(self._tokens)
        with self._lock:
            self._inflight[token] = (method, text, time.monotonic())
        return token

    def leave(self, token: int) -> None:
        with self._lock:
            self._inflight.pop(token, None)

    def stuck(self) -> list[Stuck]:
        """The calls in flight past their bound, longest first."""
        now = time.monotonic()
        with self._lock:
            calls = list(self._inflight.values())
        out = []
        for method, text, start in calls:
            bound, rule = self.bounds.get(method, (float("inf"), ""))
            if now - start > bound:
                out.append(Stuck(text, now - start, bound, rule))
        return sorted(out, key=lambda s: -s.seconds)

    def factory(self, factory: AdapterFactory) -> AdapterFactory:
        """*factory*, with every adapter it builds watched."""

        def watched(*args: Any, **kwargs: Any) -> Any:
            return WatchedAdapter(factory(*args, **kwargs), self)

        for attr in ("__module__", "__qualname__", "__name__", "__doc__", "__wrapped__"):
            if hasattr(factory, attr):
                setattr(watched, attr, getattr(factory, attr))
        watched.__wrapped__ = factory  # type: ignore[attr-defined]
        # Keyword acceptance is judged on the user's factory, not on this wrapper.
        watched.__signature__ = _signature(factory)  # type: ignore[attr-defined]
        return watched


def _signature(factory: Callable[..., Any]) -> Any:
    import inspect

    try:
        return inspect.signature(factory)
    except (TypeError, ValueError):
        return inspect.Signature(
            [
                inspect.Parameter("connector", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
            ]
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class WatchedAdapter:
    """Forwards everything to the adapter; the six contract calls register while they run."""

    def __init__(self, adapter: Any, watch: CallWatch) -> None:
        self.__dict__["_adapter"] = adapter
        self.__dict__["_watch"] = watch

    def _call(self, method: str, *args: Any) -> Any:
        text = f"{method}({', '.join(_short(a) for a in args)})"
        watch: CallWatch = self.__dict__["_watch"]
        token = watch.enter(method, text)
        try:
            return getattr(self.__dict__["_adapter"], method)(*args)
        finally:
            watch.leave(token)

    def save_async(self, request_id: Any, obj: Any, is_final: Any) -> Any:
        return self._call("save_async", request_id, obj, is_final)

    def cancel_sender(self, request_id: Any) -> Any:
        return self._call("cancel_sender", request_id)

    def load_async(self, request_id: Any) -> Any:
        return self._call("load_async", request_id)

    def poll_ready(self) -> Any:
        return self._call("poll_ready")

    def cleanup_receiver(self, request_id: Any) -> Any:
        return self._call("cleanup_receiver", request_id)

    def stop(self) -> Any:
        return self._call("stop")

    def __enter__(self) -> WatchedAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_adapter"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_adapter"], name, value)

    def __repr__(self) -> str:
        return f"<watched {self.__dict__['_adapter']!r}>"
