"""Scenarios drive a pipeline of adapters, not one adapter talking to itself (issue 5).

A sender (stage 0) gets the saves and cancels, a receiver (stage 1, reading 0)
the loads, polls and cleanups; ``stop()`` stops both, receiver first. A
three-stage scenario relays through a middle adapter, and the oracles judge
each hop on its own records. The loopback form is kept as its own topology.
"""

from __future__ import annotations

import pytest

from chunk_adapter.errors import InvalidValue
from chunk_adapter.explore import LIBRARY, RandomStrategy, explore, replay
from chunk_adapter.explore.engine.checks import _hop_history
from chunk_adapter.explore.engine.threads import run_threads
from chunk_adapter.explore.scenarios.library import VERIFY
from chunk_adapter.explore.scenarios.pipeline import hops, members
from chunk_adapter.explore.scenarios.scenario import Scenario, load, relay, save
from chunk_adapter.history import ConnectorOp
from chunk_adapter.oracles import CallRecord


def calls(execution: object) -> list[tuple[str, str]]:
    history = execution.history  # type: ignore[attr-defined]
    return [(r.adapter, r.call) for r in history.records(CallRecord)]


def test_a_pipeline_scenario_has_a_sender_and_a_receiver() -> None:
    run = replay(LIBRARY["pipeline/q1-save-snapshot-enqueue"], "1:0:")
    assert run.ok, run.failures
    # each thread named with the member it belongs to (the trace's column headers)
    members = ("sender", "receiver")
    assert run.task_names == ["scheduler"] + [
        f"{role}:chunk-adapter-{loop}" for role in members for loop in ("save", "recv")
    ]
    seen = calls(run)
    assert ("receiver", "load_async") in seen and ("sender", "save_async") in seen
    assert not {("sender", "load_async"), ("receiver", "save_async")} & set(seen)
    assert seen[-2:] == [("receiver", "stop"), ("sender", "stop")]
    puts = [r.key for r in run.history.records(ConnectorOp) if r.op == "put"]
    assert puts == ["a_0_0", "a_0_1"]


def test_the_three_stage_scenario_relays_the_same_request_ids() -> None:
    scenario = LIBRARY["pipeline/three-stage"]
    run = replay(scenario, "1:0:")
    assert run.ok, run.failures
    ops = run.history.records(ConnectorOp)
    assert [r.key for r in ops if r.op == "put"] == ["m_0_0", "m_0_1", "m_1_0", "m_1_1"]
    polls = [r for r in run.history.records(CallRecord) if r.call == "poll_ready"]
    handed = [c for r in polls if r.adapter == "receiver" for c in r.result.get("m", [])]
    assert handed == [{"data": "x", "finished": False}, {"data": "y", "finished": True}]
    # the script's drain() polls every receiving member until a round hands out nothing
    assert [(r.adapter, r.result) for r in polls[-2:]] == [("middle", {}), ("receiver", {})]
    # Each hop sees only its own keys, calls and builds.
    first, second = run.hops
    one = _hop_history(run, first).records()
    assert {r.key for r in one if isinstance(r, ConnectorOp)} == {"m_0_0", "m_0_1"}
    assert {(r.adapter, r.call) for r in one if isinstance(r, CallRecord)} >= {
        ("sender", "save_async"),
        ("middle", "load_async"),
        ("middle", "poll_ready"),
    }
    assert not any(isinstance(r, CallRecord) and r.adapter == "receiver" for r in one)
    two = _hop_history(run, second).records()
    assert not any(isinstance(r, CallRecord) and r.call == "save_async" and r.adapter == "sender"
                   for r in two)  # fmt: skip


def test_three_stage_explores_clean() -> None:
    report = explore(LIBRARY["pipeline/three-stage"], RandomStrategy(seed=0, executions=30))
    assert report.ok, report.describe_failure()


def test_layouts() -> None:
    assert [(m.role, m.stage_id, m.src_stage_id) for m in members("pipeline", 0)] == [
        ("sender", 0, None), ("receiver", 1, 0)
    ]  # fmt: skip
    assert [h.label for h in hops("three-stage", 0)] == ["sender->middle", "middle->receiver"]
    assert [(m.role, m.stage_id, m.src_stage_id) for m in members("loopback", 1)] == [
        ("adapter", 1, 1)
    ]


def test_verify_runs_every_pipeline_and_one_loopback() -> None:
    loopbacks = [n for n in VERIFY if LIBRARY[n].topology == "loopback"]
    assert loopbacks == ["q5-cleanup-inflight-get"]
    assert {n for n in LIBRARY if n.startswith("pipeline/")} <= set(VERIFY)
    for name, scenario in LIBRARY.items():
        assert scenario.topology == ("loopback" if "/" not in name else scenario.topology)


def test_scenarios_check_their_ops_against_the_topology() -> None:
    with pytest.raises(InvalidValue, match="relay\\(\\) needs a middle adapter"):
        Scenario("x", (relay(),))
    with pytest.raises(InvalidValue, match="has only \\['adapter'\\]"):
        Scenario("x", (load("r", on="receiver"),), topology="loopback")
    with pytest.raises(InvalidValue, match="unknown topology"):
        Scenario("x", (save("r", 1),), topology="ring")
    text = LIBRARY["pipeline/three-stage"].to_python()
    assert "load('m', on='middle')" in text and "topology='three-stage'" in text


def test_the_real_thread_baseline_runs_pipelines_too() -> None:
    run = run_threads(LIBRARY["pipeline/q1-save-snapshot-enqueue"])
    assert run.ok, run.failures


@pytest.mark.rule("R14")
def test_a_script_drains_every_receiving_stage_before_it_is_judged() -> None:
    """A middle that gets its chunks after the program's last ``relay()`` (here: it never
    relays) hands them on in the script's ``drain()``: "got but never handed out" (R14) is
    judged only once every receiving stage was polled while nothing more was on its way
    (a world ending without a poll of its middle failed the reference adapter: the
    false-alarm runs' seed 221)."""
    scenario = Scenario(
        "w",
        (load("m", on="middle"), load("m"), save("m", "x"), save("m", "y", True)),
        options={"idle_backoff": 0.01},
        topology="three-stage",
    )
    report = explore(scenario, RandomStrategy(seed=0, executions=20))
    assert report.ok, report.describe_failure()
    run = replay(scenario, "1:0:")
    polls = [r for r in run.history.records(CallRecord) if r.call == "poll_ready"]
    handed = [c["data"] for r in polls if r.adapter == "receiver" for c in r.result.get("m", [])]
    assert handed == ["x", "y"]
