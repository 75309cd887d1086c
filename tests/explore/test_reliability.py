"""R25, R30 and R31 in generated worlds (``Scenario.reliable``, ``verify --reliability``).

The judges of :mod:`chunk_adapter.explore.engine.reliability` (R30, R31) and the
sender oracle's R25 on fixed worlds, each
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
    cancel,
    fail_build,
    fail_get,
    fail_put,
    load,
    outage,
    pause,
    poll,
    renamed,
    request_of,
    save,
    settle,
    stop,
)
from chunk_adapter.explore.strategies import RandomStrategy
from chunk_adapter.oracles import CallRecord
from tests.quality.broken_reliability import (
    in_place_retries,
    plain_threads,
    retries_refused_puts,
    silent_death,
)


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


REFUSED = {
    "non-final": (fail_put("a_0_1", raises="permanent"), save("a", [1]), save("a", [2]),
                  save("a", [3]), save("a", [4], True), load("a")),
    "final": (fail_put("a_0_2", raises="permanent"), save("a", [1]), save("a", [2]),
              save("a", [4], True), load("a")),
}  # fmt: skip
"""A put refused for good (its error's ``permanent``): of a non-final chunk, of the final."""


@pytest.mark.rule("R25")
@pytest.mark.parametrize("which", sorted(REFUSED))
@pytest.mark.parametrize("factory", [retries_refused_puts, plain_threads], ids=lambda f: f.__name__)
def test_r25_a_put_refused_for_good_and_tried_again_is_found(which: str, factory: Any) -> None:
    execution = _run(_world(*REFUSED[which]), factory)
    assert _rules(execution)[:1] == [("R25",)], execution.failures
    assert "refused for good" in execution.failures[0].message


@pytest.mark.rule("R25")
@pytest.mark.parametrize("which", sorted(REFUSED))
def test_r25_the_reference_drops_the_chunk_or_ends_the_stream_with_none(which: str) -> None:
    execution = _run(_world(*REFUSED[which]))
    assert execution.failures == []
    puts = [(r.key, r.value, r.outcome) for r in execution.history.records()
            if getattr(r, "op", "") == "put" and r.key.startswith("a_")]  # fmt: skip
    refused = next(p for p in puts if p[2] == "error")
    assert [p for p in puts if p[1] == refused[1]] == [refused]  # never tried again
    if which == "final":
        assert puts[-1] == ("a_0_2", {"data": None, "finished": True}, "ok")
    else:
        assert ("a_0_1", {"data": [3], "finished": False}, "ok") in puts  # [3] took its id


@pytest.mark.rule("R25")
def test_r25_a_none_final_refused_for_good_is_given_up_and_the_next_stream_starts_over() -> None:
    world = _world(
        fail_put("a_0_1", 2, raises="permanent"),  # the final, then its None form: given up
        save("a", [1]), save("a", [2], True), settle(),
        save("a", [5]), save("a", [6]), save("a", [7], True), load("a"),
    )  # fmt: skip
    assert _run(world).failures == []
    assert _rules(_run(world, retries_refused_puts))[:1] == [("R25",)]


MISJUDGED: dict[str, tuple[tuple[Op, ...], dict[str, Any], str]] = {
    # a final whose build failed (data None) refused for good, then the next stream's
    # final, also None, at the same key: the next stream's, not the refused one again
    "none-final-then-next": ((fail_put(None, raises="permanent"), save("x_1", [0, 9], True),
                              save("x_1", (1, b"\x92"), True), fail_build("x_1", 2)), {},
                             "pipeline"),
    # a cancelled stream's final (None) refused: given up; the next stream goes on
    "cancelled-final": ((fail_put(None, raises="permanent"), cancel("a"),
                         save("a", [20, 0], True), save("a", [21, bytearray(b"")], True)), {},
                        "pipeline"),
    # ... and the next stream is a cancelled final at the same key too
    "cancelled-final-twice": ((fail_put(None, raises="permanent"), cancel("a"),
                               save("a", [1], True), settle(), cancel("a"),
                               save("a", [2], True), load("a")), {}, "pipeline"),
    # a cancellation in a get, then the program stops the adapters itself: the calls after
    # stop() raise for that, not because a thread died
    "stopped-after": ((fail_get(None, raises="cancelled"), load("r_0_1"), stop(), poll()), {},
                      "pipeline"),
    # a non-final refused for good; the next chunk, with equal data, takes its id
    "equal-data-next": ((fail_put("a_0_0", raises="permanent"), save("a", [1]), save("a", [1]),
                         save("a", [2], True), load("a")), {}, "pipeline"),
    # equal data, put_tries=1: the aligner's branches must not share the refusals
    "branches": ((fail_put("a_0_0", 1), save("a", [1]), save("a", [1]), settle(),
                  fail_put("a_0_1", 1), save("a", [2]), settle(),
                  fail_put("a_0_1", raises="permanent"), save("a", [2]), settle(),
                  save("a", [3]), save("a", [9], True), load("a")), {"put_tries": 1},
                 "pipeline"),
    # a given-up final's key met again streams later (R9 must start each stream at 0)
    "given-up-key-later": ((fail_put("a_0_1", raises="permanent"), save("a", [1]), settle(),
                            cancel("a"), save("a", [8], True), settle(), save("a", [2]),
                            settle(), cancel("a"), save("a", [9], True), settle(),
                            save("a", [3]), save("a", [4], True), load("a")), {}, "pipeline"),
    # the middle dies in a put after the program's last call to it: the drain before the
    # probes relays, so the probes ask it
    "middle-dies-late": ((load("a", on="middle"), load("a"), save("a", [1]),
                          save("a", [2], True), settle(), fail_put("a_1_*", raises="exit")),
                         {}, "three-stage"),
}  # fmt: skip
"""Worlds the reference adapter once failed (the search's seeds 1-3 and a review), each a
suite error: a red must mean a bug."""


@pytest.mark.rule("R25")
@pytest.mark.rule("R30")
@pytest.mark.parametrize("name", sorted(MISJUDGED))
@pytest.mark.parametrize("seed", range(3))
def test_the_reference_passes_worlds_the_search_once_misjudged(name: str, seed: int) -> None:
    ops, options, topology = MISJUDGED[name]
    world = Scenario("world", ops, reliable=True, liveness=4.0, options=options,
                     topology=topology)  # fmt: skip
    setup = sim_setup(ChunkAdapter, wall_timeout=30.0, max_steps=400_000)
    with prepared(setup):
        execution = run_world(world, RandomStrategy(seed=seed, executions=1), setup)[-1]
    assert execution.failures == []


@pytest.mark.rule("R30")
@pytest.mark.parametrize("topology", ["pipeline", "three-stage", "loopback"])
def test_a_world_that_outgrows_its_step_budget_decides_nothing_not_r30(topology: str) -> None:
    # the first probe's put raises SystemExit; the reference ends loudly, and its receivers
    # poll on until the liveness deadline: a run cut at a small step budget is undecided
    world = Scenario("world", (fail_put(None, raises="exit"),), reliable=True, liveness=4.0,
                     topology=topology)  # fmt: skip
    setup = sim_setup(ChunkAdapter, wall_timeout=30.0, max_steps=3_000)
    with prepared(setup):
        execution = run_world(world, RandomStrategy(seed=0, executions=1), setup)[-1]
    assert all("R30" not in f.rules for f in execution.failures), execution.failures
