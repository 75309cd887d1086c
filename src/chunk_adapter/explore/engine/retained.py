"""R24 in a world: what an adapter still holds of requests that are closed.

At a world's quiescent cut (everything settled and polled, just before the final
``stop()``) a request is **closed** on a member when the member's last sending
call for it was a final ``save_async`` (its final is put by then: the world passed
its liveness judgement) and its last receiving call a ``cleanup_receiver`` — R24's
"nothing open": no stream, no registration, no cancel mark still waiting for a final.
:func:`retained` walks the objects reachable from each member's adapter and names
the closed requests some object still mentions: their id, or a chunk key of theirs,
as a string anywhere in the adapter's own state (attributes, containers, closures,
suspended coroutines). The harness's objects the adapter was given (the connector,
the builder, the runtime, the logger) and the explorer's own types are not walked:
they record every request on purpose.

One world's few requests decide nothing: R24 allows a record of
:data:`~chunk_adapter.rules.RECENT_REQUESTS` recent ones. A world whose closed
requests are retained is a *candidate*; the simulation repeats its program, each
copy with its own request ids (``Scenario.repeat``), until more ids than that
allowance are closed, and :func:`retained_failures` fails the execution whose
adapter still holds more of them than the allowance.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Mapping
from typing import Any, cast

from ...history import History
from ...oracles import CallRecord, split_key
from ...rules import R24, RECENT_REQUESTS
from ..runtime.tasks import Failure
from .result import Execution

__all__ = ["Held", "closed_requests", "holders", "reachable_names", "retained", "retained_failures"]

NOT_THE_ADAPTER = (
    "chunk_adapter.explore.",
    "chunk_adapter.history",
    "chunk_adapter.bed.",
    "chunk_adapter.connectors.",
    "chunk_adapter.oracles.",
    "chunk_adapter.runtime",
    "logging",
    "greenlet",
)
"""Modules whose objects are the harness's, not the adapter's state: not walked."""
_OPAQUE = (type, types.ModuleType, types.CodeType, types.FrameType, types.BuiltinFunctionType)
_SENDING = ("save_async", "cancel_sender")
_RECEIVING = ("load_async", "cleanup_receiver")
_SHOWN = 3
"""Closed request ids a failure names as examples."""


def closed_requests(history: History, member: str) -> set[str]:
    """The requests closed on *member* (module doc), from its calls that returned."""
    last_send: dict[str, CallRecord] = {}
    last_recv: dict[str, CallRecord] = {}
    for call in history.records(CallRecord):
        if call.adapter != member or call.error is not None or call.request_id is None:
            continue
        if call.call in _SENDING:
            last_send[call.request_id] = call
        elif call.call in _RECEIVING:
            last_recv[call.request_id] = call
    closed = set()
    for rid in set(last_send) | set(last_recv):
        send, recv = last_send.get(rid), last_recv.get(rid)
        sent = send is None or (send.call == "save_async" and bool(send.args[1]))
        cleaned = recv is None or recv.call == "cleanup_receiver"
        if sent and cleaned:
            closed.add(rid)
    return closed


def reachable_names(root: object, names: set[str]) -> dict[str, str]:
    """The *names* some object reachable from *root* mentions (a string equal to one, or a
    chunk key ``rid_stage_n`` of one), each with where: the attributes walked from *root*
    to it (``"_sends._last"``; ``""``: held by *root*'s containers themselves). Types,
    modules, code, frames and the harness's objects (:data:`NOT_THE_ADAPTER`) are not
    walked; a function only through its closure and defaults (not its globals)."""
    seen = {id(root)}
    stack: list[tuple[object, str]] = [(root, "")]
    found: dict[str, str] = {}
    while stack:
        obj, where = stack.pop()
        for ref, at in _children(obj, where):
            if id(ref) in seen:
                continue
            seen.add(id(ref))
            kind = type(ref)  # not isinstance: a proxy answers for its target, or raises
            if issubclass(kind, str):
                parts = split_key(ref) if ref not in names else (ref, 0, 0)
                if parts is not None and parts[0] in names:
                    found.setdefault(parts[0], at)
                continue
            module = getattr(kind, "__module__", None)
            if issubclass(kind, _OPAQUE) or str(module).startswith(NOT_THE_ADAPTER):
                continue
            stack.append((ref, at))
    return found


def _children(obj: object, where: str) -> list[tuple[Any, str]]:
    """What *obj* refers to, each with the attribute path that reaches it."""
    if issubclass(type(obj), dict):  # the collector does not visit a dict's str keys
        mapping = cast("dict[Any, Any]", obj)
        return [(ref, where) for ref in (*mapping.keys(), *mapping.values())]
    if type(obj) is types.FunctionType:
        refs = [*(obj.__closure__ or ()), *(obj.__defaults__ or ()), obj.__kwdefaults__]
        return [(ref, where) for ref in refs]
    named: list[tuple[Any, str]] = []
    try:
        attrs = vars(obj)
    except Exception:  # no __dict__ (slots, C objects), or a proxy whose target is gone
        attrs = {}
    if isinstance(attrs, dict):
        dot = "." if where else ""
        named = [(value, f"{where}{dot}{name}") for name, value in attrs.items()]
    return [*named, *((ref, where) for ref in gc.get_referents(obj))]


Held = dict[str, dict[str, str]]
"""``member -> {closed request: where its adapter holds it}`` (:func:`reachable_names`)."""


def retained(adapters: Mapping[str, object], history: History) -> Held:
    """What each member's adapter still holds of the requests closed on it (members that
    hold none left out)."""
    held: Held = {}
    for member, adapter in adapters.items():
        closed = closed_requests(history, member)
        if closed:
            names = reachable_names(adapter, closed)
            if names:
                held[member] = names
    return held


def holders(held: Held) -> frozenset[tuple[str, str]]:
    """``(member, where)`` of everything *held*: which of an adapter's records hold closed
    requests (two worlds with the same holders show the same record)."""
    return frozenset((member, at) for member, names in held.items() for at in names.values())


def retained_failures(execution: Execution) -> list[Failure]:
    """An R24 failure for each member that holds more closed requests than R24 allows."""
    found = []
    for member, names in execution.retained.items():
        if len(names) > RECENT_REQUESTS:
            shown = ", ".join(repr(n) for n in sorted(names)[:_SHOWN])
            where = sorted({at or "itself" for at in names.values()})
            found.append(
                Failure(
                    "violation",
                    f"{R24}: the {member} still holds {len(names)} closed requests ({shown}, "
                    f"...; in {', '.join(where)}) after their finals were put and their "
                    f"registrations cleaned up; R24 allows a record of at most "
                    f"{RECENT_REQUESTS} recent requests",
                    (R24,),
                )
            )
    return found
