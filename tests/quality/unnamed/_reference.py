"""Plumbing for the adapters of this package that build on the reference ChunkAdapter.

A factory made by :func:`factory` has the contract's signature,
``make(connector, *, stage_id, src_stage_id=None, build_payload=None, **options)``,
and hands the reference adapter the options its constructor takes, ignoring the rest.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from chunk_adapter.adapter import ChunkAdapter

__all__ = ["Factory", "factory", "reference_options"]

Factory = Callable[..., Any]

_CONTRACT = {"self", "connector", "stage_id", "src_stage_id", "build_payload"}
_TAKEN = frozenset(inspect.signature(ChunkAdapter.__init__).parameters) - _CONTRACT


def reference_options(options: dict[str, Any], drop: Iterable[str] = ()) -> dict[str, Any]:
    """The *options* the reference constructor takes, less those named in *drop*."""
    left_out = set(drop)
    return {k: v for k, v in options.items() if k in _TAKEN and k not in left_out}


def factory(cls: type[ChunkAdapter], drop: Iterable[str] = ()) -> Factory:
    """A contract factory building *cls*; *drop* names reference options it ignores."""
    dropped = tuple(drop)

    def make(
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        **options: Any,
    ) -> ChunkAdapter:
        return cls(
            connector,
            stage_id=stage_id,
            src_stage_id=src_stage_id,
            build_payload=build_payload,
            **reference_options(options, dropped),
        )

    make.__doc__ = cls.__doc__
    return make
