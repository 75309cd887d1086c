"""Exit codes mean one thing each: 0 pass, 1 confirmed violation, 2 usage, 3 inconclusive.

Every case runs the real command line (or pytest with the plugin) in a
subprocess, from a directory holding the user's adapter module, as a user's
CI would. The usage cases are modules written into a temporary directory, so
a file with a syntax error never sits in the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chunk_adapter.verify import UsageError, VerificationInconclusive, check_adapter

ROOT = Path(__file__).resolve().parents[2]

MISSING_METHODS = """
class Half:
    def __init__(self, connector, **kwargs):
        pass
    def save_async(self, request_id, obj, is_final):
        pass
    def stop(self):
        pass

def make(connector, **kwargs):
    return Half(connector, **kwargs)
"""

HANGS = """
import threading

def make(connector, **kwargs):
    threading.Event().wait()
"""

USAGE_CASES = {
    # module text, the spec, what the one line must say
    "syntax": ("def make(connector, **kwargs)\n    pass\n", "syntax:make", "SyntaxError"),
    "raises_at_import": (
        "raise RuntimeError('no config file')\n",
        "raises_at_import:make",
        "no config file",
    ),
    "half": (MISSING_METHODS, "half:make", "without cancel_sender, load_async"),
}


def run_cli(cwd: Path, *args: str, timeout: float = 240) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(USAGE_CASES))
def test_an_adapter_that_cannot_be_imported_or_built_is_a_usage_error(
    name: str, tmp_path: Path
) -> None:
    text, spec, says = USAGE_CASES[name]
    (tmp_path / f"{spec.split(':')[0]}.py").write_text(textwrap.dedent(text))
    code, out = run_cli(tmp_path, "--adapter", spec, timeout=120)
    assert code == 2, out
    assert says in out, out
    assert "VIOLATION" not in out, out


def test_a_factory_that_hangs_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    code, out = run_cli(tmp_path, "--adapter", "hangs:make", timeout=120)
    assert code == 2, out
    assert "did not return within" in out and "hangs:make" in out, out


def test_a_budget_too_short_for_the_planned_work_is_inconclusive_not_a_violation(
    tmp_path: Path,
) -> None:
    """A correct adapter with 8 s for work that needs a minute: exit 3, every stage honest."""
    report = tmp_path / "report.json"
    code, out = run_cli(ROOT, "--max-seconds", "8", "--json", str(report))
    assert code == 3, out
    assert "INCONCLUSIVE" in out and "VIOLATION" not in out, out
    data = json.loads(report.read_text())
    assert data["verdict"] == "inconclusive" and data["exit_code"] == 3, data
    verdicts = {check["verdict"] for check in data["checks"]}
    assert "fail" not in verdicts, data["checks"]
    assert "inconclusive" in verdicts, data["checks"]


def test_check_adapter_says_inconclusive_apart_from_violation() -> None:
    with pytest.raises(VerificationInconclusive) as caught:
        check_adapter("chunk_adapter.adapter:ChunkAdapter", max_seconds=4, stages=["stateful"])
    assert not isinstance(caught.value, AssertionError)
    assert caught.value.report.exit_code == 3
    report = check_adapter(
        "chunk_adapter.adapter:ChunkAdapter",
        max_seconds=4,
        stages=["stateful"],
        allow_inconclusive=True,
    )
    assert report.verdict == "inconclusive"


def test_check_adapter_raises_usage_error_for_a_bad_spec() -> None:
    with pytest.raises(UsageError):
        check_adapter("no_such_module_xyz:make")


def test_the_pytest_plugin_exits_3_when_a_stage_is_inconclusive() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
         "chunk_adapter.conformance", "-k", "stateful", "--chunk-max-seconds", "4", "-rs"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "INCONCLUSIVE" in out, out


def test_verify_leaves_no_hypothesis_directory_in_the_users_tree(tmp_path: Path) -> None:
    code, out = run_cli(
        tmp_path, "--adapter", "chunk_adapter.adapter:ChunkAdapter", "--stage", "stateful",
        "--max-seconds", "6",
    )  # fmt: skip
    assert code in (0, 3), out
    assert not (tmp_path / ".hypothesis").exists(), sorted(p.name for p in tmp_path.iterdir())
