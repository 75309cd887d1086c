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

A third of them are *wide* instead (:func:`wide_world`): many requests rather than
long ones — 12 to 100 in a world, 5 to 100 open at once, their ids now and then reused
once the previous stream under that id is over, some with a receiver only (waiting for
a stream that never comes, as a pipeline's receivers do for a request aborted upstream)
or a sender only. What only shows past a *count* of requests — a table of open streams
or registrations bounded at a few entries, a receiver that serves only the first few
registrations, a batch of requests cut at a size — is met there.

The ``simulate`` stage runs a few of them after its main sample
(:data:`~chunk_adapter.explore.engine.simulate.LONG_HAUL_SHARE`), so the main sample
is the one it always was.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import strategies as st

from .scenario import Op, Scenario, cancel, cleanup, load, outage, pause, poll, save, settle
from .worlds import LIVENESS, OPTIONS, PREEMPT, usage

__all__ = ["LATE", "LENGTHS", "OUTAGES", "WIDTHS", "long_world", "long_worlds", "wide_world"]

LENGTHS: tuple[int, ...] = (11, 25, 120)
"""Chunks a stream has before its final (ids cross 10, and 100)."""
OUTAGES: tuple[float, ...] = (0.5, 2.0, 5.0)
"""Virtual seconds a long outage lasts (the worlds' polling pace is 1 ms, 5 ms coarse)."""
LATE: tuple[float, ...] = (0.05, 0.5)
"""Virtual seconds the scheduler waits before a late registration (every chunk saved
before it is put by then: a backlog the receiver meets at once)."""
POLL_EVERY: tuple[int, ...] = (0, 7, 30)
"""A poll after every so many saves (0: only the one at the end)."""
WIDTHS: tuple[int, ...] = (12, 40, 100)
"""Requests in a wide world (:func:`wide_world`)."""
AT_ONCE: tuple[int, ...] = (5, 20, 100)
"""Requests a wide world has open at once, at most."""


def _stream(rng: random.Random, rid: str, key_stage: int) -> list[Op]:
    """One request: its long stream, its registration (before it, at a drawn chunk, or
    in one stream of four late: after a pause, at a chunk in its second half, so half
    the stream or more is put and waiting when it registers),
    and in two worlds of three a long outage of gets or puts that begins while the
    stream is being sent and received (on every key, or on the key of the chunk saved
    next, which the receiver then waits for)."""
    chunks = rng.choice(LENGTHS)
    every = rng.choice(POLL_EVERY)
    late = rng.randrange(4) == 0  # registered late: half the stream or more put by then
    load_at = (
        rng.randrange(chunks // 2, chunks) if late else rng.choice((0, 0, rng.randrange(chunks)))
    )
    out_at = rng.randrange(load_at, chunks) if rng.randrange(3) else -1
    ops: list[Op] = []
    for n in range(chunks):
        if n == load_at:
            if late:  # the next stage starts late: the chunks so far are all put by then
                ops.append(pause(rng.choice(LATE)))
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
    late = any(a.kind == "pause" and b.kind == "load" for a, b in itertools.pairwise(ops))
    # a backlog met by a late registration drains over time only where gets take time
    return _world("long world", rng, ops, loopback, stage, min_latency=0.001 if late else 0.0)


def _request(rng: random.Random, rid: str, n: int) -> list[Op]:
    """What the scheduler does with the *n*-th request of a wide world (id *rid*): in
    most, a short stream and its receiver, merged in any order, the receiver cleaned up
    once the stream is all there or now and then before; one in ten only a receiver
    (no stream comes: it waits until cleaned up, or to the end), one in ten only a
    stream (no one registers, and no one cleans up: the id's next registration may meet
    its chunks); one stream in eight cancelled at a drawn point."""
    shape = rng.randrange(10)
    sender: list[Op] = []
    if shape != 0:
        chunks = rng.randrange(4)
        cancel_at = rng.randrange(chunks + 1) if rng.randrange(8) == 0 else -1
        for c in range(chunks + 1):
            if c == cancel_at:
                sender.append(cancel(rid))
            if c < chunks:
                sender.append(save(rid, [rid, n, c]))
        sender.append(save(rid, [rid, n, "end"], True))
    receiver: list[Op] = []
    if shape != 1:
        receiver.append(load(rid))
        if rng.randrange(4) == 0 or (shape == 0 and rng.randrange(2)):  # at a drawn point
            receiver.append(cleanup(rid))
    ops: list[Op] = []
    while sender or receiver:
        side = sender if rng.randrange(len(sender) + len(receiver)) < len(sender) else receiver
        ops.append(side.pop(0))
    if shape > 1 and not any(op.kind == "cleanup" for op in ops):
        ops.append(cleanup(rid))  # the stream consumed: the id may be reused
    return ops


def wide_world(seed: int) -> Scenario:
    """The wide world (module doc) that *seed* draws, named ``"wide world"``: many
    requests, a bounded number open at once, each opened when one closes; an id is
    reused only by a request opened after the last one under it was done."""
    rng = random.Random(seed)
    loopback = rng.random() < 0.5
    stage = rng.randrange(7)
    width, at_once = rng.choice(WIDTHS), rng.choice(AT_ONCE)
    # ids: one each, or reused in turn from a pool of a half, a quarter, or two (an id
    # then carries 6 to 50 streams one after another)
    pool = rng.choice((width, width, width // 2, width // 4, 2))
    queued = [(f"w{n % pool}", n) for n in range(width)]  # the ids in turn
    poll_every = rng.choice((2, 5, 0))  # one op in so many, or only the big poll at the end
    open_: dict[str, list[Op]] = {}
    ops: list[Op] = []
    while queued or open_:
        while queued and len(open_) < at_once:
            ready = next((i for i, (rid, _) in enumerate(queued) if rid not in open_), None)
            if ready is None:
                break
            rid, n = queued.pop(ready)
            open_[rid] = _request(rng, rid, n)
        rid = rng.choice(sorted(open_))
        ops.append(open_[rid].pop(0))
        if not open_[rid]:
            del open_[rid]
        if poll_every and rng.randrange(poll_every) == 0:
            ops.append(poll())
        elif rng.randrange(40) == 0:
            ops.append(settle())
        elif rng.randrange(15) == 0:  # requests come over time, not all at once
            ops.append(pause(rng.choice((0.001, 0.01, 0.05))))
    ops.append(settle())
    # No preemption at section gaps here: a receiver goes round dozens of registrations,
    # and a preemption at each of its gaps would add up past R17's bound (a chunk due is
    # fetched within 0.25 s) on any adapter; a wide world is about counts, not windows.
    return _world("wide world", rng, ops, loopback, stage, preempt=0.0)


def _world(
    name: str,
    rng: random.Random,
    ops: list[Op],
    loopback: bool,
    stage: int,
    preempt: float = PREEMPT,
    min_latency: float = 0.0,
) -> Scenario:
    """The scenario around the scheduler's *ops*, its settings drawn from *rng* (its
    calls' latency at least *min_latency*)."""
    options = {opt: rng.choice(values) for opt, values in OPTIONS.items() if rng.random() < 0.5}
    longest = max((op.seconds for op in ops if op.kind == "outage"), default=0.0)
    return Scenario(
        name,
        tuple(usage(ops)),
        options=options,
        consume_on_get=rng.random() < 0.5,
        notify=rng.random() < 0.5,
        topology="loopback" if loopback else "pipeline",
        stage_id=stage,
        stage_ids=(stage,) if loopback else (stage, stage + 1),
        latency=max(min_latency, rng.choice((0.0, 0.001))),  # drawn either way
        settle_limit=20.0 + longest,
        liveness=LIVENESS + longest,
        preempt=preempt,
        timing_seed=rng.randrange(2**16),
    )


def long_worlds() -> st.SearchStrategy[Scenario]:
    """Long-haul worlds, each drawn whole from one seed: the worlds of a derandomized run
    are as many different ones (Hypothesis's mutations of a structured draw make most of
    thirty near copies). A failing one is not shrunk by Hypothesis (a smaller seed is
    another world) but op by op, by the stage's reduction pass."""
    return st.integers(0, 2**32 - 1).map(_haul)


def _haul(seed: int) -> Scenario:
    """A wide world for one seed in three, a long one for the others."""
    return wide_world(seed) if seed % 3 == 2 else long_world(seed)
