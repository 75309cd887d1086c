"""Factories that take ``**options`` but refuse the ones they do not know.

``make_forwarding`` forwards every option to a constructor that declares the
contract keywords only (Python's own ``TypeError: unexpected keyword argument``);
the suite leaves such an option out and builds again. ``make_refusing`` raises
its own ``ValueError`` for any unknown option: the suite cannot know which one
to leave out, so no adapter is ever driven, and the explorer must say it could
not decide, never report a violation.
"""

from __future__ import annotations

from typing import Any

from .split_pkg.core import Adapter

__all__ = ["make_forwarding", "make_refusing"]

CONTRACT = ("stage_id", "src_stage_id", "build_payload")


class _Strict(Adapter):
    def __init__(
        self, connector: Any, *, stage_id: int, src_stage_id: int | None = None,
        build_payload: Any = None,
    ) -> None:  # fmt: skip
        super().__init__(connector, stage_id, src_stage_id, build_payload)


def make_forwarding(connector: Any, **options: Any) -> Adapter:
    return _Strict(connector, **options)


def make_refusing(connector: Any, **options: Any) -> Adapter:
    unknown = sorted(set(options) - set(CONTRACT))
    if unknown:
        raise ValueError(f"unknown options {unknown}")
    return _Strict(connector, **options)
