"""`chunk-adapter verify` survives bad adapters and bad usage (the real CLI, in a subprocess).

Bounds are generous: each verdict is expected within a few seconds; the test
allows the whole --max-seconds budget plus margin.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "tests.quality.broken_verify"
BUDGET = 40.0


def run_cli(*args: str, timeout: float = BUDGET + 30) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


@pytest.mark.rule("R18")
def test_a_stop_that_hangs_is_a_violation_not_a_hung_tool() -> None:
    code, out, took = run_cli(
        "--adapter", f"{BROKEN}:hangs_in_stop", "--stage", "examples", "--max-seconds", str(BUDGET)
    )
    assert code == 1, out
    assert "stop() did not return within" in out, out
    assert took < BUDGET + 20, f"verdict took {took:.1f} s"


@pytest.mark.rule("R3")
def test_a_save_async_that_deadlocks_is_a_violation() -> None:
    code, out, took = run_cli(
        "--adapter", f"{BROKEN}:deadlocks_in_save", "--stage", "examples",
        "--max-seconds", str(BUDGET),
    )  # fmt: skip
    assert code == 1, out
    assert "save_async" in out and "did not return within" in out, out
    assert "R3" in out
    assert took < BUDGET + 20, f"verdict took {took:.1f} s"


def test_a_factory_that_raises_is_a_usage_error_not_a_violation() -> None:
    code, out, _ = run_cli(
        "--adapter", f"{BROKEN}:factory_raises", "--stage", "examples", "--max-seconds", str(BUDGET)
    )
    assert code == 2, out
    assert "this factory cannot build an adapter" in out, out
    assert "fix the factory" in out, out


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_colon_here", "package.module:factory"),
        ("no_such_module_xyz:factory", "cannot import module"),
        (f"{BROKEN}:no_such_factory", "has no attribute"),
        (f"{BROKEN}:wrong_signature", "cannot be called as"),
    ],
)
def test_usage_errors_exit_2_and_say_how_to_fix(spec: str, says: str) -> None:
    code, out, _ = run_cli("--adapter", spec, timeout=60)
    assert code == 2, out
    assert says in out, out


def test_the_reference_adapter_passes_the_examples_stage() -> None:
    code, out, _ = run_cli("--stage", "examples", "--max-seconds", str(BUDGET))
    assert code == 0, out
    assert "PASS" in out
