"""The CI recipes in docs/ci.md are real: parsed as YAML, their verify commands run.

Each command is run as written, with the placeholder adapter replaced by a
broken one (the job must fail with exit 1 and leave its reports) and once by
the reference adapter on the examples stage (exit 0).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "my_pkg.adapters:make_adapter"
BROKEN = "tests.quality.broken_stateful:missing_snapshot"


def blocks() -> list[Any]:
    text = (ROOT / "docs" / "ci.md").read_text()
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]


def recipe(key: str) -> Any:
    found = [b for b in blocks() if isinstance(b, dict) and key in b]
    assert len(found) == 1, f"docs/ci.md should have one YAML block with {key!r}"
    return found[0]


def github_commands() -> list[str]:
    steps = recipe("jobs")["jobs"]["verify"]["steps"]
    return [s["run"] for s in steps if "run" in s and s["run"].startswith("chunk-adapter verify")]


def gitlab_commands() -> list[str]:
    script = recipe("adapter-contract")["adapter-contract"]["script"]
    return [line for line in script if line.startswith("chunk-adapter verify")]


def precommit_command() -> str:
    hook = recipe("repos")["repos"][0]["hooks"][0]
    return " ".join([hook["entry"], *map(shlex.quote, hook["args"])])


def run(command: str, adapter: str, cwd: Path, *extra: str, **env: str) -> int:
    argv = [adapter if word == PLACEHOLDER else word for word in shlex.split(command)]
    assert argv[:2] == ["chunk-adapter", "verify"], argv
    assert adapter in argv, f"{command!r} does not name the adapter {PLACEHOLDER}"
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", *argv[1:], *extra],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip
    return proc.returncode


def check_reports(cwd: Path, verdict: str) -> None:
    schema = json.loads(
        resources.files("chunk_adapter.verify").joinpath("report.schema.json").read_text()
    )
    data = json.loads((cwd / "verify.json").read_text())
    jsonschema.validate(data, schema)
    assert data["verdict"] == verdict
    suite = ET.parse(cwd / "verify.xml").getroot().find("testsuite")
    assert suite is not None and suite.find("properties") is not None
    assert verdict.upper() in (cwd / "verify.md").read_text()


@pytest.mark.parametrize("source", ["github", "gitlab"])
def test_the_ci_job_fails_on_a_broken_adapter_and_leaves_its_reports(
    source: str, tmp_path: Path
) -> None:
    (command,) = github_commands() if source == "github" else gitlab_commands()
    summary = tmp_path / "step-summary.md"
    code = run(command, BROKEN, tmp_path, GITHUB_STEP_SUMMARY=str(summary))
    assert code == 1
    check_reports(tmp_path, "violation")
    assert "R4" in summary.read_text() and "Reproduce with:" in summary.read_text()


def test_the_ci_job_passes_a_correct_adapter(tmp_path: Path) -> None:
    (command,) = github_commands()
    assert run(command, "chunk_adapter.adapter:ChunkAdapter", tmp_path, "--stage", "examples") == 0
    check_reports(tmp_path, "pass")


def test_the_pre_commit_hook_in_the_docs_is_the_one_shipped(tmp_path: Path) -> None:
    shipped = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    documented = recipe("repos")["repos"][0]["hooks"][0]
    assert shipped[0]["id"] == documented["id"]
    assert shipped[0]["entry"] == documented["entry"]
    assert run(precommit_command(), BROKEN, tmp_path) == 1
