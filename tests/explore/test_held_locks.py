"""A lock held across a build, put or get, and wanted by someone else (R3, R7, R17).

The explorer notes which task held which controlled lock across a whole slow call
and who else asks for that lock (:mod:`chunk_adapter.explore.engine.held`): a
structural property judged on every execution, whatever its interleaving. Each
adapter here is the reference with one lock added around one call; the table
gives the rule the explorer must name first, or ``None`` where it must stay
quiet (a lock only the holder's own side takes, or only the adapter's other
background thread: undecided by design). Deterministic: a seeded strategy, and the
property holds on every execution that makes the call.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.explore import LIBRARY, RandomStrategy, explore
from chunk_adapter.rules import R3, R7, R17
from tests.quality.broken_stall import GlobalBuildLock


class _Locked(ConnectorWrapper):
    """The adapter's connector with *lock* held across the calls named in *around*."""

    def __init__(self, inner: Any, lock: Any, around: tuple[str, ...]) -> None:
        super().__init__(inner)
        self._lock = lock
        self._around = around

    def put(self, key: str, value: Any) -> None:
        if "put" not in self._around:
            return self.inner.put(key, value)  # type: ignore[no-any-return]
        with self._lock:
            return self.inner.put(key, value)  # type: ignore[no-any-return]

    def get(self, key: str) -> Any:
        if "get" not in self._around:
            return self.inner.get(key)
        with self._lock:
            return self.inner.get(key)


class PutUnderSendLock(ChunkAdapter):
    """Puts holding the lock ``save_async`` takes: R3."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        self.connector = _Locked(self.connector, self._send_lock, ("put",))


class PutUnderSharedLock(ChunkAdapter):
    """Puts holding one lock shared by every adapter in the process: R17."""

    _io_lock = threading.Lock()  # BUG (on purpose): guards nothing, shared by all adapters

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        self.connector = _Locked(self.connector, PutUnderSharedLock._io_lock, ("put",))


class PutUnderPrivateLock(ChunkAdapter):
    """Puts holding a lock only its own SAVE thread takes: harmless, quiet."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        # guards nothing; taken by this adapter's SAVE thread alone, around each put
        self.connector = _Locked(self.connector, self.runtime.Lock(), ("put",))


class SerialisedConnector(ChunkAdapter):
    """One lock around every put and get of the adapter (SAVE and RECV threads):
    an adapter may serialise calls to a connector it does not trust: quiet."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        # taken by this adapter's SAVE thread around a put, its RECV thread around a get
        self.connector = _Locked(self.connector, self.runtime.Lock(), ("put", "get"))


CASES = [
    (GlobalBuildLock, "pipeline/three-stage", R7),
    (PutUnderSendLock, "two-requests", R3),
    (PutUnderSharedLock, "pipeline/three-stage", R17),
    (PutUnderPrivateLock, "pipeline/three-stage", None),
    (SerialisedConnector, "pipeline/three-stage", None),
    (ChunkAdapter, "pipeline/three-stage", None),
]


@pytest.mark.rule("R3", "R7", "R17")
@pytest.mark.parametrize(
    ("adapter", "scenario", "rule"), CASES, ids=lambda v: getattr(v, "__name__", str(v))
)
def test_a_lock_held_across_slow_work_is_judged_by_who_else_takes_it(
    adapter: type[ChunkAdapter], scenario: str, rule: str | None
) -> None:
    """R3, R7, R17: the rule of the other taker, named first, on the first execution."""
    report = explore(
        LIBRARY[scenario],
        RandomStrategy(seed=0, executions=3),
        factory=lambda connector, **kw: adapter(connector, **kw),
        substitute="auto",
    )
    if rule is None:
        assert report.failure is None, report.describe_failure()
        return
    assert report.failure is not None, f"{adapter.__name__}: not found ({report.summary()})"
    first = report.failure.failures[0]
    assert first.rules[:1] == (rule,), report.describe_failure()
    assert report.executions == 1, report.summary()
