"""R17 — pacing: no busy loop, no head-of-line blocking, next round at once after progress.

Rates are measured over a fixed observation window (a measurement, not a
synchronisation). Bounds are 5x or more away from the expected values.
"""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from chunk_adapter.connectors import MemoryConnector
from tests.unit._rig import GetsPerRequest, Rig, chunk
from tests.unit._wait import Inbox, wait_until

WINDOW = 0.5


def _backoff(rig: Rig) -> float:
    return 0.01 if rig.accepts("idle_backoff") else 0.001


@pytest.mark.rule("R17")
def test_idle_requests_are_polled_at_a_bounded_rate(rig: Rig, mem: MemoryConnector) -> None:
    counting = GetsPerRequest(mem)
    backoff = _backoff(rig)
    rcv = rig.adapter(counting, stage_id=1, idle_backoff=backoff)
    rids = [f"idle{i}" for i in range(10)]
    for rid in rids:
        rcv.load_async(rid)
    wait_until(lambda: all(counting.snapshot()[r] > 0 for r in rids), what="every request polled")
    before = counting.snapshot()
    time.sleep(WINDOW)  # observation window
    after = counting.snapshot()
    rates = {r: (after[r] - before[r]) / WINDOW for r in rids}
    bound = 5.0 / backoff  # expected about 1/backoff per request: one get per round
    assert max(rates.values()) < bound, (
        f"R17: {max(rates.values()):.0f} gets/s per idle request, bound {bound:.0f}/s "
        f"(idle_backoff={backoff}): a busy loop? {rig.repro}"
    )
    assert min(rates.values()) > 0, f"R17: a request was not polled at all: {rates}"


def _cpu(native_ids: set[int | None]) -> float:
    """CPU seconds (user + system) the OS threads *native_ids* of this process have used."""
    return sum(
        t.user_time + t.system_time for t in psutil.Process().threads() if t.id in native_ids
    )


@pytest.mark.rule("R17")
def test_no_gets_and_next_to_no_cpu_without_requests(rig: Rig, mem: MemoryConnector) -> None:
    before_threads = set(threading.enumerate())
    counting = GetsPerRequest(mem)
    rcv = rig.adapter(counting, stage_id=1)
    snd = rig.adapter(mem, stage_id=0)
    # CPU of these adapters' own threads: threads other tests left in this process
    # (daemons winding down) must not count against this pair.
    own = {t.native_id for t in set(threading.enumerate()) - before_threads}
    rcv.load_async("done")
    snd.save_async("done", "x", True)
    inbox = Inbox(rcv)
    inbox.wait_final("done")  # now nothing is registered as polling
    before = sum(counting.snapshot().values())
    cpu0 = _cpu(own)
    time.sleep(WINDOW)  # observation window
    cpu = _cpu(own) - cpu0
    extra = sum(counting.snapshot().values()) - before
    assert extra == 0, f"R17: {extra} gets with nothing to poll; {rig.repro}"
    assert cpu < 0.2 * WINDOW, f"R17: idle adapters used {cpu:.3f}s CPU in {WINDOW}s"


@pytest.mark.rule("R17")
def test_a_request_with_data_does_not_wait_behind_idle_ones(rig: Rig, mem: MemoryConnector) -> None:
    backoff = _backoff(rig)
    rcv = rig.adapter(mem, stage_id=1, idle_backoff=backoff)
    inbox = Inbox(rcv)
    for i in range(50):
        rcv.load_async(f"idle{i}")
    rcv.load_async("busy")
    n = 20
    start = time.monotonic()
    for i in range(n):
        mem.put(f"busy_0_{i}", chunk(i, i == n - 1))
    inbox.wait_final("busy")
    elapsed = time.monotonic() - start
    # One chunk per round at most; a round of 51 gets is far under a millisecond
    # of work, so 20 chunks need about 20 rounds. A request stuck behind the idle
    # ones (or a sleep after every round) would need n * backoff or more.
    assert inbox.data("busy") == list(range(n))
    assert elapsed < 2.0, f"R17: {n} chunks took {elapsed:.2f}s behind 50 idle requests"


@pytest.mark.rule("R17")
def test_after_progress_the_next_round_starts_at_once(rig: Rig, mem: MemoryConnector) -> None:
    """With a 50 ms idle backoff, 100 chunks would take >= 5 s if every round slept."""
    if not rig.accepts("idle_backoff"):
        pytest.skip("the factory takes no idle_backoff option")
    n, backoff = 100, 0.05
    for i in range(n):
        mem.put(f"r_0_{i}", chunk(i, i == n - 1))
    rcv = rig.adapter(mem, stage_id=1, idle_backoff=backoff)
    inbox = Inbox(rcv)
    start = time.monotonic()
    rcv.load_async("r")
    inbox.wait_final("r")
    elapsed = time.monotonic() - start
    assert inbox.data("r") == list(range(n))
    assert elapsed < 0.2 * n * backoff, (
        f"R17: {n} ready chunks took {elapsed:.2f}s with idle_backoff={backoff}: "
        f"a sleep after a round with progress? {rig.repro}"
    )
