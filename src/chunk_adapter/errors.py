"""The one error hierarchy of chunk_adapter.

``ChunkAdapterError`` is the root. Misuse by the caller (a bad argument, a call
after ``stop()``) is kept apart from faults that tests inject on purpose, so a
test can tell "I called it wrong" from "the connector failed as scripted".
Each misuse error also derives from the builtin that the contract names
(``TypeError``, ``ValueError``, ``RuntimeError``), so ``except TypeError`` in a
caller keeps working.
"""

from __future__ import annotations

__all__ = [
    "AdapterFailed",
    "AdapterStopped",
    "ChunkAdapterError",
    "ConnectorError",
    "InjectedFault",
    "InvalidType",
    "InvalidValue",
    "SaveQueueFull",
    "SnapshotError",
    "UsageError",
]


class ChunkAdapterError(Exception):
    """Root of every error chunk_adapter raises on purpose."""


class InvalidType(ChunkAdapterError, TypeError):
    """An argument of the wrong type, raised at the call that passed it."""


class InvalidValue(ChunkAdapterError, ValueError):
    """An argument of the right type but an impossible value (a negative timeout)."""


class SnapshotError(ChunkAdapterError, TypeError):
    """``save_async`` could not snapshot the object it was given; nothing was queued."""


class AdapterStopped(ChunkAdapterError, RuntimeError):
    """A sending or registering call after ``stop()``."""


class AdapterFailed(ChunkAdapterError, RuntimeError):
    """A background thread of the adapter ended on something it must not survive (R30)."""


class SaveQueueFull(ChunkAdapterError, RuntimeError):
    """``save_async`` of a non-final chunk while ``max_save_queue`` chunks wait to be
    sent; nothing was queued (the scheduler decides: save it later, or cancel)."""


class ConnectorError(ChunkAdapterError):
    """A connector operation failed (a real transport may raise others too)."""


class InjectedFault(ConnectorError):
    """A failure injected on purpose by a fault wrapper (put, get or build)."""


class UsageError(InvalidValue):
    """An adapter cannot be verified as named or built (``verify`` exit 2); says the fix."""
