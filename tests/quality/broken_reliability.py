"""Adapters that keep R1–R24 and break a reliability rule (R25, R30, R31): ``verify --reliability``.

An adapter written to R1–R24 only passes plain ``verify`` (these do: each is one
change the contract up to R24 allows). Asked with ``--reliability``, verify judges
R25, R30 and R31 too, in generated worlds with the faults that try them, and must
catch each (``EXPECTED``: the rule the report names). Three are the reference
adapter with one change; the fourth is written from scratch on plain
``threading`` (tests/quality/plain_threading_adapter.py), the way a third-party
adapter usually meets all three failures at once.

- ``in_place_retries``: the reference's SAVE thread retries a failing put where
  it is, as the code before R31 did (the reference keeps that loop for a subclass
  that overrides ``_put_with_retries``): a final whose key is down for 10 s holds
  every other request's chunks for 10 s. R31.
- ``silent_death``: the reference, but a thread that meets ``SystemExit`` (or
  another ``BaseException``) ends without saying so: ``save_async`` and
  ``load_async`` go on accepting work nobody will deliver. R30.
- ``retries_refused_puts``: the reference behind a connector wrapper of its own
  that re-raises every put error as a plain ``RuntimeError`` (an adapter that
  wraps errors and loses their ``permanent`` attribute): a put no retry can fix
  is retried ``put_tries`` times, a final without end. R25.
- ``plain_threads``: ``except Exception`` around each build, put and get (a
  ``SystemExit`` ends the thread in silence, as Python does), in-place put
  retries, and no notion of a permanent error: R25, R30 or R31, whichever world
  meets it first.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter import ChunkAdapter
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.rules import R25, R30, R31

from .plain_threading_adapter import PlainChunkAdapterFixed

__all__ = ["EXPECTED", "in_place_retries", "plain_threads", "retries_refused_puts", "silent_death"]


class _InPlaceRetries(ChunkAdapter):
    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        super()._put_with_retries(request_id, value, is_final)


class _SilentDeath(ChunkAdapter):
    def _died(self, side: str, exc: BaseException) -> None:
        return  # the thread ends; nobody is told


def in_place_retries(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return _InPlaceRetries(connector, **kwargs)


def silent_death(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return _SilentDeath(connector, **kwargs)


class _PlainErrors(ConnectorWrapper):
    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self.inner.put(key, value)
        except Exception as exc:
            raise RuntimeError(f"put {key} failed: {exc}") from None

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


def retries_refused_puts(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return ChunkAdapter(_PlainErrors(connector), **kwargs)


def plain_threads(connector: Any, **kwargs: Any) -> PlainChunkAdapterFixed:
    return PlainChunkAdapterFixed(connector, **kwargs)


EXPECTED: dict[str, tuple[str, ...]] = {
    "in_place_retries": (R31,),
    "silent_death": (R30,),
    "retries_refused_puts": (R25,),
    "plain_threads": (R25, R30, R31),
}
"""Each factory's rule (any of them, for ``plain_threads``) a ``--reliability`` report names."""
