"""Shape: the factory lives in the package's ``__init__``; the adapter in ``core``.

The factory takes ``**options`` and passes on only the ones the adapter knows,
so ``runtime=`` is accepted and dropped.
"""

from __future__ import annotations

from typing import Any

from .core import Adapter

_KNOWN = ("wait_timeout", "idle_backoff", "join_timeout", "put_tries")


def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
         build_payload: Any = None, **options: Any) -> Adapter:  # fmt: skip
    known = {k: v for k, v in options.items() if k in _KNOWN}
    return Adapter(connector, stage_id, src_stage_id, build_payload, **known)
