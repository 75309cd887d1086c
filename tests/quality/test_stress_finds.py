"""The stress scenarios catch bugs that only show under volume, faults, blocking or time.

Each broken adapter in ``broken_stress.py`` is the reference adapter with one
method overridden; each test runs the one scenario that should catch it and
checks that the report names the right rule for the right reason. Where a
scenario runs with a setting the bug needs (a long wait timeout), a control
runs the reference adapter with that same setting and must pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.stress import (
    StressReport,
    blocked_work,
    head_of_line,
    idle_polling,
    prompt_stop,
    put_faults,
)
from chunk_adapter.stress.report import DEFAULT_SEED
from chunk_adapter.stress.suite import scenarios
from tests.quality import broken_stress as broken


def _found(report: StressReport, rule: str, phrase: str) -> None:
    assert not report.ok, f"the seeded bug was not found:\n{report.describe()}"
    hits = [f for f in report.failures if f.startswith(f"{rule}:") and phrase in f]
    assert hits, f"expected a {rule} failure mentioning {phrase!r}:\n{report.describe()}"
    text = report.describe()
    assert f"seed: {report.seed}" in text and "rerun the test:" in text, text


@pytest.mark.rule("R10", "R11", "R23")
def test_finds_a_final_put_that_is_not_retried() -> None:
    report = put_faults(
        broken.final_not_retried,
        requests=10,
        put_rate=0.0,
        put_bursts=0,
        final_retries=3,
        final_put_failures=6,
        deadline=1.0,
    )
    _found(report, "R23", "no final handed out")
    assert any(f.startswith("R11:") and "never put" in f for f in report.failures), (
        report.describe()
    )


@pytest.mark.rule("R22", "R23")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_finds_a_save_thread_killed_by_a_put_exception() -> None:
    report = put_faults(broken.save_dies_on_put_error, requests=20, put_rate=0.3, deadline=1.0)
    _found(report, "R22", "died while the adapter was running")


@pytest.mark.rule("R17")
def test_finds_a_busy_spinning_recv_loop() -> None:
    report = idle_polling(broken.busy_spinning_recv, idle_requests=10, seconds=1.0)
    _found(report, "R17", "busy polling")


@pytest.mark.rule("R18")
def test_finds_a_stop_that_joins_without_a_timeout() -> None:
    report = prompt_stop(broken.stop_joins_forever, state="build_blocked")
    _found(report, "R18", "had not returned")


@pytest.mark.rule("R18")
def test_finds_a_stop_that_does_not_notify() -> None:
    report = prompt_stop(broken.stop_without_notify, state="idle")
    _found(report, "R18", "threads still alive")
    _found(report, "R18", "stop() took")


@pytest.mark.rule("R18")
def test_finds_a_put_that_starts_after_stop_returned() -> None:
    """The build is held across stop(); once it returns, the put must not start."""
    report = prompt_stop(broken.puts_after_stop, state="build_blocked")
    _found(report, "R18", "a put began after stop() had returned")


def _reference_long_wait(connector: Any, **kwargs: Any) -> ChunkAdapter:
    kwargs["wait_timeout"] = 5.0
    return ChunkAdapter(connector, **kwargs)


@pytest.mark.rule("R18")
def test_control_a_notifying_stop_is_prompt_despite_a_long_wait_timeout() -> None:
    report = prompt_stop(_reference_long_wait, state="idle")
    assert report.ok, report.describe()


@pytest.mark.rule("R17")
def test_finds_head_of_line_blocking_in_recv() -> None:
    report = head_of_line(broken.head_of_line_recv, idle_requests=50, hot_requests=1)
    _found(report, "R17", "head-of-line blocking")


@pytest.mark.rule("R10")
def test_finds_stats_that_disagree_with_the_recording() -> None:
    report = put_faults(broken.miscounts_drops, requests=50, put_rate=0.5)
    _found(report, "stats", "dropped_put_failed")


@pytest.mark.rule("R11", "R23")
def test_the_printed_python_call_reproduces_the_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """The 'rerun in Python' line of a failed report, pasted and run, fails the same way."""
    spec = "tests.quality.broken_stress:final_not_retried"
    params = {"requests": 5, "put_rate": 0.0, "put_bursts": 0, "final_retries": 2, "deadline": 0.5}
    first = put_faults(broken.final_not_retried, **params)  # type: ignore[arg-type]
    assert not first.ok
    line = first.python_call(spec)
    assert f"seed={first.seed}" in line
    exec(line, {})
    again = capsys.readouterr().out
    assert "FAILED" in again and "R23:" in again, again


@pytest.mark.rule("R3")
def test_finds_a_scheduler_call_that_waits_for_a_blocked_build() -> None:
    """The call would block the thread that opens the gate: the watchdog turns the hang
    into a finding."""
    report = blocked_work(
        broken.builds_in_save_async, requests=10, chunks=2, episodes=1, episode_limit=1.0
    )
    _found(report, "R3", "watchdog had to open the gate")
    _found(report, "R3", "save_async('blk0-build')")


def _suite_run(name: str) -> Any:
    """The stress stage's own run called *name* (its parameters as verify runs it)."""
    return next(run for label, _rules, run in scenarios(DEFAULT_SEED) if label == name)


@pytest.mark.rule("R3")
def test_a_deep_backlog_finds_a_save_async_that_waits_for_room_in_a_bounded_queue() -> None:
    """A queue bounded at 256 whose producer waits: 40 calls an episode never fill it, the
    deep backlog's 1,000 do, and the watchdog turns the wait into a finding."""
    shallow = blocked_work(broken.waits_for_room, seed=DEFAULT_SEED, episode_limit=1.0)
    assert shallow.ok, shallow.describe()  # why the deep backlog is a run of its own
    report = _suite_run("blocked work, deep backlog")(broken.waits_for_room)
    _found(report, "R3", "watchdog had to open the gate")


@pytest.mark.rule("R3")
def test_control_the_reference_keeps_a_deep_backlog_without_waiting() -> None:
    report = _suite_run("blocked work, deep backlog")(ChunkAdapter)
    assert report.ok, report.describe()
    assert report.measurements["calls_while_blocked"] >= 1000, report.describe()
