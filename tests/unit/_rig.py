"""The unit tests' rig: builds adapters and gates for one test and tears them down.

``Rig.adapter(...)`` builds the adapter under test from the ``adapter_factory``
fixture (``--adapter pkg.mod:factory``; the reference adapter by default), so
contract tests also run against third-party adapters. Options the factory does
not take (``idle_backoff``, ``join_timeout`` ...) are left out; a test that
needs one asks ``rig.accepts(name)``. ``Rig.reference(...)`` builds the
reference ``ChunkAdapter`` for tests of reference-only features. ``close``
releases every gate the rig handed out, then stops every adapter.

Also: ``chunk`` (a wire value) and helpers that read a ``RecordingConnector``.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.bed.stack import Bed
from chunk_adapter.connectors import (
    GatedBuilder,
    GatedConnector,
    RecordingConnector,
    identity_build,
)
from chunk_adapter.connectors.base import Connector
from chunk_adapter.connectors.builders import BuildFn
from chunk_adapter.factory import AdapterFactory, AdapterLike, takes_keyword
from chunk_adapter.history import ConnectorOp, History
from tests.unit._wait import Inbox, wait_until

__all__ = [
    "DEFAULT_JOIN_TIMEOUT",
    "RCV_STAGE",
    "RULES_KEY",
    "RULE_MAP_ENV",
    "SND_STAGE",
    "GetsPerRequest",
    "Rig",
    "chunk",
    "gets",
    "ok_puts",
    "wait_recv_passed",
]

RULE_MAP_ENV = "CHUNK_ADAPTER_RULE_MAP"  # a path: conftest dumps {nodeid: [rules]} there
RULES_KEY = pytest.StashKey[dict[str, list[str]]]()  # conftest stashes the same map
SND_STAGE = 0
RCV_STAGE = 1
DEFAULT_JOIN_TIMEOUT = 1.0  # the reference default; assumed for factories without the option


class Rig:
    """Builds adapters and gates for one test; ``close`` tears them all down."""

    def __init__(self, factory: AdapterFactory, spec: str, nodeid: str) -> None:
        self.factory = factory
        self.spec = spec
        self.nodeid = nodeid
        self._adapters: list[Any] = []
        self._gated: list[GatedBuilder | Bed] = []

    @property
    def repro(self) -> str:
        return f"reproduce: python -m pytest '{self.nodeid}' -p no:randomly --adapter {self.spec}"

    def accepts(self, option: str) -> bool:
        """Whether the factory under test takes keyword *option*."""
        return takes_keyword(self.factory, option)

    def adapter(self, connector: Connector, *, stage_id: int, **options: Any) -> AdapterLike:
        """An adapter from the factory under test; unsupported options are left out."""
        contract = {"src_stage_id", "build_payload"}
        kwargs = {k: v for k, v in options.items() if k in contract or self.accepts(k)}
        adapter = self.factory(connector, stage_id=stage_id, **kwargs)
        self._adapters.append(adapter)
        return adapter

    def pair(self, connector: Connector, **options: Any) -> tuple[AdapterLike, AdapterLike]:
        """A sender at stage 0 and a receiver at stage 1 (keys ``f"{rid}_0_{n}"``)."""
        build = options.pop("build_payload", None)
        snd = self.adapter(connector, stage_id=SND_STAGE, build_payload=build, **options)
        rcv = self.adapter(connector, stage_id=RCV_STAGE, **options)
        return snd, rcv

    def receiving(
        self, connector: Connector, *rids: str, **options: Any
    ) -> tuple[AdapterLike, AdapterLike, Inbox]:
        """:meth:`pair`, an :class:`Inbox` on the receiver, and *rids* registered with it
        (``load_async``, in order)."""
        snd, rcv = self.pair(connector, **options)
        inbox = Inbox(rcv)
        for rid in rids:
            rcv.load_async(rid)
        return snd, rcv, inbox

    def reference(self, connector: Connector, *, stage_id: int, **options: Any) -> ChunkAdapter:
        """The reference adapter itself (for stats(), check_invariants, option checks)."""
        adapter = ChunkAdapter(connector, stage_id=stage_id, **options)
        self._adapters.append(adapter)
        return adapter

    def join_timeout(self, wanted: float) -> float:
        """The join timeout an adapter built with ``join_timeout=wanted`` will use."""
        return wanted if self.accepts("join_timeout") else DEFAULT_JOIN_TIMEOUT

    def gated_connector(self, inner: Connector) -> GatedConnector:
        """A :class:`~chunk_adapter.bed.Bed`'s gated layer over *inner* (the test picks
        the stack below it); :meth:`close` opens its gates."""
        bed = Bed(base=inner, gated=True)
        self._gated.append(bed)
        return bed.gated

    def gated_builder(
        self, fn: BuildFn = identity_build, history: History | None = None
    ) -> GatedBuilder:
        builder = GatedBuilder(fn, history)
        self._gated.append(builder)
        return builder

    def close(self) -> None:
        for gated in self._gated:
            gated.release_all()
        for adapter in self._adapters:
            adapter.stop()


def chunk(data: Any, finished: bool = False) -> dict[str, Any]:
    """The wire value of one chunk (R2)."""
    return {"data": data, "finished": finished}


def gets(rec: RecordingConnector, prefix: str = "") -> list[ConnectorOp]:
    """Recorded gets whose key starts with *prefix*, in the order they began."""
    ops = [op for op in rec.history.records(ConnectorOp) if op.op == "get"]
    return sorted((op for op in ops if op.key.startswith(prefix)), key=lambda op: op.begin)


def ok_puts(rec: RecordingConnector, prefix: str = "") -> list[ConnectorOp]:
    """Recorded successful puts whose key starts with *prefix*, in the order they ended."""
    return [
        op
        for op in rec.ops()
        if op.op == "put" and op.outcome == "ok" and op.key.startswith(prefix)
    ]


def wait_recv_passed(rec: RecordingConnector, key: str, timeout: float = 10.0) -> None:
    """Wait until the RECV thread got *key* and has since started another get.

    The contract has one RECV thread, which commits (or discards) what a get
    returned before it starts its next get; so a get that *began* after the get
    of *key* *ended* proves that value was processed. Needs another registered
    request (a sentinel) so that the RECV thread keeps polling.
    """

    def passed() -> bool:
        done = [op.end for op in gets(rec) if op.key == key and op.outcome == "ok"]
        return bool(done) and any(op.begin > done[0] for op in gets(rec))

    wait_until(passed, timeout, f"the RECV thread to process the get of {key!r} and move on")


class GetsPerRequest:
    """Counts gets per request id (the part of the key before the first ``_``)."""

    def __init__(self, inner: Connector) -> None:
        self.inner = inner
        # Guards counts; taken by every get, never held while calling out.
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            self.counts[key.split("_", 1)[0]] += 1
        return self.inner.get(key)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)
