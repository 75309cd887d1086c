"""Generated simulation (``chunk_adapter.explore.engine.simulate``, the ``simulate`` stage).

Whole worlds drawn by Hypothesis run in virtual time: the reference adapter passes
them; seeded bugs are found, shrunk to a few scheduler ops and replayed; a 60-second
outage costs no wall time; the timing rules (R3, R17, R18) are judged on the virtual
clock; a world the reference adapter fails too is never a red.
"""

from __future__ import annotations

import copy
import functools
import io
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.adapter import ChunkAdapter  # noqa: E402
from chunk_adapter.connectors.timed import TimedFaults  # noqa: E402
from chunk_adapter.errors import InvalidValue  # noqa: E402
from chunk_adapter.explore.engine.execution import Execution, prepared  # noqa: E402
from chunk_adapter.explore.engine.reproduce import SIM  # noqa: E402
from chunk_adapter.explore.engine.simulate import (  # noqa: E402
    reference_fails,
    replay_world,
    run_world,
    signature,
    sim_setup,
    simulate,
    strategy_for,
)
from chunk_adapter.explore.scenarios import scenario as scenario_module  # noqa: E402
from chunk_adapter.explore.scenarios.codec import decode, encode  # noqa: E402
from chunk_adapter.explore.scenarios.scenario import (  # noqa: E402
    Scenario,
    cancel,
    cleanup,
    load,
    outage,
    pause,
    poll,
    relay,
    save,
    settle,
    slow,
    stop,
)
from chunk_adapter.explore.scenarios.scenario_bed import mutate_in_place  # noqa: E402
from chunk_adapter.explore.scenarios.worlds import worlds  # noqa: E402
from chunk_adapter.explore.stages import simulate as sim_stage  # noqa: E402
from chunk_adapter.explore.strategies import DrawnStrategy  # noqa: E402
from chunk_adapter.factory import load_factory, reference_factory  # noqa: E402
from chunk_adapter.history import ConnectorOp  # noqa: E402
from chunk_adapter.oracles import CallRecord  # noqa: E402
from chunk_adapter.outcome import StageContext  # noqa: E402
from chunk_adapter.verify.replay import replay_string  # noqa: E402

WORLD = {"stage_ids": (0, 1), "liveness": 2.0}
"""A generated world's settings for the hand-made worlds below (timing judged)."""


def run(world: Scenario, spec: str | None = None) -> Execution:
    factory = load_factory(spec) if spec else reference_factory
    setup = sim_setup(factory, wall_timeout=10.0, max_steps=30_000)
    with prepared(setup):
        return run_world(world, DrawnStrategy([]), setup)[-1]


def rules_of(execution: Execution) -> list[str]:
    return [rule for f in execution.failures for rule in f.rules]


@settings(max_examples=200, database=None, suppress_health_check=list(HealthCheck))
@given(worlds())
def test_worlds_keep_the_usage_rules_and_round_trip_through_their_string(world: Any) -> None:
    assert decode(encode(world)) == world
    # the report's pasteable test rebuilds the very world (an empty program included)
    assert eval(world.to_python(), vars(scenario_module)) == world
    assert eval(replace(world, ops=()).to_python(), vars(scenario_module)).ops == ()
    cancelled: set[str] = set()
    for op in world.ops:
        if op.kind == "cancel":
            cancelled.add(op.request_id)
        elif op.kind == "save" and op.final:
            cancelled.discard(op.request_id)
    assert not cancelled, f"a cancelled stream without its final: {world}"
    saved = [op.obj for op in world.ops if op.kind == "save" and op.obj is not None]
    assert len({repr(obj) for obj in saved}) == len(saved), "payloads are told apart by value"


def test_a_world_string_that_is_not_one_is_refused_with_the_fix() -> None:
    with pytest.raises(InvalidValue, match="paste the whole replay string"):
        decode("not-a-world")


def test_timed_faults_fail_inside_the_window_and_slow_calls_sleep() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    faults = TimedFaults(lambda: now[0], sleep)
    assert faults.outage("put", "k", 2.0) == 2.0
    faults.slow("get", None, 0.5, times=1)
    assert faults.before("put", "k") and not faults.before("put", "other")
    assert not faults.before("get", "k") and slept == [0.5]  # slowed once, then not
    assert not faults.before("get", "k") and slept == [0.5]
    now[0] = 2.0
    assert not faults.before("put", "k")  # the window is [start, end)
    assert faults.ends == 2.0
    with pytest.raises(InvalidValue, match="finite time"):
        faults.outage("put", None, float("inf"))


def test_the_reference_adapter_passes_generated_worlds() -> None:
    sim = simulate(reference_factory, examples=40, deadline=time.monotonic() + 90)
    assert sim.stopped is None and not sim.out_of_time
    assert sim.found is None, sim.found.execution.failures if sim.found else ""
    assert sim.worlds >= 25  # the rest outgrew the step budget (skipped, counted)


