"""The pytest plugin and the one-call API, as a user's test suite meets them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chunk_adapter.verify import ContractViolation, check_adapter

ROOT = Path(__file__).resolve().parents[2]


def run_pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_conformance_suite_fails_a_broken_adapter_naming_the_rule() -> None:
    proc = run_pytest(
        "--pyargs", "chunk_adapter.conformance", "-k", "examples",
        "--chunk-adapter", "tests.quality.broken_explore:NoTokenCheck",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "R16" in out and "reproduce with:" in out, out
    # The header shows the flags in effect, ready to paste back.
    assert (
        "chunk-adapter: --chunk-adapter tests.quality.broken_explore:NoTokenCheck "
        "--chunk-profile ci --chunk-seed 0" in out
    ), out


def test_the_conformance_suite_passes_the_reference_adapter() -> None:
    proc = run_pytest("--pyargs", "chunk_adapter.conformance", "-k", "examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout, proc.stdout


@pytest.mark.rule("R4")
def test_check_adapter_raises_with_the_report() -> None:
    with pytest.raises(ContractViolation) as caught:
        check_adapter("tests.quality.broken_stateful:missing_snapshot", profile="quick")
    report = caught.value.report
    assert report.exit_code == 1
    assert any("R4" in r.rules for r in report.failures), report.failures
    assert "R4" in str(caught.value)


def test_the_old_option_name_still_works_with_a_deprecation_warning() -> None:
    proc = run_pytest(
        "--pyargs", "chunk_adapter.conformance", "-k", "examples",
        "--adapter", "chunk_adapter.adapter:ChunkAdapter", "--hypothesis-seed", "7",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "--adapter is deprecated; use --chunk-adapter" in out, out
    assert "--chunk-seed 7" in out, out
