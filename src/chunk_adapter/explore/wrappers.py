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

from ..connectors.base import Connector, ConnectorWrapper
from .controller import Controller

__all__ = ["ExplorerBuilder", "ExplorerConnector"]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ExplorerConnector(ConnectorWrapper):
    """A switch point before every put and get of the wrapped connector."""

    def __init__(self, inner: Connector, ctl: Controller) -> None:
        super().__init__(inner)
        self._ctl = ctl

    def put(self, key: str, value: dict[str, Any]) -> None:
        ctl = self._ctl
        ctl.switch_point(f"put {key} {_short(value)}")
        ctl.progress += 1
        try:
            self.inner.put(key, value)
        except Exception as exc:
            ctl.note(f"  put {key} raised {exc!r}")
            raise

    def get(self, key: str) -> dict[str, Any] | None:
        ctl = self._ctl
        ctl.switch_point(f"get {key}")
        try:
            value = self.inner.get(key)
        except Exception as exc:
            ctl.note(f"  get {key} raised {exc!r}")
            raise
        if value is not None:
            ctl.progress += 1
            ctl.note(f"  get {key} -> {_short(value)}")
        return value


class ExplorerBuilder:
    """A switch point before every ``build_payload(request_id, snapshot, is_final)``."""

    def __init__(self, inner: Any, ctl: Controller) -> None:
        self.inner = inner
        self._ctl = ctl

    def __call__(self, request_id: str, snapshot: Any, is_final: bool) -> Any:
        ctl = self._ctl
        ctl.switch_point(f"build_payload({request_id!r}, {_short(snapshot, 30)}, {is_final})")
        ctl.progress += 1
        try:
            return self.inner(request_id, snapshot, is_final)
        except Exception as exc:
            ctl.note(f"  build raised {exc!r}")
            raise
