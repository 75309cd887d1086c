"""The conformance machine on the adapter named by ``--adapter`` (reference by default).

Each example drives a pipeline: a sender and a receiver built by the factory.
Profile from ``CHUNK_ADAPTER_PROFILE`` (ci by default; see chunk_adapter.profiles).
A failure prints the shrunk steps, the rule broken and the command to rerun:

    CHUNK_ADAPTER_PROFILE=dev python -m pytest tests/stateful --adapter pkg.mod:factory
"""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from chunk_adapter.factory import AdapterFactory
from chunk_adapter.profiles import current_profile, hypothesis_settings
from chunk_adapter.stateful import make_machine

ALL_RULES = (
    "R2",
    "R4",
    "R5",
    "R6",
    "R7",
    "R8",
    "R9",
    "R10",
    "R11",
    "R12",
    "R13",
    "R14",
    "R15",
    "R16",
    "R17",
    "R18",
    "R19",
    "R23",
)


def _command(spec: str, profile: str) -> str:
    return (
        f"CHUNK_ADAPTER_PROFILE={profile} python -m pytest tests/stateful --adapter {spec} "
        "(add the @reproduce_failure line printed below to replay exactly this run)"
    )


@pytest.mark.rule(*ALL_RULES)
def test_conformance_machine(adapter_factory: AdapterFactory, adapter_spec: str) -> None:
    """Random calls, faults and gates; oracles and the model checked after every step."""
    profile = current_profile()
    machine = make_machine(adapter_factory, reproduce=_command(adapter_spec, profile.name))
    run_state_machine_as_test(machine, settings=hypothesis_settings(profile))


@pytest.mark.slow  # the pipeline machine above is the default tier's; CI under 15 minutes
@pytest.mark.rule(*ALL_RULES)
def test_conformance_machine_loopback(adapter_factory: AdapterFactory, adapter_spec: str) -> None:
    """The extra variant: one adapter receiving its own chunks (``stage_id ==
    src_stage_id``). Not the default — an adapter may rightly share per-request state
    between its sides — but one that works that way must still keep the contract."""
    machine = make_machine(
        adapter_factory, reproduce=_command(adapter_spec, "quick"), loopback=True
    )
    run_state_machine_as_test(machine, settings=hypothesis_settings("quick"))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.rule(*ALL_RULES)
def test_conformance_machine_thorough(adapter_factory: AdapterFactory, adapter_spec: str) -> None:
    """The hunt profile: 1000 random examples of up to 60 steps (tox -e stress)."""
    machine = make_machine(adapter_factory, reproduce=_command(adapter_spec, "hunt"))
    run_state_machine_as_test(machine, settings=hypothesis_settings("hunt"))
