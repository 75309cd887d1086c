"""The verify worker's watchdog: a stuck call is a named finding; an overrun is inconclusive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunk_adapter.verify.watchdog import CallWatch, WatchedAdapter
from tests.unit._wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
STAGES = "tests.quality.watchdog_stages"


def run_worker(
    target: str, adapter: str, seconds: float, tmp_path: Path
) -> list[dict[str, object]]:
    out = tmp_path / "events.jsonl"
    subprocess.run(
        [sys.executable, "-m", "chunk_adapter.verify.worker", "stress", "--adapter", adapter,
         "--profile", "ci", "--seed", "0", "--seconds", str(seconds), "--replay-prefix",
         "chunk-adapter verify", "--out", str(out), "--target", f"{STAGES}:{target}"],
        cwd=ROOT, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_stage_that_overruns_with_nothing_stuck_is_inconclusive(tmp_path: Path) -> None:
    events = run_worker("slow_but_nothing_stuck", "chunk_adapter.adapter:ChunkAdapter", 2, tmp_path)
    results = [e for e in events if e["event"] == "result"]
    assert [r["verdict"] for r in results] == ["inconclusive"], results
    assert "not a violation" in str(results[0]["evidence"])
    assert events[-1]["event"] == "done"


@pytest.mark.rule("R3")
def test_a_call_stuck_past_its_bound_is_a_finding_naming_the_call(tmp_path: Path) -> None:
    start = time.monotonic()
    events = run_worker("save_async_stuck", f"{STAGES}:blocks_in_save", 60, tmp_path)
    results = [e for e in events if e["event"] == "result"]
    assert len(results) == 1, results
    assert results[0]["verdict"] == "fail" and results[0]["rules"] == ["R3"], results
    assert "save_async('r', 1, False) did not return within" in str(results[0]["evidence"])
    assert time.monotonic() - start < 55, "the finding waited for the stage deadline"


PARENT = """
import subprocess, sys
worker = subprocess.Popen([sys.executable, "-m", "chunk_adapter.verify.worker", *sys.argv[1:]])
print(worker.pid, flush=True)
sys.stdin.read()  # until the test kills this process
"""


def _gone(pid: int) -> bool:
    """Whether process *pid* has ended (a zombie no one reaps counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to see the orphan")
def test_a_worker_ends_when_the_verify_that_started_it_is_killed(tmp_path: Path) -> None:
    """A cancelled CI job kills verify; its stage worker must not run on for its budget."""
    out = tmp_path / "events.jsonl"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, "stress", "--adapter", "chunk_adapter.adapter:ChunkAdapter",
         "--profile", "ci", "--seed", "0", "--seconds", "120", "--replay-prefix",
         "chunk-adapter verify", "--out", str(out), "--target", f"{STAGES}:slow_but_nothing_stuck"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        wait_until(lambda: out.exists() and '"check"' in out.read_text(), 30.0, "the stage started")
        parent.kill()
        parent.wait(10)
        wait_until(lambda: _gone(worker), 10.0, "the orphaned worker ended")
    finally:
        if not _gone(worker):
            os.kill(worker, signal.SIGKILL)


def test_a_watched_adapter_forwards_everything_and_forgets_finished_calls() -> None:
    watch = CallWatch({"save_async": (0.0, "R3")})
    calls: list[str] = []

    class Plain:
        flag = "kept"

        def save_async(self, request_id: str, obj: object, is_final: bool) -> None:
            calls.append(request_id)
            assert watch.stuck(), "the call is not registered while it runs"

    adapter = WatchedAdapter(Plain(), watch)
    adapter.save_async("x", 1, True)
    assert calls == ["x"]
    assert adapter.flag == "kept"
    assert watch.stuck() == []
