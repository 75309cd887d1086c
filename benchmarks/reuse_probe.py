"""Issue 27 point 3: reused request ids on real connectors, a sender in a process of its own.

    python benchmarks/reuse_probe.py --seconds 60 --seed 0
    python benchmarks/reuse_probe.py --seconds 60 --seed 0 --no-identity   # the bug

A sender process (spawned) sends streams on a small pool of request ids, one after
another per id, each chunk's data naming its stream and its index. The receiver (this
process) registers each id again and again and cleans every registration up at a random
point of its plan: at once (often before the first chunk), after one or two chunks, or
after the final. Every registration must have received chunks of one stream only
(``mixed`` otherwise), in the order they were sent (``order``), of a stream no earlier
registration received any chunk of (``old``: the rest of a stream left unfinished).
Every 5 s it samples the receiving process's RSS, the store (segments, keys) and the
receiver's depths: after the first third of the run (warm-up) RSS must grow by less than
10 % (and 8 MiB), and the store stay within what the ids can hold open (``flat``).
Exit 0 when none of the three was seen on any connector and each was flat, 1 otherwise.
Random choices
come from ``random.Random(seed)`` per process; thread and process timing is not seeded.
``--no-identity`` makes the connectors with ``stream_identity=False`` (the code before
stream identity), to show what the probe catches.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import random
import sys
import time
import uuid
from collections import defaultdict
from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import RedisConnector, SharedMemoryConnector
from chunk_adapter.connectors.redis_server import RedisServer, redis_server_path

PLANS = ("at once", "after 1", "after 2", "after the final")


def connector(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "shm":
        return SharedMemoryConnector(spec["namespace"], stream_identity=spec["identity"])
    return RedisConnector(url=spec["url"], prefix=spec["prefix"], stream_identity=spec["identity"])


def sender(spec: dict[str, Any], ids: int, seed: int, stop: Any, sent: Any) -> None:
    """The sender process: streams of 1-6 chunks on ids ``r0``..``r<ids-1>``."""
    rnd = random.Random(f"{seed}-sender")
    conn = connector(spec)
    snd = ChunkAdapter(conn, stage_id=0)
    streams = 0
    try:
        while not stop.is_set():
            rid = f"r{rnd.randrange(ids)}"
            uid = f"{rid}#{streams}"
            length = rnd.randint(1, 6)
            for i in range(length):
                snd.save_async(rid, {"s": uid, "i": i}, i == length - 1)
            streams += 1
            while snd.stats().save_pending > 4 * ids and not stop.is_set():
                snd.flush(0.05)
            stop.wait(rnd.uniform(0, 0.004))
    finally:
        sent.put({"streams": streams, **snd.stats().__dict__})
        snd.stop()
        conn.close()


class Registration:
    def __init__(self, plan: str, now: float, rnd: random.Random) -> None:
        self.plan = plan
        self.until = now + (rnd.uniform(0, 0.05) if plan == "at once" else 10.0)
        self.got: list[tuple[str, int]] = []
        self.final = False

    def done(self, now: float) -> bool:
        if self.plan == "after 1":
            return len(self.got) >= 1 or now > self.until
        if self.plan == "after 2":
            return len(self.got) >= 2 or self.final or now > self.until
        return self.final or now > self.until


def probe(spec: dict[str, Any], seconds: float, ids: int, seed: int) -> dict[str, Any]:
    rnd = random.Random(f"{seed}-receiver")
    conn = connector(spec)
    rcv = ChunkAdapter(conn, stage_id=1)
    ctx = multiprocessing.get_context("spawn")
    stop, sent = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=sender, args=(spec, ids, seed, stop, sent), daemon=True)
    proc.start()
    tally: dict[str, int] = defaultdict(int)
    # Per id, the highest stream number some registration received a chunk of: an id's
    # streams arrive in the order sent, so a chunk of a stream at or below it is old.
    seen: dict[str, int] = {}
    examples: list[str] = []
    regs: dict[str, Registration] = {}
    process = importlib.import_module("psutil").Process()
    samples: list[dict[str, float]] = []
    start = time.monotonic()
    end, next_sample = start + seconds, start
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                samples.append(_sample(now - start, process, conn, rcv))
                next_sample += SAMPLE_EVERY
            for n in range(ids):
                rid = f"r{n}"
                if rid not in regs:
                    regs[rid] = Registration(rnd.choice(PLANS), now, rnd)
                    rcv.load_async(rid)
            for rid, chunks in rcv.poll_ready().items():
                reg = regs[rid]
                for chunk in chunks:
                    data = chunk["data"]
                    reg.got.append((data["s"], data["i"]))
                    reg.final = reg.final or bool(chunk["finished"])
                    tally["chunks"] += 1
            for rid, reg in list(regs.items()):
                if not reg.done(now):
                    continue
                rcv.cleanup_receiver(rid)
                del regs[rid]
                tally["registrations"] += 1
                tally["completed" if reg.final else "left unfinished"] += 1
                _judge(rid, reg, seen, tally, examples)
            time.sleep(0.0005)
    finally:
        stop.set()
        proc.join(30)
        rcv.stop()
    sender_stats = sent.get(timeout=10) if not sent.empty() else {}
    if proc.exitcode is None:
        proc.kill()
    samples.append(_sample(time.monotonic() - start, process, conn, rcv))
    stored = _stored(conn)
    result = {
        "connector": spec["kind"],
        "identity": spec["identity"],
        **tally,
        "streams sent": sender_stats.get("streams"),
        "leftovers discarded": getattr(conn, "leftovers_discarded", None),
        "sweeps given up": rcv.stats().leftovers_given_up,
        "stored at the end": len(stored),
        **_flat(samples, ids),
        "examples": examples[:5],
    }
    conn.purge()
    conn.close()
    return result


SAMPLE_EVERY = 5.0  # seconds between samples of RSS, store and depths


def _stored(conn: Any) -> list[str]:
    return list(conn.segments() if isinstance(conn, SharedMemoryConnector) else conn.keys())


def _sample(t: float, process: Any, conn: Any, rcv: ChunkAdapter) -> dict[str, float]:
    stats = rcv.stats()
    return {
        "t": round(t, 1),
        "rss_mib": round(process.memory_info().rss / 2**20, 1),
        "store": len(_stored(conn)),
        "draining": stats.draining,
        "registered": stats.registered,
    }


def _flat(samples: list[dict[str, float]], ids: int) -> dict[str, Any]:
    """RSS after warm-up (the first third) and the store's largest size (module doc)."""
    base, last = samples[len(samples) // 3], samples[-1]
    growth = last["rss_mib"] - base["rss_mib"]
    bound = ids * 6 * 3  # per id: a stream being sent, one being left, one being read
    store = max(s["store"] for s in samples)
    return {
        "rss_mib": [base["rss_mib"], last["rss_mib"]],
        "store_max": store,
        "draining_max": max(s["draining"] for s in samples),
        "flat": growth < max(8.0, 0.1 * base["rss_mib"]) and store <= bound,
    }


def _judge(
    rid: str,
    reg: Registration,
    seen: dict[str, int],
    tally: dict[str, int],
    examples: list[str],
) -> None:
    streams = {int(s.split("#")[1]) for s, _ in reg.got}
    indices = [i for _, i in reg.got]
    bad = []
    if len(streams) > 1:
        bad.append("mixed")
    if indices != sorted(set(indices)):
        bad.append("order")
    if streams and min(streams) <= seen.get(rid, -1):
        bad.append("old")
    if streams:
        seen[rid] = max(seen.get(rid, -1), *streams)
    for what in bad:
        tally[what] += 1
    if bad and len(examples) < 5:
        examples.append(f"{rid} ({reg.plan}): {'/'.join(bad)} {reg.got}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="per connector")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ids", type=int, default=8)
    parser.add_argument("--connector", action="append", choices=("shm", "redis"))
    parser.add_argument("--no-identity", action="store_true")
    args = parser.parse_args(argv)
    failed = False
    for kind in args.connector or ["shm", "redis"]:
        spec: dict[str, Any] = {"kind": kind, "identity": not args.no_identity}
        tag = uuid.uuid4().hex[:8]
        if kind == "shm":
            spec["namespace"] = f"reuse{tag}"
            result = probe(spec, args.seconds, args.ids, args.seed)
        else:
            if redis_server_path() is None:
                print("redis: no redis-server (apt-get install redis-server)", file=sys.stderr)
                return 2
            with RedisServer() as server:
                spec.update(url=server.url, prefix=f"reuse{tag}")
                result = probe(spec, args.seconds, args.ids, args.seed)
        print(json.dumps(result))
        failed = failed or any(result.get(k) for k in ("mixed", "order", "old"))
        failed = failed or not result["flat"]
    print(
        f"{'FAILED' if failed else 'ok'}: no mixed, reordered or old stream in any "
        "registration, RSS and store flat"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
