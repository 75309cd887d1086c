"""Oracles: checks over a recorded history, each named after the rule it enforces.

Record the scheduler's calls with :class:`RecordedAdapter` into the same
:class:`~chunk_adapter.history.History` as a ``RecordingConnector`` and a
``GatedBuilder(history=...)``, then ``check(history, quiescent=...)``.
"""

from .check import assert_ok, check, check_aside
from .records import UNCOPYABLE, CallRecord, RecordedAdapter, RecordedPipeline
from .timeline import Timeline, split_key
from .violations import ContractViolation, Violation, root_first

__all__ = [
    "UNCOPYABLE",
    "CallRecord",
    "ContractViolation",
    "RecordedAdapter",
    "RecordedPipeline",
    "Timeline",
    "Violation",
    "assert_ok",
    "check",
    "check_aside",
    "root_first",
    "split_key",
]
