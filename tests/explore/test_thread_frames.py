"""The explorer's look at every thread's frame cannot deadlock the process.

``sys._current_frames()`` holds CPython's thread-list lock while it builds its
dict (before 3.11.9 and 3.12.3: gh-106883); a garbage collection that one of
its allocations starts, freeing a ``threading.local`` caught in a reference
cycle, takes that lock again and the process hangs in C for good. A verify
worker hung so between two executions of the ``simulate`` stage (found on
``broken_deep:reuse_drops_queued``, the stage inconclusive after its whole
budget). ``execution.thread_frames`` holds the collector off while it looks.

The child below sets that trap on purpose: cyclic garbage holding
``threading.local`` objects waits in generation 1, and the thresholds make the
first frame object ``sys._current_frames()`` allocates start a collection of
it. With the plain call it hangs on the affected versions (this test then fails
by its timeout); with ``thread_frames`` it returns.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import gc, threading
    from chunk_adapter.explore.runtime.real import thread_frames

    class Holder:
        pass

    parked = threading.Lock()
    parked.acquire()
    for _ in range(4):  # threads whose frames the look must build (allocations)
        threading.Thread(target=parked.acquire, daemon=True).start()
    gc.collect()
    gc.disable()
    keep = []
    for _ in range(10):
        holder = Holder()
        holder.local = threading.local()
        holder.local.back = holder  # a cycle through the local's own dict
        keep.append(holder)
    gc.collect(0)  # the cycles survive into generation 1
    del keep, holder  # ... and are garbage there now
    gc.set_threshold(2, 0, 1000)  # the next automatic collection takes generation 1
    gc.collect(0)
    gc.enable()
    frames = thread_frames()
    print("returned", len(frames) >= 5)
    """
)


def test_looking_at_every_threads_frame_survives_a_collection_of_thread_locals() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "returned True", proc.stdout + proc.stderr
