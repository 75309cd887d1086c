"""README.md's "Your own adapter, step by step", followed as written (slow: about 2 minutes).

The adapter block becomes ``my_adapters.py`` in a fresh folder outside the
repository; the commands after it run there, as a new user would: verify with
``--report-md`` fails (exit 1, R11, the summary written), the printed
``reproduce with:`` command fails again, and the pytest command fails the one
check and prints the command that runs it alone.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Your own adapter, step by step"


def walkthrough() -> tuple[str, list[str]]:
    """The section's Python block and its indented shell commands, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    commands = re.findall(r"^    ((?:chunk-adapter|pytest) .*)$", section, flags=re.M)
    assert len(code) == 1 and len(commands) == 2, (code, commands)
    return code[0], commands


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    tool = {"chunk-adapter": ["-m", "chunk_adapter"], "pytest": ["-m", "pytest"]}[argv[0]]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="300")
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, *tool, *argv[1:]],
        cwd=cwd, capture_output=True, text=True, timeout=400, check=False, env=env,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.rule("R11")
def test_the_readme_walkthrough_fails_reports_and_replays(tmp_path: Path) -> None:
    code, (verify, pytest_command) = walkthrough()
    (tmp_path / "my_adapters.py").write_text(code)
    first = run(verify, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "VIOLATION in examples/example 2 (R11)" in first.stdout, first.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "R11" in summary and "VIOLATION" in summary, summary
    replay = next(
        line.split("reproduce with: ", 1)[1]
        for line in first.stdout.splitlines()
        if "reproduce with: " in line
    )
    assert replay in (ROOT / "README.md").read_text().replace("\n", " ")
    again = run(replay, tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "R11" in again.stdout, again.stdout
    tested = run(pytest_command, tmp_path)
    out = tested.stdout + tested.stderr
    assert tested.returncode == 1, out
    assert "FAILED chunk_adapter.conformance::test_check[examples-example-2] - R11: " in out
    assert "this check alone: pytest" in out, out
