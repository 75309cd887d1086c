"""The guard in tests/conftest.py fails a test that leaves threads running.

A small suite is run in a subprocess with the project's conftest loaded as a
plugin: a test that leaves a non-daemon thread, and one that leaves more daemon
threads than allowed, error in their teardown naming the threads; a test whose
thread ends passes. The last test releases the threads, so the subprocess exits.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import LEFT_DAEMON_THREADS_ALLOWED

ROOT = Path(__file__).resolve().parents[2]

SUITE = f"""
import threading

RELEASE = threading.Event()


def park(name, daemon):
    threading.Thread(target=RELEASE.wait, args=(120.0,), name=name, daemon=daemon).start()


def test_leaves_a_non_daemon_thread():
    park("parked-non-daemon", daemon=False)


def test_leaves_too_many_daemon_threads():
    for i in range({LEFT_DAEMON_THREADS_ALLOWED + 1}):
        park(f"parked-daemon-{{i}}", daemon=True)


def test_a_thread_that_ends_is_fine():
    thread = threading.Thread(target=lambda: None, name="ends-at-once")
    thread.start()


def test_release():
    RELEASE.set()
"""


def test_the_guard_names_the_threads_a_test_left_running(tmp_path: Path) -> None:
    suite = tmp_path / "test_leaky.py"
    suite.write_text(SUITE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", "-rE", "-o", "addopts=", str(suite)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "4 passed, 2 errors" in out, out  # the errors are in the teardowns
    assert "ERROR" in out and "test_leaves_a_non_daemon_thread" in out, out
    assert "non-daemon ['parked-non-daemon']" in out, out
    assert "parked-daemon-0" in out and f"more than {LEFT_DAEMON_THREADS_ALLOWED} allowed" in out, (
        out
    )
    assert "ends-at-once" not in out, out
