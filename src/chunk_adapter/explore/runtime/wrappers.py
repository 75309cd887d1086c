"""Switch points around the connector and ``build_payload`` the explorer hands the adapter.

The explorer wraps whatever connector and builder it gives the factory, so a
connector ``put``/``get`` and a ``build_payload`` call are switch points too: the
strategy may run another thread just before each. The call itself then runs
to completion without a switch (it is one atomic step), and its result goes in
the trace. Each call that changes something (a put, a build, a get that found
a value) counts as *progress*, which ``settle()`` watches for.
"""

from __future__ import annotations

from typing import Any

from ...connectors.base import Connector, ConnectorWrapper, Subscribe, subscription
from .controller import Controller
from .footprint import HIST_ALL, PROGRESS, RECV, SEND, hist, request_of
from .primitives import HeldThrough

__all__ = ["ExplorerBuilder", "ExplorerConnector"]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ExplorerConnector(ConnectorWrapper):
    """A switch point before every put and get of the wrapped connector."""

    def __init__(self, inner: Connector, ctl: Controller) -> None:
        super().__init__(inner)
        self._ctl = ctl
        # A get that removes what it returns writes its key (DPOR's footprints); unknown: it does.
        self._get_mode = "w"
        probe: Any = inner
        while probe is not None:
            if hasattr(probe, "consume_on_get"):
                self._get_mode = "w" if probe.consume_on_get else "r"
                break
            probe = getattr(probe, "inner", None)

    def _touch(self, key: str, mode: str, faults: str) -> None:
        touch = self._ctl.touch
        touch(("key", key), mode)
        touch(("faults", faults), "r")  # an injected fault armed for any key may fire here
        for recorded in hist(request_of(key), SEND if faults == "put" else RECV):
            touch(recorded, "w")  # the history records it, on the put's or the get's side
        touch(HIST_ALL, "r")

    @property
    def subscribe(self) -> Subscribe:
        inner = subscription(self.inner)
        if inner is None:
            raise AttributeError(f"{self.inner!r} offers no subscribe (it is polled)")
        touch = self._ctl.touch

        def subscribe(callback: Any) -> Any:
            touch(("subscribers",), "w")  # puts call back whoever subscribed before them
            unsubscribe = inner(callback)

            def unsubscribed() -> None:
                touch(("subscribers",), "w")
                unsubscribe()

            return unsubscribed

        return subscribe

    def put(self, key: str, value: dict[str, Any]) -> None:
        ctl = self._ctl
        ctl.effect_point(f"put {key} {_short(value)}")
        ctl.progress += 1
        if ctl.tracking:
            self._touch(key, "w", "put")
            ctl.touch(PROGRESS, "c")
            ctl.touch(("subscribers",), "r")
        try:
            with HeldThrough(ctl, f"put {key}"):
                self.inner.put(key, value)
        except Exception as exc:
            ctl.touch(("faults", "put"), "w")
            ctl.note(f"  put {key} raised {exc!r}")
            raise

    def get(self, key: str) -> dict[str, Any] | None:
        ctl = self._ctl
        ctl.effect_point(f"get {key}")
        if ctl.tracking:
            self._touch(key, self._get_mode, "get")
        try:
            with HeldThrough(ctl, f"get {key}"):
                value = self.inner.get(key)
        except Exception as exc:
            ctl.touch(("faults", "get"), "w")
            ctl.note(f"  get {key} raised {exc!r}")
            raise
        if value is not None:
            ctl.progress += 1
            if ctl.tracking:
                ctl.touch(PROGRESS, "c")
            ctl.note(f"  get {key} -> {_short(value)}")
        return value


class ExplorerBuilder:
    """A switch point before every ``build_payload(request_id, snapshot, is_final)``."""

    def __init__(self, inner: Any, ctl: Controller) -> None:
        self.inner = inner
        self._ctl = ctl

    def __call__(self, request_id: str, snapshot: Any, is_final: bool) -> Any:
        ctl = self._ctl
        ctl.effect_point(f"build_payload({request_id!r}, {_short(snapshot, 30)}, {is_final})")
        ctl.progress += 1
        if ctl.tracking:
            for recorded in hist(request_id, SEND):
                ctl.touch(recorded, "w")  # recorded; a fail_build for it may fire
            ctl.touch(HIST_ALL, "r")
            ctl.touch(PROGRESS, "c")
        try:
            with HeldThrough(ctl, f"build_payload({request_id!r})"):
                return self.inner(request_id, snapshot, is_final)
        except Exception as exc:
            ctl.note(f"  build raised {exc!r}")
            raise
