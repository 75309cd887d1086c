"""``require_redis()``: skip a Redis test locally, fail it under CI, saying what to install."""

from __future__ import annotations

import os

import pytest

from chunk_adapter.connectors.redis_server import redis_unavailable

__all__ = ["require_redis"]


def require_redis() -> None:
    """Skip (locally) or fail (with $CI set) when Redis tests cannot run here."""
    reason = redis_unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: Redis tests must run, not skip)", pytrace=False)
    pytest.skip(reason)
