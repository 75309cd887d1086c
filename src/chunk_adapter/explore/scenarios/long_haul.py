"""Long-haul worlds: more of one thing than :func:`~.worlds.worlds` draws.

The generated worlds are small on purpose (a few chunks a stream, polls between most
calls, faults of one call or a short outage): small worlds are cheap and shrink well.
What needs *more* — a counter or a buffer that breaks past a size, a give-up after so
many failures in a row, a batch that is only wrong when it is big — they rarely reach.
A long-haul world is one or two requests, each a long stream (11 to 120 chunks, so
chunk ids cross one or two powers of ten), handed out by polls that come rarely or only
once at the end (so one ``poll_ready`` hands out dozens of chunks at once), and now
and then a long outage of gets or puts (0.5 to 5 virtual seconds: hundreds of failed
calls in a row at a 1 ms polling pace) while the request waits, after which everything
must still arrive. Nothing here is aimed at one adapter: each draw is a size or a
duration, and the contract holds at every size.

The ``simulate`` stage runs a few of them after its main sample
(:data:`~chunk_adapter.explore.engine.simulate.LONG_HAUL_SHARE`), so the main sample
is the one it always was.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from .scenario import Op, Scenario, load, outage, pause, poll, save, settle
from .worlds import LIVENESS, OPTIONS, PREEMPT, usage

__all__ = ["LENGTHS", "OUTAGES", "long_world", "long_worlds"]

LENGTHS: tuple[int, ...] = (11, 25, 120)
"""Chunks a stream has before its final (ids cross 10, and 100)."""
OUTAGES: tuple[float, ...] = (0.5, 2.0, 5.0)
"""Virtual seconds a long outage lasts (the worlds' polling pace is 1 ms, 5 ms coarse)."""
POLL_EVERY: tuple[int, ...] = (0, 7, 30)
"""A poll after every so many saves (0: only the one at the end)."""


def _stream(rng: random.Random, rid: str, key_stage: int) -> list[Op]:
    """One request: its long stream, its registration (before it, or at a drawn chunk),
    and in two worlds of three a long outage of gets or puts that begins while the
    stream is being sent and received (on every key, or on the key of the chunk saved
    next, which the receiver then waits for)."""
    chunks = rng.choice(LENGTHS)
    every = rng.choice(POLL_EVERY)
    load_at = rng.choice((0, 0, rng.randrange(chunks)))
    out_at = rng.randrange(load_at, chunks) if rng.randrange(3) else -1
    ops: list[Op] = []
    for n in range(chunks):
        if n == load_at:
            ops.append(load(rid))
        if n == out_at:
            key = None if rng.randrange(3) else f"{rid}_{key_stage}_{n}"
            ops.append(outage(rng.choice(("get", "put")), key, rng.choice(OUTAGES)))
        ops.append(save(rid, [rid, n]))
        if every and (n + 1) % every == 0:
            ops.append(poll())
        if n % 10 == 9 and rng.randrange(4) == 0:  # the model takes a while now and then
            ops.append(pause(0.01))
    ops.append(save(rid, [rid, "end"], True))
    return ops


def long_world(seed: int) -> Scenario:
    """The long-haul world (module doc) that *seed* draws, named ``"long world"``."""
    rng = random.Random(seed)
    loopback = rng.random() < 0.5
    stage = rng.randrange(7)
    rids = ("a",) if rng.random() < 0.5 else ("a", "b")
    lanes = [_stream(rng, rid, stage) for rid in rids]
    ops: list[Op] = []
    while any(lanes):
        lane = rng.choice([i for i, lane in enumerate(lanes) if lane])
        ops.append(lanes[lane].pop(0))
    ops.append(settle())  # then the runner's settle(), poll() and stop(): one big poll
    options = {name: rng.choice(values) for name, values in OPTIONS.items() if rng.random() < 0.5}
    longest = max((op.seconds for op in ops if op.kind == "outage"), default=0.0)
    return Scenario(
        "long world",
        tuple(usage(ops)),
        options=options,
        consume_on_get=rng.random() < 0.5,
        notify=rng.random() < 0.5,
        topology="loopback" if loopback else "pipeline",
        stage_id=stage,
        stage_ids=(stage,) if loopback else (stage, stage + 1),
        latency=rng.choice((0.0, 0.001)),
        settle_limit=20.0 + longest,
        liveness=LIVENESS + longest,
        preempt=PREEMPT,
        timing_seed=rng.randrange(2**16),
    )


def long_worlds() -> st.SearchStrategy[Scenario]:
    """Long-haul worlds, each drawn whole from one seed: the worlds of a derandomized run
    are as many different ones (Hypothesis's mutations of a structured draw make most of
    thirty near copies). A failing one is not shrunk by Hypothesis (a smaller seed is
    another world) but op by op, by the stage's reduction pass."""
    return st.integers(0, 2**32 - 1).map(long_world)
