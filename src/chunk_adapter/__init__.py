"""chunk_adapter: a reference ChunkAdapter and the suite that verifies any adapter.

The public surface is re-exported here; the machinery lives in submodules.
"""

from ._version import __version__
from .adapter import ChunkAdapter
from .connectors import Connector, MemoryConnector
from .errors import (
    AdapterFailed,
    AdapterStopped,
    ChunkAdapterError,
    ConnectorError,
    InjectedFault,
    InvalidType,
    InvalidValue,
    SaveQueueFull,
    SnapshotError,
)
from .runtime import Runtime, ThreadingRuntime
from .stats import AdapterStats

__all__ = [
    "AdapterFailed",
    "AdapterStats",
    "AdapterStopped",
    "ChunkAdapter",
    "ChunkAdapterError",
    "Connector",
    "ConnectorError",
    "InjectedFault",
    "InvalidType",
    "InvalidValue",
    "MemoryConnector",
    "Runtime",
    "SaveQueueFull",
    "SnapshotError",
    "ThreadingRuntime",
    "__version__",
]