@pytest.mark.slow  # ~30 s a seed
@pytest.mark.parametrize("seed", [0, 450, 464, 466])
def test_the_reference_adapter_passes_the_ci_sample_of_worlds(seed: int) -> None:
    """The judges' calibration: the reference adapter passes every world of the ci sample
    (600 worlds). A world it fails is a judge error (each seed here found one before it
    was fixed: R17 owed to a registration past the chunk) or a reference bug — and the
    stage would call the same world judged wrongly for every adapter, never a verdict."""
    sim = simulate(reference_factory, examples=600, deadline=time.monotonic() + 600, seed=seed)
    assert sim.stopped is None and not sim.out_of_time
    assert sim.found is None, (sim.found.world, sim.found.execution.failures) if sim.found else ""


@pytest.mark.slow  # ~45 s: three samples; CI stays under 15 minutes
def test_the_seed_picks_the_derandomized_sample_of_worlds() -> None:
    """ci is derandomized: the same seed draws the same worlds (the same verdict every
    run), another seed another sample (the kill rate is measured over several)."""

    def stages_seen(seed: int) -> list[tuple[int, Any]]:
        seen: list[tuple[int, Any]] = []

        @functools.wraps(reference_factory)
        def recording(connector: Any, **kwargs: Any) -> Any:
            seen.append((kwargs["stage_id"], kwargs.get("src_stage_id")))
            return reference_factory(connector, **kwargs)

        simulate(recording, examples=4, deadline=time.monotonic() + 60, seed=seed)
        return seen

    first = stages_seen(0)
    assert first and stages_seen(0) == first
    assert stages_seen(1) != first


@pytest.mark.rule("R10", "R23")
def test_a_60_second_outage_costs_no_wall_time_and_the_final_still_arrives() -> None:
    world = Scenario(
        "w", (load("a"), outage("put", None, 60.0), save("a", [0], True)),
        stage_ids=(0, 1), settle_limit=80.0, liveness=62.0, notify=True,
    )  # fmt: skip  # event-driven: a polling receiver takes ~9 000 steps a virtual second
    start = time.monotonic()
    execution = run(world)
    assert execution.ok, execution.failures
    assert execution.virtual_time >= 60.0
    assert time.monotonic() - start < 20.0  # 60 virtual seconds, a fraction of one real


class OverflowingBackoff(ChunkAdapter):
    """Backs off ``0.001 * 2 ** (tries - 1)`` s between put tries, capped at 50 ms: past
    about 1 000 tries the float conversion overflows and the SAVE thread's retry loop
    dies (three adapters of tests/quality/correct had this; the generated worlds' 60 s
    put outage found it, no check written for it)."""

    def _backoff(self, tries: int, is_final: bool) -> float:
        return min(0.05, 0.001 * 2 ** (tries - 1))  # the bug: overflows


