"""Hypothesis state machines that check any adapter against the contract.

From your own test file::

    from chunk_adapter.stateful import make_machine

    def my_factory(connector, *, stage_id, src_stage_id=None, build_payload=None):
        return MyAdapter(connector, stage_id=stage_id, src_stage_id=src_stage_id,
                         build_payload=build_payload)

    TestMyAdapterConformance = make_machine(my_factory).TestCase

or in one call: ``run_conformance(my_factory)``. The factory builds a sender
(``stage_id=0``) and a receiver (``stage_id=1, src_stage_id=0``) per example;
``make_machine(my_factory, loopback=True)`` drives one adapter that receives
its own chunks instead. The Hypothesis profile comes from
``CHUNK_ADAPTER_PROFILE`` (quick, ci, hunt; see ``chunk_adapter.profiles``).
"""

from .api import make_machine, replay_example, reproduce_command, run_conformance
from .budget import Budget, OutOfBudget
from .harness import SENTINEL, Harness
from .machine import REQUEST_IDS, ConformanceMachine, MachineConfig
from .watch import Counts, WatchedHistory
from .world import World

__all__ = [
    "REQUEST_IDS",
    "SENTINEL",
    "Budget",
    "ConformanceMachine",
    "Counts",
    "Harness",
    "MachineConfig",
    "OutOfBudget",
    "WatchedHistory",
    "World",
    "make_machine",
    "replay_example",
    "reproduce_command",
    "run_conformance",
]
