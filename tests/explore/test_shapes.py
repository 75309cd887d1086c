"""Substitution mode controls every thread, whatever the adapter's code layout (issue 5).

Each shape in ``shapes/`` is a correct adapter that uses the standard library's
threading directly, laid out the way the explorer used to get wrong (a factory
in a package ``__init__``, a base class in another module, a ``**options``
factory dropping ``runtime=``, a ``queue.Queue``, a ``ThreadPoolExecutor``, a
``Thread`` subclass and a ``Timer``, ``from threading import ...``). Before,
their threads ran uncontrolled, virtual time jumped under them and the oracles
called chunks lost. Now (a) each explores with no failure and every one of its
threads is a task of the controller; (b) a race seeded into two of them is
still found, and its replay string replays, also through ``chunk-adapter replay``.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chunk_adapter.explore import LIBRARY, PctStrategy, RandomStrategy, explore, replay
from chunk_adapter.explore.control.plan import plan_control
from chunk_adapter.explore.runtime.controller import ExplorerMisuse
from chunk_adapter.factory import load_factory
from chunk_adapter.verify.replay import replay_string

ROOT = Path(__file__).resolve().parents[2]


SHAPES = "tests.explore.shapes"
CORRECT = [
    # (factory spec, thread names a saving pipeline must show as tasks)
    ("split_pkg:make", {"chunk-adapter-save", "chunk-adapter-recv"}),
    ("base_sub.sub:Adapter", {"chunk-adapter-save", "chunk-adapter-recv"}),
    ("options_factory:make", {"chunk-adapter-save", "chunk-adapter-recv"}),
    ("queue_fifo:make", {"chunk-adapter-save", "chunk-adapter-recv"}),
    ("executor_save:make", {"chunk-adapter-save_0", "chunk-adapter-recv"}),
    ("thread_timer:make", {"chunk-adapter-save", "chunk-adapter-recv"}),
    ("rlock_perf:make", {"chunk-adapter-save", "chunk-adapter-recv"}),
]
SCENARIOS = [
    "pipeline/q1-save-snapshot-enqueue",
    "pipeline/q2-id-advances-on-put",
    "pipeline/q4-receiver-finished",
    "pipeline/q5-cleanup-inflight-get",
    "pipeline/q6-idle-polling",
    "pipeline/q7-stop-wakes-save",
    "pipeline/three-stage",
]


def factory(spec: str) -> Any:
    return load_factory(f"{SHAPES}.{spec}")


@pytest.mark.parametrize(("spec", "threads"), CORRECT, ids=[c[0] for c in CORRECT])
def test_each_correct_shape_is_controlled_and_explores_clean(spec: str, threads: set[str]) -> None:
    make = factory(spec)
    control = plan_control(make)
    assert control.mode == "substitution", control.describe()
    # Every thread the adapters start is a task: the sender's and the receiver's.
    seen = replay(LIBRARY["pipeline/q1-save-snapshot-enqueue"], "1:0:", factory=make,
                  substitute="auto")  # fmt: skip
    assert seen.ok, seen.failures
    names = [name.split(":", 1)[-1] for name in seen.task_names]  # without the member
    assert names[0] == "scheduler"
    assert threads <= set(names), names
    assert names.count("chunk-adapter-recv") == 2, names  # one RECV thread per adapter
    assert {"sender:chunk-adapter-recv", "receiver:chunk-adapter-recv"} <= set(seen.task_names)
    if spec.startswith("thread_timer"):
        assert len(names) == 7, names  # and each stop()'s Timer
    ran = {step.tid for step in seen.trace}
    assert ran == set(range(len(names))), "a task that never reached a switch point"
    for name in SCENARIOS:
        for strategy in (PctStrategy(seed=1, executions=20), RandomStrategy(seed=1, executions=20)):
            report = explore(LIBRARY[name], strategy, factory=make, substitute="auto")
            assert report.ok, report.describe_failure()


def test_a_factory_that_drops_runtime_is_not_taken_for_white_box() -> None:
    """``make(connector, **options)`` accepts runtime= by its signature; looking shows it
    drops it, so the strict API refuses it and names the way in."""
    make = factory("options_factory:make")
    assert "still started real threads" in plan_control(make).evidence
    with pytest.raises(ExplorerMisuse, match="substitute="):
        explore(LIBRARY["pipeline/q7-stop-idle"], RandomStrategy(executions=1), factory=make)


def test_the_reference_adapter_is_white_box() -> None:
    control = plan_control(load_factory("chunk_adapter.adapter:ChunkAdapter"))
    assert (control.mode, control.pass_runtime) == ("white-box", True), control.describe()


BUGS = [
    ("queue_fifo:make_no_token_check", "pipeline/q5-cleanup-inflight-get", "R16"),
    ("queue_fifo:make_no_token_check", "q5-cleanup-inflight-get", "R16"),
    ("executor_save:make_split_poll", "pipeline/q4-receiver-finished", "R14"),
]


@pytest.mark.rule("R14", "R16")
@pytest.mark.parametrize(("spec", "name", "rule"), BUGS)
def test_a_seeded_race_in_a_shape_is_found_and_replays(spec: str, name: str, rule: str) -> None:
    make = factory(spec)
    report = explore(LIBRARY[name], PctStrategy(seed=0, executions=400), factory=make,
                     substitute="auto")  # fmt: skip
    assert report.failure is not None, report.summary()
    rules = [f.message.split(":")[0] for f in report.failure.failures]
    assert rule in rules, report.describe_failure()
    assert "substitute='auto'" in report.describe_failure()  # the printed Python replays it
    again = replay(LIBRARY[name], report.failure.schedule, factory=make, substitute="auto")
    assert [f.message for f in again.failures] == [f.message for f in report.failure.failures]
    assert again.schedule == report.failure.schedule
    # The command verify prints replays it too (exit 1: the bug is there).
    out = io.StringIO()
    string = f"explore:{name}:{report.failure.schedule}"
    assert replay_string(string, f"{SHAPES}.{spec}", out) == 1, out.getvalue()
    assert rule in out.getvalue()


@pytest.mark.rule("R16")
def test_chunk_adapter_replay_command_line_replays_a_substitution_mode_failure() -> None:
    spec = f"{SHAPES}.queue_fifo:make_no_token_check"
    name = "pipeline/q5-cleanup-inflight-get"
    report = explore(LIBRARY[name], PctStrategy(seed=0, executions=400), factory=load_factory(spec),
                     substitute="auto")  # fmt: skip
    assert report.failure is not None
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "replay",
         f"explore:{name}:{report.failure.schedule}", "--adapter", spec],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "R16" in proc.stdout and report.failure.schedule in proc.stdout


def test_an_adapter_delegating_to_an_engine_in_another_package_is_controlled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found outside the repo: the factory's module and the adapter's class were the only
    candidates, so the engine's ``from threading import`` names stayed real, its
    threads ran uncontrolled and every scenario was inconclusive. Now the discovery
    build's view of the adapter (what it holds, what its threads run) adds the engine."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "outside"))
    make = load_factory("delegating_front:make")
    control = plan_control(make)
    assert "tests.explore.shapes.rlock_perf" in control.module_names, control.describe()
    for name in ("pipeline/q1-save-snapshot-enqueue", "pipeline/q5-cleanup-inflight-get"):
        report = explore(LIBRARY[name], PctStrategy(seed=1, executions=10), factory=make,
                         substitute="auto")  # fmt: skip
        assert report.ok, report.describe_failure()