def overflowing_backoff(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return OverflowingBackoff(connector, **kwargs)


@pytest.mark.rule("R11")
def test_a_backoff_that_overflows_in_a_long_outage_loses_the_final_r11() -> None:
    world = Scenario(
        "w", (load("a"), outage("put", None, 60.0), save("a", [0], True)),
        stage_ids=(0, 1), settle_limit=80.0, liveness=62.0, notify=True,
        options={"put_backoff": 0.05},
    )  # fmt: skip
    setup = sim_setup(overflowing_backoff, wall_timeout=10.0, max_steps=60_000)
    with prepared(setup):
        execution = run_world(world, DrawnStrategy([]), setup)[-1]
    assert "R11" in rules_of(execution), execution.failures


class CarriedFailures(ChunkAdapter):
    """Counts failed puts in a row across chunks, reset only by a put that succeeds: once
    a chunk is dropped after ``put_tries`` failures, the next starts with that count and
    is dropped after a single failed put (R10 gives every chunk its own tries)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed_in_a_row = 0

    def _put_once(self, attempt: Any) -> float | None:
        if attempt.tries == 0:
            attempt.tries = self.failed_in_a_row  # the bug: the count carries over
        before = attempt.tries
        pause = super()._put_once(attempt)
        self.failed_in_a_row = attempt.tries if attempt.tries > before else 0
        return pause


def carried_failures(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return CarriedFailures(connector, **kwargs)


@pytest.mark.rule("R10")
@pytest.mark.parametrize("options", [{"put_tries": 3}, {}], ids=["known", "put_tries-unknown"])
def test_a_failure_count_carried_to_the_next_chunk_is_r10_through_a_long_outage(
    options: dict[str, Any],
) -> None:
    # Through a 0.5 s outage every chunk is dropped, and the final is retried until it
    # ends: pooled, the final's failed tries made up the count the dropped chunks lacked.
    assert _first_rule_in_a_put_outage(carried_failures, 0.5, 3, options) == "R10"


def _first_rule_in_a_put_outage(
    factory: Any, seconds: float, chunks: int, options: dict[str, Any]
) -> str | None:
    """The first rule *factory*'s adapters break in a world where a put outage of *seconds*
    starts before *chunks* saves and a final (the reference adapter passes it first)."""
    world = Scenario(
        "w",
        (load("a"), outage("put", None, seconds), *(save("a", [n]) for n in range(chunks)),
         save("a", ["end"], True)),
        stage_ids=(0, 1), settle_limit=20.5, liveness=2.5, options=options,
    )  # fmt: skip
    assert run(world).ok  # the reference adapter: each chunk its own tries
    setup = sim_setup(factory, wall_timeout=10.0, max_steps=60_000)
    with prepared(setup):
        execution = run_world(world, DrawnStrategy([]), setup)[-1]
    return next(iter(rules_of(execution)), None)


class ExtraTryAfterADrop(ChunkAdapter):
    """Gives the chunk after a dropped one a try more than ``put_tries`` (its count starts
    at -1): R10 gives every chunk the same tries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after_a_drop = False
        # id() of the attempts begun, and the attempts themselves: kept alive, so a new
        # attempt never reuses the id of one gone (which made it look begun, and the bug
        # did not happen: a test that failed now and then, by what ran before it)
        self.started: set[int] = set()
        self.kept: list[Any] = []

    def _put_once(self, attempt: Any) -> float | None:
        if id(attempt) not in self.started:
            self.started.add(id(attempt))
            self.kept.append(attempt)
            if self.after_a_drop:
                attempt.tries, self.after_a_drop = -1, False  # the bug
        before = attempt.tries
        pause = super()._put_once(attempt)
        if pause is None and attempt.tries > before and not attempt.is_final:
            self.after_a_drop = True  # dropped after its failed tries
        return pause


def extra_try_after_a_drop(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return ExtraTryAfterADrop(connector, **kwargs)


@pytest.mark.rule("R10")
@pytest.mark.parametrize(
    ("options", "seconds"),
    [({"put_tries": 3}, 0.03), ({}, 0.03), ({"put_tries": 3}, 0.05), ({}, 0.05)],
    ids=["known-put", "put_tries-unknown-put", "known-dropped", "put_tries-unknown-dropped"],
)
def test_a_chunk_tried_once_too_often_after_a_drop_is_r10(
    options: dict[str, Any], seconds: float
) -> None:
    # chunk 0 is dropped after its 3 tries; chunk 1 gets a 4th, which lands (a 30 ms
    # outage) or fails too (50 ms): tried more often than put_tries, or than chunk 0
    assert _first_rule_in_a_put_outage(extra_try_after_a_drop, seconds, 2, options) == "R10"


@pytest.mark.rule("R3")
def test_a_scheduler_call_that_waits_for_a_slow_build_breaks_r3() -> None:
    world = Scenario("w", (load("a"), slow("build", None, 2.0), save("a", [0], True)), **WORLD)
    assert "R3" in rules_of(run(world, "tests.quality.broken_stress:builds_in_save_async"))
    assert run(world).ok


@pytest.mark.rule("R17")
def test_a_chunk_fetched_long_after_its_put_breaks_r17() -> None:
    world = Scenario("w", (load("a"), pause(0.5), save("a", [0], True)), **WORLD)
    assert rules_of(run(world, "tests.quality.broken_stall:fixed_period_recv"))[:1] == ["R17"]
    assert run(world).ok


@pytest.mark.rule("R17")
@pytest.mark.parametrize("first", [True, False], ids=["chunk-0", "next-chunk"])
def test_a_chunk_a_notified_receiver_is_owed_but_fetches_late_breaks_r17(first: bool) -> None:
    """A receiver told of puts by notifications never polls a key and finds it empty, yet
    it owes a fetch of chunk 0 once the request is registered and of the next chunk once
    it got the one before (``unnamed.evented`` rings only ids without ``_``: ``r_0``
    waits for its 0.5 s re-poll). The reference, rung by the same notifications, is on
    time on every schedule."""
    ops = (save("r_0", [0, 0]), load("r_0"), pause(0.01), save("r_0", [1, 1], True))
    if not first:
        ops = (load("r_0"), save("r_0", [0, 0]), pause(0.01), save("r_0", [1, 1], True))
    world = Scenario("w", ops, notify=True, **WORLD)
    assert rules_of(run(world, "tests.quality.unnamed.evented:make"))[:1] == ["R17"]
    setup = sim_setup(reference_factory, wall_timeout=10.0, max_steps=30_000)
    with prepared(setup):
        for seed in range(20):
            runs = run_world(world, strategy_for(("random", seed, ()), world), setup)
            assert runs[-1].ok, (seed, runs[-1].failures)


@pytest.mark.rule("R17")
def test_a_new_stream_for_a_registration_that_got_its_final_is_owed_nothing() -> None:
    """A judge error the false-alarm runs found (8 of 19 correct adapters, exit 3: the
    reference failed the world too): the registration got its stream's final, so the
    next stream's chunk 0 is owed to nobody until the request is registered again — not
    from the load (made after the old stream's puts) that started the finished one."""
    world = Scenario(
        "w", (save("a", [0, 0]), save("a", [0, 1], True), settle(), load("a"), settle(),
              save("a", [1, 0], True), pause(0.5), cleanup("a"), load("a"), settle()),
        **WORLD,
    )  # fmt: skip
    assert run(world).ok, run(world).failures
    assert run(world, "tests.quality.correct.queue_fifo:make").ok


@pytest.mark.rule("R17")
def test_a_new_stream_put_while_the_registration_is_past_chunk_0_is_owed_nothing() -> None:
    """A judge error the reference adapter met at simulate seed 450: the registration
    got chunk 0 of the old stream, the next stream's chunk 0 was put while it still
    waited for the old final (1 ms later, in a 10 ms idle pause), and that chunk 0 was
    judged due "with the request registered" — to a registration already past chunk 0.
    It is the next registration's, which the cleanup and load 0.5 s later make. (A
    registration that got nothing is still owed chunk 0: the notified-receiver test.)"""
    world = Scenario(
        "w", (save("a", [1]), load("a"), save("a", [2], True), save("a", [3]), settle(),
              pause(0.5), cleanup("a"), load("a"), settle()),
        options={"idle_backoff": 0.01}, think=0.001, busy=6, timing_seed=3100, **WORLD,
    )  # fmt: skip
    execution = run(world)
    assert execution.ok, execution.failures
    puts = [r.key for r in execution.history.records(ConnectorOp) if r.op == "put"]
    assert puts == ["a_0_0", "a_0_1", "a_0_0"]  # the new stream's chunk 0 was put


@pytest.mark.rule("R17")
def test_a_new_streams_chunk_put_after_the_receiver_got_that_chunk_id_is_owed_nothing() -> None:
    """The same judge error past chunk 0 (the reference adapter, simulate seeds 464 and 466): on a
    connector that keeps values, the registration got the new stream's chunk 0 and then
    the old stream's final at ``a_0_1``; the new stream's chunk 1, put after that, was
    judged due "after the receiver got chunk 0" — to a registration that was done."""
    world = Scenario(
        "w", (save("a", [0]), save("a", [6], True), save("a", [10]), load("a"), settle(),
              save("a", [16]), pause(0.5), cleanup("a"), load("a"), settle()),
        consume_on_get=False, notify=True, **WORLD,
    )  # fmt: skip
    execution = run(world)
    assert execution.ok, execution.failures
    got = [(r.key, r.value) for r in execution.history.records(ConnectorOp) if r.op == "get"]
    assert ("a_0_1", {"data": [6], "finished": True}) in got  # the old final, got first


@pytest.mark.rule("R17")
def test_a_get_begun_after_the_cleanup_is_no_progress_of_the_registration() -> None:
    """A judge error the wide worlds met on 4 of 19 correct adapters (calibration, seed
    621): the RECV round read the registration, the scheduler cleaned it up, and the
    round's get of chunk 1 began only then. That stale get was taken as progress, so
    chunk 2 was judged due to a registration already gone — and late, since the next
    registration fetched it half a second on. On the code before the fix, 2 of these 30
    schedules failed ``queue_fifo``."""
    world = Scenario(
        "w", (save("a", [0]), save("a", [1]), save("a", [2], True), settle(), load("a"),
              pause(0.001), cleanup("a"), pause(0.5), save("a", [3]), save("a", [4]),
              save("a", [5], True), settle(), load("a"), settle()),
        notify=True, latency=0.001, **WORLD,
    )  # fmt: skip
    setup = sim_setup(load_factory("tests.quality.correct.queue_fifo:make"), wall_timeout=10.0,
                      max_steps=30_000)  # fmt: skip
    with prepared(setup):
        for seed in range(30):
            runs = run_world(world, strategy_for(("random", seed, ()), world), setup)
            assert runs[-1].ok, (seed, runs[-1].failures)


STALE_EMPTY_POLL = (
    "sim:eNqlUtFuwjAM_JXJz1HVgmCovzJNUWjdzpAmWeNQIcS_z2HdhjTBNu0x57vz2fEJtikeoS4VNN7FNKD2TvfI"
    "UPOYUEGLnUmWdRwbqDtjo2DUWhRJsVgpsIbRNdmhKMtK3nRAhzFCvSjE1JlBqDBRiw-TH20Lgnmm7vjp5oOQn06w"
    "J9cKNZoDCslvd4LCVIFaV2rxrGDE14SRNWWW4Gd1T7NS5Q1NR87Yj_HuGQBK7YfGyCy7uEKsN3nGP4XdPN4MO2sa"
    "i8alcN_4F62_xf2X8XP-PCa5G6hPsPPkNNOAPnE-B1lgSKy3ptn7rns_kBnjkVA0SwWTIf4SVUV5FsaIOISLR5m7"
    "BjS5pub42tJAAiwu5cimx0ukq0c-qFJVko9fyO1nJ2lDrtcRUdjL9SZDPnjrezlGCBTQkpPtvAE2BPvF:1:643:a"
    "cabab3cba2bab2cacb2ca2ba2b2dbdb2d2bdb2d2bdb2dbdcac4acacb2cabc2aeabec3bcbc2b2c3f2cd2fefdb"
    "edb2cbd2cd2e2fdedec5dbdb3cbecfc2eca3bafef3ef2cefe3cecfefce3ce3f2ecfcefef2ecfce3cefefcf2c"
    "e2cecefcecefcecf3cf3ce3fcf2cfef2efc5e2ce2fe2c2aecfc2ecfefcefcece5ce2ce2ce3ce2cecefc4e2fe"
    "fefc2facefe3fecefecfef2efc2fcefcecfefcf2cfcf2cfce2c3ecfec3fc3acfec4e2cece2cef2c2fefc3ecf"
    "4efcfecfecfecf2cecfe2fc3ea2fefc2fefece2fec3ecefefefcf2cefcefecefef2ef2cecf2cfc3fcf3afecf"
    "c2ef2ecfecfc2efcecfcefc2e2fe2cf3cefcece2cef2c2f2ef2cacf3efe2f2ecfece2f2cf3ef2cfcf2cf2e2c"
    "efcfcf3cfcacefefefcfe2cefcfcfcfefce2cef2efce4ce3fc2ef2ef3cfcaefbad"
)
"""A wide world reduced to 11 ops, and the schedule on which ``aio_followers`` met the
judge error below (calibration, seed 621)."""


@pytest.mark.rule("R17")
def test_an_empty_poll_by_a_follower_of_a_cleaned_up_registration_makes_nothing_due() -> None:
    """A judge error the wide worlds met on ``aio_followers`` (a follower task per
    registration): the old registration's follower read its registration, the scheduler
    cleaned it up and registered the request again, and the old follower's get of chunk 0
    found it empty — while the new follower got chunk 0 and then a final. A chunk 0 put
    right after was judged due "while the receiver was polling for it" — to a receiver
    past it. An empty poll counts only if no get after it took the receiver past the
    chunk."""
    _passes_on_aio_followers(STALE_EMPTY_POLL)


def _passes_on_aio_followers(replay: str) -> None:
    """The ``sim:WORLD:SCHEDULE`` *replay* passes on ``aio_followers`` as first written,
    where it was recorded (tests/quality/broken_followers.py: its stale queued get is not
    in these histories; the catalogue's adapter takes other steps now)."""
    _kind, world, schedule = replay.split(":", 2)
    execution = replay_world(
        decode(world), schedule, load_factory("tests.quality.broken_followers:queued_stale_get")
    )
    assert execution.ok, execution.failures


STALE_PROGRESS = (
    "sim:eNp9UtFuwjAM_JXJzxEqBSatvzKhKLRuZ0iT0DgghPj3OVWrbRrl0efz5ezLHQ4p3qAqFNTexdSj9k53yFDx"
    "kFBBg61JlnUcaqhaY6Ng1FiUkVW5U2ANo6uzwko0LF3QYYxQlbl0phciXKnBt6sfbAOCeab2Nsv7INzPO5zINcKM"
    "5oLC8YejoHBdg9qoYq9gwHPCyJoySeCHWhopQJWq_DdS_B6x3mQnz0RbcsbO5hZNyd4ordfGaovGpQAvSS-szK8j"
    "s5x7eWPx8_H8SPt8XybJFar7mJo-mPrk23aMS7Y4enKaqUefeMosJP7DKnYPAQfEPvCU8oABjRRrNbnTlnrKAmM7"
    "sulwdLH5KXLMG7UVS_xF7jQpydPkOh0Rmzz9vhVP7IO3vpMvAoECWnKy_TdNe9hH:1:214:a3bac2b2cacacab5a"
    "2b5daba3bcb2dcbdbc2bc2dbcd2cd2acd2ce2cebcabcac6bc2bcbcd2e2bdeb2dbdc3dcbd2b9dec4eb5cbc3bc"
    "2e3be2ceb2cb2cbc3bc3ecebebaec6b4cbcb2c2ec2ebc2edb10c2e4a2c2a2ea2d"
)
"""A wide world reduced to 8 ops, and the schedule on which ``aio_followers`` met the
judge error below (calibration, seed 623)."""


@pytest.mark.rule("R17")
def test_a_get_by_a_follower_of_a_cleaned_up_registration_is_no_progress() -> None:
    """The same judge error from the other side: the old registration's follower got
    chunk 0 after the cleanup, while ``load_async`` registered the request again (so no
    fence told the get apart), and chunk 1 was judged due from then — but the new
    registration was still polling chunk 0, 50 ms at a time. A get of chunk n-1 is
    progress only if its value is handed out later (a stale get's never is)."""
    _passes_on_aio_followers(STALE_PROGRESS)


@pytest.mark.rule("R18")
def test_a_stop_that_waits_out_its_threads_timeouts_breaks_r18() -> None:
    world = Scenario("w", (load("a"), save("a", [0], True), settle()), **WORLD)
    assert "R18" in rules_of(run(world, "tests.quality.broken_stress:stop_without_notify"))
    assert run(world).ok


@pytest.mark.rule("R18")
def test_a_stop_that_joins_a_thread_blocked_in_a_slow_build_breaks_r18() -> None:
    """With work blocked the contract gives stop() its join timeout, not the 60 s the
    build takes: on the virtual clock that is exact, with no wall time spent."""
    world = Scenario(
        "w", (load("a"), slow("build", None, 60.0), save("a", [0], True), stop()),
        notify=True, **{**WORLD, "liveness": 62.0},
    )  # fmt: skip
    execution = run(world, "tests.quality.broken_stress:stop_joins_forever")
    assert rules_of(execution) == ["R18"] and "took 60 s" in execution.failures[0].message
    assert run(world).ok


@pytest.mark.rule("R18")
def test_each_member_is_held_to_the_bound_of_the_join_timeout_it_was_given() -> None:
    """A build and a get blocked at once in one adapter that sends and receives: stop()
    joins both against one deadline (the join timeout passed, 1 s: bound 1.75 s), not
    each with the whole timeout (2 s). In a pipeline each member is timed on its own:
    two members stopped in turn, each blocked a whole timeout, are not summed into
    one stop() that looks too slow."""
    hung = (slow("build", None, 60.0), slow("get", None, 60.0))
    world = Scenario(
        "w", (*hung, load("a"), save("a", [0]), pause(0.01), stop()),
        notify=True, options={"join_timeout": 1.0},
        **{**WORLD, "topology": "loopback", "stage_ids": (1,), "stage_id": 1, "liveness": 62.0},
    )  # fmt: skip
    execution = run(world, "tests.quality.broken_stress:stop_joins_each_thread")
    assert rules_of(execution) == ["R18"] and "took 2 s" in execution.failures[0].message
    assert "bound here is 1.75 s" in execution.failures[0].message
    assert run(world).ok
    pipeline = replace(world, topology="pipeline", stage_ids=(0, 1), stage_id=0)
    assert run(pipeline).ok  # the sender's build and the receiver's get: 1 s each


@pytest.mark.rule("R7")
def test_a_lock_made_at_import_that_holds_another_adapters_build_breaks_r7() -> None:
    """A class attribute lock made at import is controlled (a stand-in per execution, not
    an uncontrolled thread), and a chunk of one adapter that waits on it, its SAVE side
    idle, while another adapter's slow build holds it, is R7: adapters share nothing.
    The lock held across a build is named first (:mod:`.engine.held`); the wait it
    caused, judged from the timing alone, after it."""
    world = Scenario(
        "w",
        (
            load("a", on="middle"), load("a"), save("a", [1]), settle(),
            slow("build", None, 10.0), save("a", [2]), relay(), save("a", [3], True),
            settle(), relay(), settle(), relay(),
        ),
        topology="three-stage", notify=True, **{**WORLD, "stage_ids": (0, 1, 2)},
    )  # fmt: skip
    execution = run(world, "tests.quality.broken_stall:global_build_lock")
    assert rules_of(execution)[:2] == ["R7", "R7"], execution.failures
    assert "holding GlobalBuildLock._build_lock" in execution.failures[0].message
    assert "waited 10 s" in execution.failures[1].message
    assert run(world).ok


FOUND = {
    "tests.quality.broken_stateful:cleanup_keeps_ready": {"R16"},
    "tests.quality.broken_explore:NoTokenCheck": {"R16"},  # a race: latency holds the get
    "tests.quality.broken_stateful:missing_snapshot": {"R4", "R5"},
    "tests.quality.broken_stress:stop_without_notify": {"R18"},
    "tests.quality.broken_stateful:final_lost_on_build_failure": {"R7", "R11"},
}


@pytest.mark.rule("R4", "R7", "R11", "R16", "R18")
@pytest.mark.parametrize(
    "spec",
    [
        # -m slow: CI stays under 15 minutes (the default tier's stage test below finds
        # cleanup_keeps_ready through verify's own path)
        pytest.param(spec, marks=pytest.mark.slow)
        for spec in sorted(FOUND)
    ],
)
def test_seeded_bugs_are_found_shrunk_and_replayed(spec: str) -> None:
    factory = load_factory(spec)
    sim = simulate(factory, examples=200, deadline=time.monotonic() + 90)
    assert sim.found is not None, f"{spec}: no failing world in {sim.worlds}"
    assert sim.first is not None
    rule = signature(sim.found.execution.failures)
    assert rule in FOUND[spec], sim.found.execution.failures
    # missing_snapshot: a smaller world's first violation reads R5, not R4 (the aligner
    # cannot match a mutated build to its save), so shrinking under the same root rule
    # stops early; the others shrink to a handful of scheduler ops
    most = 16 if "missing_snapshot" in spec else 8
    assert sim.found.size[0] <= min(most, sim.first.size[0]), f"shrunk only to {sim.found.world}"
    again = replay_world(sim.found.world, sim.found.execution.schedule, factory)
    assert signature(again.failures) == rule
    string = SIM.format(encode(sim.found.world), sim.found.execution.schedule)
    assert replay_string(string, spec, io.StringIO()) == 1  # what the report prints replays


def stage(spec: str, seconds: float = 90.0) -> list[Any]:
    ctx = StageContext(
        spec, "quick", 0, seconds, f"chunk-adapter verify --adapter {spec}",
        deadline=time.monotonic() + seconds,
    )  # fmt: skip
    return list(sim_stage.run_stage(load_factory(spec), ctx))


def test_the_stage_confirms_a_failure_and_prints_a_test_and_a_replay_string() -> None:
    [result] = stage("tests.quality.broken_stateful:cleanup_keeps_ready")
    assert result.verdict == "fail" and result.rules[0] == "R16"
    assert result.confirmation.startswith("replayed once on threads: failed again")
    assert "the reference adapter passed it" in result.confirmation
    assert result.replay and result.replay.startswith("chunk-adapter replay 'sim:")
    assert "def test_generated_world_R16" in result.detail


def test_a_world_the_reference_adapter_fails_too_is_inconclusive_never_a_red(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The suite judging a world wrongly must not make a red: the reference adapter runs
    the same world, and when it fails it too, the verdict is inconclusive."""
    real = sim_stage.reference_fails

    def reference_fails_too(world: Scenario, **kwargs: Any) -> Execution | None:
        found = real(world, **kwargs)
        assert found is None  # the reference adapter really passes it...
        return run(world, "tests.quality.broken_stateful:cleanup_keeps_ready")  # ...say it did not

    monkeypatch.setattr(sim_stage, "reference_fails", reference_fails_too)
    [result] = stage("tests.quality.broken_stateful:cleanup_keeps_ready", seconds=20.0)
    assert result.verdict == "inconclusive"
    # every failing world is skipped as judged wrongly, and the search goes on past it
    assert "that the reference adapter fails too" in result.evidence
    assert "the reference adapter fails it too" in result.coverage
    assert result.replay.startswith("chunk-adapter replay 'sim:")


@pytest.mark.slow  # ~15 s; the reference's default-tier pass is the 60 worlds above
def test_the_reference_adapter_passes_the_stage() -> None:
    [result] = stage("chunk_adapter.factory:reference_factory", seconds=120.0)
    assert result.verdict == "pass", result.evidence


@pytest.mark.rule("R17")
def test_a_chunk_fetched_by_a_get_that_overlapped_its_put_is_not_late() -> None:
    """A judge error found by the unnamed adapters: with latency, a get that began before
    the put ended may return its value; it was fetched then, not at the next get."""
    world = Scenario(
        "world",
        (
            save("x", [0, 2], final=False), cancel("1"), settle(), save("x", [3, 3], final=False),
            cancel("x_1"), load("x"), poll(), save("x", [7, 3], final=True), settle(),
            cleanup("x"), pause(0.001), load("x"), settle(), save("1", [13, "end"], final=True),
            save("x_1", [14, "end"], final=True),
        ),
        options={"idle_backoff": 0.01}, consume_on_get=False, notify=True, topology="loopback",
        stage_ids=(0,), latency=0.05, liveness=2.0,
    )  # fmt: skip
    factory = load_factory("tests.quality.unnamed.records:make")
    # recorded before worlds had timer slack and a timer resolution: replayed without them
    schedule = "1:37:acab2ca2c2abab2a3ba2ca2b2a3b2a2bca2"
    execution = replay_world(world, schedule, factory, slack=0.0, resolution=0.0)
    assert execution.ok, execution.failures  # the put of x_0_2 overlapped the get that got it


@pytest.mark.rule("R3")
def test_a_scheduler_call_that_never_returns_breaks_r3_not_skipped() -> None:
    """The other threads poll on, so the execution outgrows the step budget instead of
    deadlocking: the call the scheduler is stuck in is the root cause, not a skip."""
    world = Scenario("w", (load("a"), save("a", [0], True)), **WORLD)
    execution = run(world, "tests.quality.broken_verify:deadlocks_in_save")
    assert rules_of(execution) == ["R3"] and "never returned" in execution.failures[0].message


def test_a_settle_does_not_wait_out_the_deadline_for_a_chunk_only_a_poll_hands_out() -> None:
    """The chunk is got and waits for ``poll_ready``: nothing the adapter's threads owe, so
    the settle ends after its quiet period, not at the liveness deadline (every quarter
    second until then it judged the whole history, and the receiver polled idle)."""
    world = Scenario("w", (load("a"), save("a", [0], True), settle(), poll()), **WORLD)
    execution = run(world)
    assert execution.ok, execution.failures
    assert execution.virtual_time < WORLD["liveness"] / 2, execution.virtual_time


@pytest.mark.rule("R23")
def test_a_settle_still_waits_for_what_the_adapters_threads_owe() -> None:
    """A receiver that polls every 0.6 s (too slow for R17, which the run reports) is quiet
    for longer than a settle's quiet period while a put chunk is not yet got: the settle
    waits for it, up to the liveness deadline, so the poll after it hands the final out."""
    world = Scenario(
        "w", (load("a"), settle(), save("a", [0], True), settle(), poll()),
        options={"idle_backoff": 0.6}, **WORLD,
    )  # fmt: skip  # the first get finds nothing; the next is 0.6 s later
    execution = run(world)
    assert rules_of(execution) == ["R17"], execution.failures
    handed = [r for r in execution.history.records(CallRecord) if r.call == "poll_ready"]
    assert handed and handed[0].result, "the final was not handed out by the poll after the settle"


@pytest.mark.rule("R16")
def test_the_schedulers_busy_steps_land_a_call_inside_a_threads_two_lock_sections() -> None:
    """``Scenario.busy``: between two calls the scheduler works for some steps of its own
    while the adapter's threads run, so its ``cleanup_receiver`` can land between a RECV
    thread's token check and its commit (two lock sections). Think times are sleeps, and a
    sleeping scheduler lets the threads finish first: they never reach that window here."""
    spec = "tests.quality.unnamed.two_step_commit:make"
    setup = sim_setup(load_factory(spec), wall_timeout=10.0, max_steps=30_000)
    program = (load("a"), save("a", [0]), cleanup("a"), poll(), save("a", [1], True), settle())

    def failing_seeds(**pace: Any) -> int:
        found = 0
        with prepared(setup):
            for timing_seed in range(8):  # where the busy steps fall: keyed on this
                world = Scenario(
                    "w", (*program, poll()), notify=True, timing_seed=timing_seed, **pace, **WORLD
                )  # fmt: skip
                for seed in range(5):
                    runs = run_world(world, strategy_for(("sections", seed, ()), world), setup)
                    found += "R16" in rules_of(runs[-1])
        return found

    assert failing_seeds(think=0.01) == 0


@pytest.mark.rule("R17")
def test_a_chunk_put_while_its_request_is_not_registered_is_not_late() -> None:
    """A judge error the third session's worlds found: the chunk lands after the receiver
    was cleaned up (a stale get found nothing just before), and is fetched when the request
    is registered again. Nobody was owed it in between: no R17, on any schedule."""
    world = Scenario(
        "w", (save("a", [0, 0]), poll(), load("a"), cleanup("a"), settle(), load("a")),
        consume_on_get=False, notify=True, **WORLD,
    )  # fmt: skip
    setup = sim_setup(reference_factory, wall_timeout=10.0, max_steps=30_000)
    with prepared(setup):
        for seed in range(40):
            runs = run_world(world, strategy_for(("random", seed, ()), world), setup)
            assert runs[-1].ok, (seed, runs[-1].failures)


@pytest.mark.rule("R17")
def test_a_get_in_flight_across_a_cleanup_makes_nothing_due() -> None:
    """A judge error the false-alarm run at seed 440 found (exit 3 for all 19 correct
    adapters: the reference failed the world too). The middle's get of chunk 0 began before
    a ``cleanup_receiver`` of its request and ended after it: what it got may be stale, for
    a registration that is gone, so chunk 1 was not owed until the request was registered
    again (and fetched promptly then). The world as drawn, on the reference, 20 schedules."""
    world = Scenario(
        "world",
        (
            load("a"), save("a", None), save("a", [2, [[], b"\x00X"]]), save("a", [3, 5]),
            settle(), load("a", on="middle"), poll(on="middle"), save("a", [7, [{}]]),
            pause(0.01), save("a", None), cleanup("a", on="middle"), save("a", None, True),
            settle(), load("a", on="middle"), settle(), save("a", None),
            cleanup("a", on="middle"), settle(), save("a", None, True), poll(),
        ),
        options={"wait_timeout": 1.0}, consume_on_get=False, notify=True,
        topology="three-stage", stage_ids=(0, 1, 2), default_src=True, latency=0.05,
        busy=24, liveness=2.0, preempt=0.01,
    )  # fmt: skip
    failed = reference_fails(world, wall_timeout=10.0)
    assert failed is None, failed.failures


def _skips_tuples(obj: Any) -> Any:
    """BUG (R4): a snapshot with a fast path for "immutable" values; a tuple is one, but
    the list it holds is shared with the scheduler, who goes on changing it."""
    return obj if isinstance(obj, tuple) else copy.deepcopy(obj)


def skips_tuples(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return ChunkAdapter(connector, snapshot=_skips_tuples, **kwargs)


@pytest.mark.rule("R4")
def test_a_tuple_holding_a_list_is_mutated_through_and_travels_as_a_tuple() -> None:
    saved = ("t", [1, (2, {"k": [3]})])
    world = Scenario("w", (save("r", saved, True),))
    assert decode(encode(world)).ops[0].obj == saved  # a tuple stays a tuple
    assert isinstance(decode(encode(world)).ops[0].obj[1][1], tuple)
    # depth 2 and deeper (a tuple is no level: it cannot change, what it holds can)
    assert mutate_in_place(saved, 2) == "obj[1][1][1]['k']"
    assert saved == ("t", [1, (2, {"k": [3, "mutated"]})])
    # depth 0: everything that can change, through the tuples
    assert mutate_in_place(saved, 0) == "obj[1][1][1]['k'], obj[1][1][1], obj[1]"
    assert saved == ("t", [1, (2, {"k": [3, "mutated", "mutated"], "mutated": True}), "mutated"])
    # deeper than anything it holds: the deepest
    assert mutate_in_place(["a", [0]], 5) == "obj[1]"
    assert mutate_in_place(7, 0) == "nothing (a int)"


@pytest.mark.rule("R4")
@pytest.mark.slow  # 20-35 s: CI stays under 15 minutes (tox -e stress runs it)
def test_generated_worlds_find_a_snapshot_that_shares_what_a_tuple_holds() -> None:
    sim = simulate(skips_tuples, examples=300, deadline=time.monotonic() + 120, seed=0)
    assert sim.found is not None, f"no failing world in {sim.worlds}"
    assert signature(sim.found.execution.failures) == "R4", sim.found.execution.failures
