"""Oracles: checks over a recorded history, each named after the rule it enforces.

Record the scheduler's calls with :class:`RecordedAdapter` into the same
:class:`~chunk_adapter.history.History` as a ``RecordingConnector`` and a
``GatedBuilder(history=...)``, then ``check(history, quiescent=...)``.
"""

from .check import assert_ok, check
from .records import UNCOPYABLE, CallRecord, RecordedAdapter
from .timeline import Timeline, split_key
from .violations import ContractViolation, Violation

__all__ = [
    "UNCOPYABLE",
    "CallRecord",
    "ContractViolation",
    "RecordedAdapter",
    "Timeline",
    "Violation",
    "assert_ok",
    "check",
    "split_key",
]
