"""``verify --jobs``: stages at once, the report of running them one at a time (issue 25).

``runner._run_stages`` is driven with stand-in stages (no worker processes):
gates decide when each one finishes, so every order asked for happens.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from chunk_adapter.outcome import CheckResult
from chunk_adapter.verify.runner import _run_stages, default_jobs, shard_seed
from chunk_adapter.verify.stages import Stage

WAIT = 10.0  # s: a bound on a gate that is always opened (never reached when all is well)


def _stages(n: int) -> list[Stage]:
    return [Stage(f"s{i}", "x:y", 0.5, "a stand-in") for i in range(1, n + 1)]


def _result(stage: Stage, verdict: str) -> list[CheckResult]:
    return [CheckResult(stage.name, "check", ("R1",), verdict, "stand-in")]


def test_stages_run_at_once_and_come_back_in_order() -> None:
    both = threading.Barrier(2, timeout=WAIT)  # each stage waits until the other runs

    def run(stage: Stage, share: float, cancel: threading.Event) -> list[CheckResult]:
        both.wait()
        return _result(stage, "pass")

    out = _run_stages(_stages(2), 2, 100.0, time.monotonic(), False, run, None)
    assert [r[0].stage for r in out if isinstance(r, list)] == ["s1", "s2"]


def test_a_failure_stops_the_later_stages_and_keeps_the_earlier() -> None:
    # s1 runs until s2 has failed; s3 must then never start, and s1's result still counts
    s2_failed = threading.Event()
    started: list[str] = []

    def run(stage: Stage, share: float, cancel: threading.Event) -> list[CheckResult]:
        started.append(stage.name)
        if stage.name == "s1":
            assert s2_failed.wait(WAIT)
            return _result(stage, "pass")
        if stage.name == "s2":
            s2_failed.set()
            return _result(stage, "fail")
        return _result(stage, "pass")

    out = _run_stages(_stages(3), 2, 100.0, time.monotonic(), False, run, None)
    assert out[2] is None and "s3" not in started
    assert isinstance(out[0], list) and isinstance(out[1], list)
    assert out[1][0].verdict == "fail"


def test_a_running_later_stage_is_told_to_stop() -> None:
    cancelled = threading.Event()
    s2_running = threading.Event()

    def run(stage: Stage, share: float, cancel: threading.Event) -> list[CheckResult]:
        if stage.name == "s2":
            s2_running.set()
            if cancel.wait(WAIT):
                cancelled.set()
            return _result(stage, "inconclusive")
        assert s2_running.wait(WAIT)
        return _result(stage, "fail")

    out = _run_stages(_stages(2), 2, 100.0, time.monotonic(), False, run, None)
    assert cancelled.is_set()
    assert isinstance(out[0], list) and out[0][0].verdict == "fail"


def test_keep_going_runs_every_stage() -> None:
    def run(stage: Stage, share: float, cancel: threading.Event) -> list[CheckResult]:
        return _result(stage, "fail")

    out = _run_stages(_stages(3), 2, 100.0, time.monotonic(), True, run, None)
    assert all(isinstance(r, list) for r in out)


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_the_outcomes_do_not_depend_on_jobs(jobs: int) -> None:
    verdicts = {"s1": "pass", "s2": "inconclusive", "s3": "fail", "s4": "pass"}

    def run(stage: Stage, share: float, cancel: threading.Event) -> list[CheckResult]:
        return _result(stage, verdicts[stage.name])

    out = _run_stages(_stages(4), jobs, 100.0, time.monotonic(), False, run, None)
    kept = [r[0].verdict if isinstance(r, list) else r for r in out]
    assert kept[:3] == ["pass", "inconclusive", "fail"]
    # s4 may have finished before s3 failed (it is dropped by the report), or not started
    assert kept[3] in (None, "pass")


def test_default_jobs_and_shard_seeds() -> None:
    assert 1 <= default_jobs() <= 4
    assert default_jobs() <= max(1, (os.cpu_count() or 1) // 2)
    seeds = {shard_seed(7, (i, 4)) for i in range(1, 5)}
    assert len(seeds) == 4  # every shard its own part of the random space
    assert not seeds & {shard_seed(8, (i, 4)) for i in range(1, 5)}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--jobs", "0"], "--jobs must be 1 or more, got 0"),
        (["--shard", "3/2", "--profile", "hunt"], "1 <= I <= N"),
        (["--shard", "x/2", "--profile", "hunt"], "got 'x/2'"),
        (["--shard", "1/2"], "profile 'ci' is derandomized"),
    ],
)
def test_bad_jobs_and_shards_are_refused_before_anything_runs(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from chunk_adapter.cli import main

    assert main(["verify", *argv]) == 2
    assert says in capsys.readouterr().err
