"""Shrinking a generated world (``chunk_adapter.explore.engine.shrink``) and keyed timings.

A failing world is reduced by removing whole requests, members and kinds of op first,
then blocks of neighbours; a call's latency and an op's think time are keyed on the call,
so removing one op leaves the others' timings as they were — what lets a race that
needed those timings survive the shrinking.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from chunk_adapter.connectors.timed import TimedFaults, keyed_random
from chunk_adapter.errors import InvalidValue
from chunk_adapter.explore.engine.shrink import groups, reduce_ops
from chunk_adapter.explore.engine.simulate import scheduler_ops, simulate
from chunk_adapter.explore.scenarios.codec import decode, encode
from chunk_adapter.explore.scenarios.scenario import (
    Op,
    Scenario,
    cleanup,
    fail_build,
    fail_put,
    load,
    pause,
    poll,
    save,
    settle,
)

# two requests, a build fault and a put fault on their keys, pauses and a settle
OPS: tuple[Op, ...] = (
    load("a"),
    fail_put("a_0_0"),
    save("a", 1),
    pause(0.01),
    save("b", 2, on=None),
    fail_build("b"),
    settle(),
    save("b", 3, final=True),
    pause(0.01),
    save("a", 4, final=True),
    poll(),
    cleanup("a"),
)


def test_groups_are_whole_requests_with_their_faults_and_whole_kinds() -> None:
    found = {tuple(OPS[i] for i in g) for g in groups(OPS)}
    a = tuple(op for op in OPS if op.request_id == "a" or op.key == "a_0_0")
    b = tuple(op for op in OPS if op.request_id == "b" or op.key == "b")
    assert a in found and b in found  # a fault on a request's key goes with the request
    assert (pause(0.01), pause(0.01)) in found
    assert (settle(),) in found
    sizes = [len(g) for g in groups(OPS)]
    assert sizes == sorted(sizes, reverse=True), sizes  # the biggest cut is tried first
    assert all(size < len(OPS) for size in sizes)  # never the whole program


def test_reduce_ops_finds_the_smallest_program_that_keeps_the_property() -> None:
    """The property: a final of b saved, and a poll after it. Two ops are all it needs."""

    def keeps(world: Scenario) -> bool:
        kinds = [(op.kind, op.request_id, op.final) for op in world.ops]
        final = ("save", "b", True)
        return final in kinds and ("poll", None, False) in kinds[kinds.index(final) :]

    world = Scenario("w", OPS)
    small = reduce_ops(world, keeps, tries=200, until=lambda: float("inf"))
    assert small.ops == (save("b", 3, final=True), poll()), small.ops
    assert scheduler_ops(small) == 2


def test_reduce_ops_stops_at_its_tries_and_its_time() -> None:
    world = Scenario("w", OPS)
    calls: list[int] = []

    def keeps(candidate: Scenario) -> bool:
        calls.append(len(candidate.ops))
        return False

    assert reduce_ops(world, keeps, tries=3, until=lambda: float("inf")) == world
    assert len(calls) == 3
    calls.clear()
    assert reduce_ops(world, keeps, tries=100, until=lambda: time.monotonic() - 1) == world
    assert calls == []


def _delays(seed: int, calls: list[tuple[str, str]]) -> dict[tuple[str, str, int], float]:
    """Each call's latency, by (op, key, n-th such call)."""
    slept: list[float] = []
    timed = TimedFaults()
    timed.use_clock(lambda: 0.0, slept.append)
    timed.set_latency(0.01, seed)
    seen: dict[tuple[str, str], int] = {}
    out: dict[tuple[str, str, int], float] = {}
    for op, key in calls:
        timed.before(op, key)
        n = seen.get((op, key), 0)
        seen[(op, key)] = n + 1
        out[(op, key, n)] = slept.pop()
    return out


def test_a_calls_latency_stays_when_other_calls_come_and_go() -> None:
    """Removing one request's calls leaves the other's latencies exactly as they were."""
    both = [("put", "a_0_0"), ("put", "b_0_0"), ("get", "a_0_0"), ("get", "b_0_0"),
            ("get", "a_0_0")]  # fmt: skip
    alone = [call for call in both if call[1].startswith("a")]
    with_b, without_b = _delays(7, both), _delays(7, alone)
    assert {k: v for k, v in with_b.items() if k[1].startswith("a")} == without_b
    assert len(set(without_b.values())) == len(without_b)  # each call its own draw
    assert _delays(8, alone) != without_b  # another world's seed, other times
    assert all(0 <= d < 0.01 for d in with_b.values())


def test_setting_the_latency_again_starts_the_draws_over() -> None:
    slept: list[float] = []
    timed = TimedFaults()
    timed.use_clock(lambda: 0.0, slept.append)
    for _ in range(2):
        timed.set_latency(0.01, 3)
        for _ in range(3):
            timed.before("get", "a_0_0")
    assert slept[:3] == slept[3:] and len(set(slept)) == 3, slept


def test_keyed_random_is_a_fixed_fraction_of_its_parts() -> None:
    assert keyed_random("think", 1, "save", "a", None, 0) == keyed_random(
        "think", 1, "save", "a", None, 0
    )
    draws = [keyed_random("x", n) for n in range(2000)]
    assert all(0 <= d < 1 for d in draws)
    assert 0.4 < sum(draws) / len(draws) < 0.6  # spread over [0, 1), not stuck


def test_timing_seed_travels_and_is_checked() -> None:
    world = Scenario("w", (save("r", 1, final=True),), timing_seed=4242)
    assert decode(encode(world)).timing_seed == 4242
    assert "timing_seed=4242" in world.to_python()


@pytest.mark.parametrize("bad", [True, 1.5, "2", None])
def test_timing_seed_must_be_an_int(bad: Any) -> None:
    with pytest.raises(InvalidValue, match="timing_seed="):
        Scenario("w", (save("r", 1),), timing_seed=bad)


@pytest.mark.slow
@pytest.mark.rule("R15")
def test_a_race_found_in_a_big_world_shrinks_to_a_few_ops() -> None:
    """``burst`` (an unnamed bug: a ``poll_ready`` inside a burst of commits) is found in a
    world of dozens of ops; removing whole requests and kinds, with each call keeping its
    timing, brings it to a few (before keyed timings and groups: 52 ops at seed 0)."""
    from tests.quality.unnamed.burst import make

    sim = simulate(make, examples=600, deadline=time.monotonic() + 240, seed=0)
    assert sim.found is not None and sim.first is not None, sim
    assert {"R14", "R15", "R23"} & set(sim.found.execution.failures[0].rules)
    assert scheduler_ops(sim.found.world) <= 8, sim.found.world
