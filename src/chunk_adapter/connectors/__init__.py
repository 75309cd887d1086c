"""Connectors and the wrappers tests compose around them.

``MemoryConnector`` is the embedded store. ``RecordingConnector``,
``FaultyConnector`` and ``GatedConnector`` wrap *any* connector and nest in
any order, e.g. ``RecordingConnector(FaultyConnector(GatedConnector(mem)))``.
``GatedBuilder`` is the matching ``build_payload`` for tests.
``SharedMemoryConnector`` and ``RedisConnector`` cross processes and hosts;
with ``notify=True`` they (and ``MemoryConnector``) offer ``subscribe`` for
event-driven receive.
"""

from .base import (
    Connector,
    NamespaceShared,
    NotifyingConnector,
    PermanentError,
    ValueTooLarge,
    chunk_key,
    is_permanent,
    subscription,
)
from .builders import GatedBuilder, identity_build
from .doorbell import Doorbell
from .faults import FaultRule, FaultyConnector
from .gates import Gate, GatedConnector
from .memory import MemoryConnector
from .recording import CountingConnector, RecordingConnector
from .redis import RedisConnector, RedisConnectorError, RedisNotInstalled
from .serialization import PICKLE, SAFE, SAFE_JSON, SerializationError, Serializer
from .shm import KeyOccupied, SharedMemoryConnector, ShmCorrupt, ShmForeign

__all__ = [
    "PICKLE",
    "SAFE",
    "SAFE_JSON",
    "Connector",
    "CountingConnector",
    "Doorbell",
    "FaultRule",
    "FaultyConnector",
    "Gate",
    "GatedBuilder",
    "GatedConnector",
    "KeyOccupied",
    "MemoryConnector",
    "NamespaceShared",
    "NotifyingConnector",
    "PermanentError",
    "RecordingConnector",
    "RedisConnector",
    "RedisConnectorError",
    "RedisNotInstalled",
    "SerializationError",
    "Serializer",
    "SharedMemoryConnector",
    "ShmCorrupt",
    "ShmForeign",
    "ValueTooLarge",
    "chunk_key",
    "identity_build",
    "is_permanent",
    "subscription",
]
