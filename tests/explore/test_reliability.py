"""R30 and R31 in generated worlds (``Scenario.reliable``, ``verify --reliability``).

The judges of :mod:`chunk_adapter.explore.engine.reliability` on fixed worlds, each
run once on the controlled runtime (deterministic: a seeded schedule in virtual
time): the seeded adapters of tests/quality/broken_reliability.py fail with the rule
they break, the reference adapter passes the same world, and the same world not
marked reliable judges nothing of either (an adapter written to R1-R24 may block or
die so). The search that finds them in drawn worlds is tests/quality/
test_reliability_finds.py (-m slow).
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.fatal import InjectedExit, raised_kind
from chunk_adapter.connectors.timed import hits
from chunk_adapter.errors import AdapterFailed, InvalidValue
from chunk_adapter.explore.engine.execution import prepared
from chunk_adapter.explore.engine.result import Execution
from chunk_adapter.explore.engine.simulate import run_world, sim_setup
from chunk_adapter.explore.scenarios.codec import decode, encode
from chunk_adapter.explore.scenarios.scenario import (
    PROBE,
    Op,
    Scenario,
    fail_build,
    fail_get,
    fail_put,
    load,
    outage,
    pause,
    renamed,
    request_of,
    save,
)
from chunk_adapter.explore.strategies import RandomStrategy
from chunk_adapter.oracles import CallRecord
from tests.quality.broken_reliability import in_place_retries, plain_threads, silent_death


def _run(world: Scenario, factory: Any = ChunkAdapter) -> Execution:
    setup = sim_setup(factory, wall_timeout=30.0, max_steps=400_000)
    with prepared(setup):
        return run_world(world, RandomStrategy(seed=0, executions=1), setup)[-1]


def _world(*ops: Op, reliable: bool = True, topology: str = "pipeline") -> Scenario:
    return Scenario(
        "world", ops, reliable=reliable, topology=topology, liveness=12.0, settle_limit=40.0,
        notify=True, options={"idle_backoff": 0.05},
    )  # fmt: skip


STUCK = (
    outage("put", "a_0_*", 10.0),  # every put of request a fails for 10 s
    save("a", [1]),
    save("a", [2], True),
    pause(0.5),
    save("b", [3]),
    save("b", [4], True),
    load("a"),
    load("b"),
)
"""Request a's final cannot be put for 10 s; b's chunks are saved half a second later."""


def _rules(execution: Execution) -> list[tuple[str, ...]]:
    return [f.rules for f in execution.failures]


@pytest.mark.rule("R31")
def test_r31_an_in_place_retry_of_one_request_holding_another_is_found() -> None:
    execution = _run(_world(*STUCK), in_place_retries)
    assert _rules(execution)[:1] == [("R31",)], execution.failures
    message = execution.failures[0].message
    assert "'b'" in message and "'a' kept failing" in message


@pytest.mark.rule("R31")
def test_r31_the_reference_parks_the_failing_stream_and_passes() -> None:
    execution = _run(_world(*STUCK))
    assert execution.failures == []
    puts = {r.key: r for r in execution.history.records() if getattr(r, "op", "") == "put"}
    times = execution.history.times
    assert times[puts["b_0_1"].end] < 2.0  # b went out while a's final still failed


@pytest.mark.rule("R31")
def test_r31_is_not_judged_in_a_world_not_marked_reliable() -> None:
    # R10 lets an adapter written to R1-R24 retry in place: plain verify must not fail it
    assert _run(_world(*STUCK, reliable=False), in_place_retries).failures == []


FATAL_BUILD = (save("a", [1]), fail_build("a", raises="exit"), save("a", [2], True), load("a"))
"""The SAVE thread's second build of request a raises SystemExit."""


@pytest.mark.rule("R30")
def test_r30_a_thread_that_ends_in_silence_is_found() -> None:
    execution = _run(_world(*FATAL_BUILD), silent_death)
    assert _rules(execution) == [("R30",)], execution.failures
    assert "SystemExit" in execution.failures[0].message or "InjectedExit" in (
        execution.failures[0].message
    )


@pytest.mark.rule("R30")
def test_r30_the_reference_ends_loudly_and_passes() -> None:
    execution = _run(_world(*FATAL_BUILD))
    assert execution.failures == []
    raised = [
        r for r in execution.history.records()
        if isinstance(r, CallRecord) and r.request_id == PROBE and r.error is not None
    ]  # fmt: skip
    assert raised and all(isinstance(r.error, AdapterFailed) for r in raised)


@pytest.mark.rule("R30")
@pytest.mark.parametrize(
    "fault",
    [fail_put("a_0_*", raises="base"), fail_get(None, raises="exit"),
     fail_build("a", raises="cancelled")],
    ids=str,
)  # fmt: skip
def test_r30_python_threads_that_catch_only_exception_are_found(fault: Op) -> None:
    world = _world(save("a", [1]), fault, save("a", [2], True), load("a"))
    assert _run(world, plain_threads).failures[0].rules == ("R30",)
    assert _run(world).failures == []  # the reference survives a cancellation, ends loudly else


@pytest.mark.rule("R30")
def test_r30_is_not_judged_in_a_world_not_marked_reliable() -> None:
    execution = _run(_world(*FATAL_BUILD, reliable=False), silent_death)
    assert all("R30" not in f.rules for f in execution.failures)


def test_a_reliable_world_ends_with_two_probe_requests_and_travels_whole() -> None:
    world = _world(*STUCK, *FATAL_BUILD, topology="three-stage")
    probes = [op for op in world.script if op.request_id in (PROBE, PROBE + "2")]
    assert [op.kind for op in probes] == ["load", "load", "save"] * 2
    assert _world(*STUCK, reliable=False).script[-2:] == world.script[-2:]
    assert decode(encode(world)) == world


def test_fault_ops_name_what_they_raise_and_refuse_anything_else() -> None:
    assert (
        str(fail_put("a_0_*", 2, raises="exit")) == "fail_put(key='a_0_*', times=2, raises='exit')"
    )
    assert str(fail_build("a", raises="base")) == "fail_build('a', times=1, raises='base')"
    with pytest.raises(InvalidValue, match="raises="):
        fail_get(None, raises="KeyboardInterrupt")
    assert raised_kind(repr(InjectedExit("x"))) == "exit"
    assert raised_kind("InjectedFault('x')") is None


def test_a_stream_pattern_hits_every_key_of_that_stream_only() -> None:
    assert hits("a_0_*", "a_0_0") and hits("a_0_*", "a_0_12") and hits(None, "b_1_0")
    assert not hits("a_0_*", "a_1_0") and not hits("a_0_*", "ba_0_0")
    assert not hits("a_0_*", "a_0_1_0")  # request "a_0_1", stage 0: another stream
    assert renamed(outage("put", "a_0_*", 1.0), "~3").key == "a~3_0_*"
    assert request_of(outage("put", "r_0_1_0_*", 1.0)) == "r_0_1"  # request r_0_1, stage 0
