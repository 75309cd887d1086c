"""R24 in generated worlds (``chunk_adapter.explore.engine.retained``, ``Scenario.repeat``).

At a world's quiescent cut the engine reads which closed requests (final put, last
receiving call a ``cleanup_receiver``) each adapter still mentions; a repeated world
whose adapter holds more of them than the record R24 allows fails with R24. Seeded
leaks are found; the reference passes; one closed request more than the allowance is
the edge.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.adapter import ChunkAdapter  # noqa: E402
from chunk_adapter.errors import InvalidValue  # noqa: E402
from chunk_adapter.explore.engine.execution import prepared  # noqa: E402
from chunk_adapter.explore.engine.result import Execution  # noqa: E402
from chunk_adapter.explore.engine.retained import reachable_names  # noqa: E402
from chunk_adapter.explore.engine.simulate import (  # noqa: E402
    MORE_COPIES,
    _more_copies,
    run_world,
    sim_setup,
    simulate,
)
from chunk_adapter.explore.scenarios.codec import decode, encode  # noqa: E402
from chunk_adapter.explore.scenarios.scenario import (  # noqa: E402
    Scenario,
    cleanup,
    fail_build,
    fail_put,
    load,
    outage,
    poll,
    save,
    settle,
    stop,
)
from chunk_adapter.explore.strategies import RandomStrategy  # noqa: E402
from chunk_adapter.rules import RECENT_REQUESTS  # noqa: E402
from tests.quality.broken_leaks import leak_after_cleanup, send_state_kept  # noqa: E402

pytestmark = pytest.mark.rule("R24")


def _run(world: Scenario, factory: Any = ChunkAdapter) -> Execution:
    setup = sim_setup(factory, wall_timeout=30.0, max_steps=60_000)
    with prepared(setup):
        return run_world(world, RandomStrategy(seed=0, executions=1), setup)[-1]


# -- the walk -------------------------------------------------------------------------


class _Harness:
    """Stands for an object the harness gave the adapter (a connector): it records every
    request, and its module is the harness's."""

    def __init__(self) -> None:
        self.log = ["a", "b", "c"]


_Harness.__module__ = "chunk_adapter.connectors.memory"


def test_walk_finds_names_in_keys_members_closures_and_chunk_keys() -> None:
    kept = "k"

    class Adapter:
        def __init__(self) -> None:
            self.by_id = {"a": 1}  # a str-keyed dict: the collector does not visit its keys
            self.seen = {("x", frozenset({"b"}))}
            self.keys = ["c_0_3"]  # a chunk key of request c
            self.callback = lambda: kept  # a closure cell

    found = reachable_names(Adapter(), {"a", "b", "c", "k", "z"})
    assert found == {"a": "by_id", "b": "seen", "c": "keys", "k": "callback"}


def test_walk_skips_what_the_harness_gave_and_module_globals() -> None:
    harness = _Harness()

    class Adapter:
        def __init__(self) -> None:
            self.connector = harness
            self.helper = _run  # a module function: its globals are not the adapter's

    assert reachable_names(Adapter(), {"a", "b", "c", "ChunkAdapter"}) == {}


def test_walk_goes_past_odd_objects_without_failing() -> None:
    import weakref

    class Gone:
        pass

    class Moduleless:
        pass

    Moduleless.__module__ = None  # type: ignore[assignment]
    dead = weakref.proxy(Gone())  # its target is collected at once

    class Adapter:
        def __init__(self) -> None:
            self.odd = [dead, Moduleless(), {"r": 1}]

    assert reachable_names(Adapter(), {"r"}) == {"r": "odd"}


def test_walk_names_the_attribute_path_of_a_nested_record() -> None:
    class Record:
        def __init__(self) -> None:
            self.last = {("put", "r_0_1"): 1.0}

    class Adapter:
        def __init__(self) -> None:
            self.pace = Record()

    assert reachable_names(Adapter(), {"r"}) == {"r": "pace.last"}


# -- closed requests at the cut ---------------------------------------------------------


def test_reference_holds_nothing_of_closed_requests() -> None:
    world = Scenario(
        "closed",
        (load("a"), save("a", 1), save("a", 2, final=True), settle(), poll(), cleanup("a")),
    )
    execution = _run(world)
    assert execution.ok and execution.cut is not None
    assert execution.retained == {}


def test_open_streams_and_registrations_are_not_counted() -> None:
    # the leak of send_state_kept is in the sender; a request with no final is open
    world = Scenario("open", (load("a"), save("a", 1), settle(), poll()))
    assert _run(world, send_state_kept).retained == {}


def test_a_leaked_request_is_named_per_member() -> None:
    world = Scenario("sent", (save("a", 1, final=True),))
    assert _run(world, send_state_kept).retained == {"sender": {"a": "_next_send_id"}}
    world = Scenario("registered", (load("a"), cleanup("a")))
    assert _run(world, leak_after_cleanup).retained == {"receiver": {"a": "_progress_at"}}


