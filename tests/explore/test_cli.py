"""``python -m chunk_adapter.explore``: list, run, replay, and clear errors (issue 5)."""

from __future__ import annotations

import sys

import pytest

from chunk_adapter.explore.__main__ import main


def test_list_names_every_library_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "q5-cleanup-inflight-get" in out and "token check" in out


def test_run_reports_a_complete_dfs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q7-stop-wakes-save", "--strategy", "dfs", "--bound", "1"]) == 0
    assert "complete after" in capsys.readouterr().out


@pytest.mark.rule("R16")
def test_run_then_replay_the_printed_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["q5-cleanup-inflight-get", "--adapter", "tests.quality.broken_explore:NoTokenCheck"]
    assert main(["run", *args[:1], "--strategy", "random", *args[1:]]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("or: python -m chunk_adapter.explore"))
    schedule = line.split("'")[1]
    assert main(["replay", args[0], schedule, *args[1:]]) == 1
    again = capsys.readouterr().out
    assert "R16" in again and f"Replay string: {schedule}" in again


def test_bad_arguments_exit_2_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no-such-scenario"]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert main(["run", "q7-stop-idle", "--adapter", "nope"]) == 2
    assert "package.module:factory" in capsys.readouterr().err
    assert sys.modules.get("nope") is None
