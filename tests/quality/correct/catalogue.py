"""The catalogue of CORRECT ChunkAdapters, one spec string each.

Every adapter here keeps the contract (docs/contract.md);
each is written from the spec in a different shape, the way an outside team
would write one. ``chunk-adapter verify`` must pass every one of them: a
non-zero exit on any is a false alarm of the suite. The one list, used by
tests/quality/test_correct_catalogue.py and benchmarks/false_alarms.py.
"""

from __future__ import annotations

CORRECT: tuple[str, ...] = (
    "tests.quality.correct.split_pkg:make",
    "tests.quality.correct.options_factory:make",
    "tests.quality.correct.queue_fifo:make",
    "tests.quality.correct.executor_save:make",
    "tests.quality.correct.rlock_perf:make",
    "tests.quality.correct.base_sub:make",
    "tests.quality.correct.two_conditions:make",
    "tests.quality.correct.dataclass_state:make",
    "tests.quality.correct.thread_subclass:make",
    "tests.quality.correct.shared_state:make",
    "tests.quality.correct.forwarding_pkg:StreamBridge.create",
    # written by a separate author from the contract alone (the hold-out set of
    # docs/quality.md): a priority queue, per-request objects, a heap of due polls
    "tests.quality.correct.pq_sequenced:make",
    "tests.quality.correct.request_objects:make",
    "tests.quality.correct.due_heap:make",
    "tests.quality.correct.asyncio_loop:make",
    "tests.quality.correct.asyncio_sides:make",
    # a third hold-out set's designs (docs/quality.md): several SAVE workers, requests
    # pinned by hash; a chained job per request on a pool; a follower task per registration
    "tests.quality.correct.pinned_pool:make",
    "tests.quality.correct.chain_pool:make",
    "tests.quality.correct.aio_followers:make",
    # a fourth hold-out set's designs: copy-on-write state swapped under a lock; a batching
    # sender with a scanning receiver woken through a pipe its select() watches; a ring
    # buffer FIFO with a receiver fed registrations as commands
    "tests.quality.correct.cow_state:make",
    "tests.quality.correct.batch_scan:make",
    "tests.quality.correct.ring_actor:make",
    # a fifth hold-out set's designs: event-sourced (the scheduler only journals commands,
    # the workers fold them); per-request actors on two SAVE workers; two RECV workers,
    # each owning a lane of registrations
    "tests.quality.correct.fifth_pkg.journal:make",
    "tests.quality.correct.fifth_pkg.actor_pool:make",
    "tests.quality.correct.fifth_pkg.rx_pool:make",
    # a sixth hold-out set's designs: the scheduler's calls posted to owner threads through
    # SimpleQueues; state on striped locks; every receive round on its own threading.Timer
    "tests.quality.correct.sixth_pkg.mailbox:make",
    "tests.quality.correct.sixth_pkg.striped:make",
    "tests.quality.correct.sixth_pkg.timer_rounds:make",
    # a seventh hold-out set's designs: no locks (GIL-atomic hand-offs); versioned
    # optimistic reads; receive rounds on snapshots checked against a cleanup epoch
    "tests.quality.correct.seventh_pkg.lockfree:make",
    "tests.quality.correct.seventh_pkg.seqlock:make",
    "tests.quality.correct.seventh_pkg.epochs:make",
    # an eighth hold-out set's designs, each on an asyncio loop in a background thread:
    # every call bridged into one loop; a task per stream; a task per chunk, chained
    "tests.quality.correct.eighth_pkg.aio_bridge:make",
    "tests.quality.correct.eighth_pkg.aio_lanes:make",
    "tests.quality.correct.eighth_pkg.aio_chain:make",
)