def test_more_closed_requests_held_than_r24_allows_fail_with_r24() -> None:
    world = Scenario("sent", (save("a", 1, final=True),), repeat=RECENT_REQUESTS)
    assert _run(world, send_state_kept).ok  # a record of 500 recent requests is allowed
    failures = _run(Scenario("sent", world.ops, repeat=RECENT_REQUESTS + 1), send_state_kept)
    assert [f.rules for f in failures.failures] == [("R24",)]
    assert f"holds {RECENT_REQUESTS + 1} closed requests" in failures.failures[0].message
    assert "in _next_send_id" in failures.failures[0].message


def test_reference_log_pacing_stays_within_the_record_r24_allows() -> None:
    # every copy's failed build is logged; the paced log remembered 1,024 keys before
    world = Scenario(
        "failed builds",
        (save("a", 1), fail_build("a"), save("a", 2, final=True)),
        repeat=RECENT_REQUESTS + 100,
    )
    execution = _run(world)
    assert execution.ok, [f.message for f in execution.failures]


# -- Scenario.repeat ----------------------------------------------------------------------


def test_repeat_renames_each_copy_with_its_keys_and_faults() -> None:
    world = Scenario(
        "w",
        (
            fail_put("r_0_1"),
            outage("build", "r", 1.0),
            outage("put", None, 1.0),
            save("r", 1, final=True),
        ),
        repeat=2,
    )
    script = world.script
    assert [op.key for op in script if op.kind == "fail_put"] == ["r~0_0_1", "r~1_0_1"]
    assert [op.key for op in script if op.kind == "outage"] == ["r~0", None, "r~1", None]
    assert [op.request_id for op in script if op.kind == "save"] == ["r~0", "r~1"]
    assert [op.kind for op in script[-2:]] == ["drain", "stop"]
    assert world.quiescent


def test_repeat_travels_in_the_replay_string_and_the_pasted_test() -> None:
    world = Scenario("w", (save("r", 1, final=True),), repeat=601)
    assert decode(encode(world)).repeat == 601
    assert "repeat=601" in world.to_python()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_repeat_must_be_a_count(bad: Any) -> None:
    with pytest.raises(InvalidValue, match="repeat="):
        Scenario("w", (save("r", 1),), repeat=bad)


def test_a_program_that_stops_cannot_be_repeated() -> None:
    with pytest.raises(InvalidValue, match="cannot be repeated"):
        Scenario("w", (save("r", 1), stop()), repeat=2)


# -- the engine -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("factory", [send_state_kept, leak_after_cleanup])
def test_generated_worlds_find_a_leak_with_no_check_written_for_it(factory: Any) -> None:
    """A passing world whose adapter holds closed requests is reduced and repeated."""
    sim = simulate(factory, examples=60, deadline=time.monotonic() + 240, seed=0)
    assert sim.found is not None, sim
    failure = sim.found.execution.failures[0]
    assert failure.rules == ("R24",), failure
    assert sim.found.world.repeat > RECENT_REQUESTS // 3
    assert len(sim.found.world.ops) <= 3, sim.found.world  # reduced before it was repeated


class KeepsSomeIds(ChunkAdapter):
    """BUG (R24): the receiver keeps a note of every cleaned-up request whose id hashes to
    0 mod 5 (``crc32``: the same in every process), and never forgets it. Each copy of a
    repeated world has ids of its own, so about one copy in five holds its request: the
    share a leak on one interleaving of a race shows, without the race."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kept: list[str] = []
        super().__init__(*args, **kwargs)

    def cleanup_receiver(self, request_id: str) -> None:
        super().cleanup_receiver(request_id)
        if zlib.crc32(request_id.encode()) % 5 == 0:
            self.kept.append(request_id)  # BUG (R24)


def test_a_leak_too_few_copies_show_is_repeated_with_more_of_them() -> None:
    # the pure part: how many more copies a repeated world gets from what it held
    world = Scenario("w", (save("r", 1, True),), repeat=1000)
    assert _more_copies(world, 0) is None  # nothing held: nothing leaks
    assert _more_copies(world, RECENT_REQUESTS) is None  # as much as a record may hold
    assert _more_copies(world, 250).repeat == 4000  # type: ignore[union-attr]
    assert _more_copies(world, 1).repeat == 1000 * MORE_COPIES  # type: ignore[union-attr]


@pytest.mark.slow
def test_generated_worlds_find_a_leak_that_only_some_copies_show() -> None:
    sim = simulate(KeepsSomeIds, examples=150, deadline=time.monotonic() + 240, seed=0)
    assert sim.found is not None, sim
    assert sim.found.execution.failures[0].rules == ("R24",)
