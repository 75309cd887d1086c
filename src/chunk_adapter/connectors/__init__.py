"""Connectors and the wrappers tests compose around them.

``MemoryConnector`` is the embedded store. ``RecordingConnector``,
``FaultyConnector`` and ``GatedConnector`` wrap *any* connector and nest in
any order, e.g. ``RecordingConnector(FaultyConnector(GatedConnector(mem)))``.
``GatedBuilder`` is the matching ``build_payload`` for tests.
"""

from .base import Connector, chunk_key
from .builders import GatedBuilder, identity_build
from .faults import FaultRule, FaultyConnector
from .gates import Gate, GatedConnector
from .memory import MemoryConnector
from .recording import RecordingConnector

__all__ = [
    "Connector",
    "FaultRule",
    "FaultyConnector",
    "Gate",
    "GatedBuilder",
    "GatedConnector",
    "MemoryConnector",
    "RecordingConnector",
    "chunk_key",
    "identity_build",
]
