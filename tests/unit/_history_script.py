"""Hand-written histories for the oracle tests: :class:`Script` and its shorthands.

Histories are scripted record by record with :class:`Script`; every record
takes fresh sequence numbers, so records are strictly ordered unless a test
opens an operation early (``begin=``) to make it overlap others.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.history import BuildCall, ConnectorOp, History
from chunk_adapter.oracles import CallRecord, check

__all__ = ["Script", "c", "received", "sent"]


class Script:
    """Builds a History by hand (module doc)."""

    def __init__(self) -> None:
        self.h = History()

    def start(self) -> int:
        return self.h.tick()

    def call(
        self,
        call: Any,
        rid: str | None = None,
        args: tuple[Any, ...] = (),
        result: Any = None,
        error: BaseException | None = None,
        adapter: str = "adapter",
    ) -> None:
        b = self.h.tick()
        self.h.append(CallRecord(call, rid, args, result, error, b, self.h.tick(), "main", adapter))

    def save(self, rid: str, snap: Any, final: bool = False) -> None:
        self.call("save_async", rid, (snap, final))

    def cancel(self, rid: str) -> None:
        self.call("cancel_sender", rid)

    def load(self, rid: str) -> None:
        self.call("load_async", rid)

    def cleanup(self, rid: str) -> None:
        self.call("cleanup_receiver", rid)

    def poll(self, result: dict[str, list[dict[str, Any]]]) -> None:
        self.call("poll_ready", None, (), result)

    def stop(self) -> None:
        self.call("stop")

    def build(self, rid: str, snap: Any, final: bool = False, *, fail: bool = False) -> None:
        b = self.h.tick()
        self.h.append(
            BuildCall(
                rid,
                snap,
                final,
                None if fail else snap,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
            )
        )

    def put(
        self, key: str, data: Any, finished: bool = False, *, fail: bool = False, value: Any = None
    ) -> None:
        b = self.h.tick()
        v = value if value is not None else {"data": data, "finished": finished}
        self.h.append(
            ConnectorOp(
                "put",
                key,
                v,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
            )
        )

    def get(self, key: str, value: Any = None, *, begin: int | None = None) -> None:
        b = begin if begin is not None else self.h.tick()
        outcome = "none" if value is None else "ok"
        self.h.append(ConnectorOp("get", key, value, outcome, None, b, self.h.tick(), "recv"))

    def rules(self, *, quiescent: bool = False, put_tries: int | None = 3) -> list[str]:
        return [v.rule for v in check(self.h, quiescent=quiescent, put_tries=put_tries)]


def c(data: Any, finished: bool = False) -> dict[str, Any]:
    return {"data": data, "finished": finished}


def sent(s: Script, rid: str, items: list[tuple[Any, bool]]) -> None:
    """Save, build and put *items* of one request correctly, in order."""
    for snap, final in items:
        s.save(rid, snap, final)
    for i, (snap, final) in enumerate(items):
        s.build(rid, snap, final)
        s.put(f"{rid}_1_{i}", snap, final)


def received(s: Script, rid: str, values: list[dict[str, Any]]) -> None:
    for i, v in enumerate(values):
        s.put(f"{rid}_1_{i}", v["data"], v["finished"])
        s.get(f"{rid}_1_{i}", v)
