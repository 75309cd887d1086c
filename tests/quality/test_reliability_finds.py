"""``verify --reliability`` finds adapters that keep R1–R24 and break R30 or R31.

Each seeded adapter of tests/quality/broken_reliability.py, run through the real
command line with ``--reliability --stage simulate`` (``ci``, derandomized: the same
worlds every run), must exit 1 naming its rule, with a replay that fails again; the
reference adapter must pass the same stage. Without the flag the same adapters pass
(an adapter written to R1–R24 may retry in place and die on ``SystemExit``): the
examples-free ``--stage simulate`` run shows it. One whole ``ci`` simulate stage per
run: -m slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quality.broken_reliability import EXPECTED
from tests.quality.test_verify_catalogue import BUDGET

ROOT = Path(__file__).resolve().parents[2]


def _verify(spec: str, tmp_path: Path, *flags: str) -> tuple[int, dict[str, object], str]:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec,
         "--stage", "simulate", "--json", str(report), *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=BUDGET + 60, check=False,
    )  # fmt: skip
    [check] = [c for c in json.loads(report.read_text())["checks"] if c["stage"] == "simulate"]
    return proc.returncode, check, proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reliability_worlds_find_the_broken_adapter(name: str, tmp_path: Path) -> None:
    code, check, out = _verify(f"tests.quality.broken_reliability:{name}", tmp_path,
                               "--reliability")  # fmt: skip
    assert code == 1, f"exit {code}, expected 1:\n{out}"
    assert check["verdict"] == "fail" and str(check["confirmation"]).startswith("replayed once")
    assert set(check["rules"]) & set(EXPECTED[name]), (check["rules"], out)  # type: ignore[arg-type]
    assert "chunk-adapter replay 'sim:" in out and "--reliability" in out


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.rule("R30")
@pytest.mark.rule("R31")
def test_the_reference_passes_the_reliability_worlds(tmp_path: Path) -> None:
    code, check, out = _verify("chunk_adapter.adapter:ChunkAdapter", tmp_path, "--reliability")
    assert code == 0, out
    assert {"R25", "R30", "R31"} <= set(check["rules"])  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.parametrize("name", ["in_place_retries", "retries_refused_puts", "silent_death"])
def test_without_the_flag_the_same_adapters_pass(name: str, tmp_path: Path) -> None:
    code, check, out = _verify(f"tests.quality.broken_reliability:{name}", tmp_path)
    assert code == 0, out
    assert not {"R25", "R30", "R31"} & set(check["rules"])  # type: ignore[arg-type]
