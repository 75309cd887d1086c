"""Correct adapters in shapes unlike the reference one must pass ``chunk-adapter verify``.

Each adapter in tests/quality/correct/ keeps the contract; a non-zero exit is a
false alarm of the suite. The real CLI runs in a subprocess from the repo root,
two verifies at once (as on a loaded CI machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.quality.correct.catalogue import CORRECT

REPO = Path(__file__).resolve().parents[2]
CORRECT_DIR = Path(__file__).resolve().parent / "correct"

__all__ = ["CORRECT"]

WAIT_LIMIT = 420.0  # seconds one verify may take before the test gives up on it (ci: 150 s)


@dataclass
class Run:
    spec: str
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    report: dict | None

    def first_failure(self) -> str:
        for check in (self.report or {}).get("checks", []):
            if check.get("verdict") in ("fail", "inconclusive"):
                return (
                    f"{check.get('verdict')} {check.get('stage')}/{check.get('name')} "
                    f"{check.get('rules')}: {str(check.get('evidence', '')).splitlines()[:1]}"
                )
        return "(no failing check in the JSON report)"

    def transcript(self) -> str:
        return (
            f"===== {self.spec}: exit {self.returncode} in {self.seconds:.1f} s\n"
            f"first failing check: {self.first_failure()}\n"
            f"----- stdout\n{self.stdout}\n----- stderr\n{self.stderr}"
        )


def _verify(spec: str, json_path: Path, extra: Sequence[str]) -> Run:
    command = [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec,
               "--json", str(json_path), *extra]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=WAIT_LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\n[test] killed after {WAIT_LIMIT:.0f} s"
    seconds = time.monotonic() - start
    try:
        report = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    return Run(spec, proc.returncode, seconds, stdout, stderr, report)


def _verify_pair(pair: Sequence[str], tmp_path: Path, extra: Sequence[str] = ()) -> list[Run]:
    """Both verifies of *pair* at once; returns when both have finished."""
    with ThreadPoolExecutor(max_workers=len(pair)) as pool:
        futures = [
            pool.submit(_verify, spec, tmp_path / f"report-{i}.json", extra)
            for i, spec in enumerate(pair)
        ]
        runs = [f.result() for f in futures]
    for run in runs:
        print(f"{run.spec}: exit {run.returncode} in {run.seconds:.1f} s")
    return runs


PAIRS = [CORRECT[i : i + 2] for i in range(0, len(CORRECT), 2)]
PAIR_IDS = ["+".join(spec.split(":")[0].rsplit(".", 1)[-1] for spec in pair) for pair in PAIRS]
QUICK_PAIRS = [
    ("tests.quality.correct.split_pkg:make", "tests.quality.correct.queue_fifo:make"),
    ("tests.quality.correct.executor_save:make", "tests.quality.correct.shared_state:make"),
]
"""The default tier's sample: the layouts substitution used to miss, and the pipeline shape."""


@pytest.mark.timeout(2 * WAIT_LIMIT)
@pytest.mark.parametrize(
    "pair",
    [
        pytest.param(QUICK_PAIRS[0], id="split+queue"),
        # -m slow: CI stays under 15 minutes (the slow tier runs every pair under ci too)
        pytest.param(QUICK_PAIRS[1], id="executor+shared", marks=pytest.mark.slow),
    ],
)
def test_correct_adapters_pass_verify_quick(pair: Sequence[str], tmp_path: Path) -> None:
    """The default tier: two shapes under the quick profile, two verifies at once (the
    other pair under -m slow)."""
    runs = _verify_pair(pair, tmp_path, ["--profile", "quick", "--max-seconds", "240"])
    failed = [run for run in runs if run.returncode != 0]
    assert not failed, "false alarm(s) on correct adapters:\n" + "\n".join(
        run.transcript() for run in failed
    )


@pytest.mark.slow
@pytest.mark.timeout(2 * WAIT_LIMIT)
@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_correct_adapters_pass_verify_ci(pair: Sequence[str], tmp_path: Path) -> None:
    """Every correct adapter under the ci profile, two verifies at once (tox -e stress; the
    10-run measurement is benchmarks/false_alarms.py)."""
    runs = _verify_pair(pair, tmp_path)
    failed = [run for run in runs if run.returncode != 0]
    assert not failed, "false alarm(s) on correct adapters:\n" + "\n".join(
        run.transcript() for run in failed
    )


@pytest.mark.slow
@pytest.mark.timeout(2 * WAIT_LIMIT)
@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_correct_adapters_never_violate_on_a_short_budget(
    pair: Sequence[str], tmp_path: Path
) -> None:
    """A small budget may leave checks undecided (exit 3), never report a violation (exit 1)."""
    runs = _verify_pair(pair, tmp_path, ["--max-seconds", "20"])
    bad = [run for run in runs if run.returncode not in (0, 3)]
    assert not bad, "correct adapter(s) not given 0 or 3 on --max-seconds 20:\n" + "\n".join(
        run.transcript() for run in bad
    )


def test_every_correct_adapter_is_catalogued() -> None:
    on_disk = set()
    for path in CORRECT_DIR.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            on_disk.add(path.name)
        elif path.suffix == ".py" and path.stem not in ("catalogue", "__init__"):
            on_disk.add(path.stem)
    catalogued = [spec.split(":")[0].removeprefix("tests.quality.correct.") for spec in CORRECT]
    assert len(catalogued) == len(set(catalogued)), f"an adapter is listed twice: {catalogued}"
    tops = {name.split(".")[0] for name in catalogued}  # a package may hold several designs
    assert on_disk == tops, (
        f"not in CORRECT: {sorted(on_disk - tops)}; "
        f"in CORRECT but not on disk: {sorted(tops - on_disk)}"
    )


@pytest.mark.parametrize("spec", CORRECT)
def test_every_catalogued_factory_loads(spec: str) -> None:
    from chunk_adapter.factory import load_factory

    assert callable(load_factory(spec))
