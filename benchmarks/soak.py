"""Issue 27's soak: real traffic with random faults on every connector; nothing lost,
nothing mixed, nothing leaked.

    python benchmarks/soak.py --seconds 600 --seed 0

The seconds are split evenly across the connectors (memory, shm, redis; ``--connector``
picks some; redis without a redis-server exits 2 naming the fix). Per connector a
receiver adapter (stage 1, the soak's own process and thread) takes streams from a
sender adapter (stage 0), eight at a time, each a unique request id, while faults hit:

* puts fail at random and in bursts; builds fail where each stream's plan says (a
  non-final is then dropped, R7; a final goes out with data ``None``, R7/R11); gets
  fail at random and in bursts (rates in soak_sender.py and soak_run.py);
* shm and redis: the sender is a process of its own (spawned), killed with SIGKILL at
  random times and started again; redis: the redis-server is killed with SIGKILL and
  started again on its port a few times (every 15-35 s, down 0.1-1.5 s).

The receiver checks every registration (soak_streams.py): its own stream's chunks
only, each once, in order, ending with the final; a chunk may be missing only where
its build failed (a drop after the put tries would be a gap too: the sender is given
200 tries, ~20 s, more than any outage made here, so R10 never drops one). Every
stream the sender reported finished (``flush()`` returned True after its final was
saved) must arrive complete within ``--settle`` seconds (30), except (soak_ledger.py):

* streams the sender had not reported when it was killed: incomplete by kill,
  cleaned up ``settle / 3`` s after the kill;
* streams open (registered, not complete) when a redis-server went down, or ordered
  while it was down or within ``GRACE`` (1 s) of its return: incomplete by restart,
  since their chunks may have gone with the server's memory. They are still checked
  for order, foreign chunks and repeats, only not for completeness;
* on shm a sender's start reclaims what a killed predecessor put and nobody consumed,
  reported streams included (docs/connectors.md, "Crashed writers"), so the next
  sender is started only once the streams its predecessor reported have arrived (or
  ``settle`` passed: they are lost then).

A stream ordered and never reported is lost after ``3 * settle`` s. At the end
("nothing leaked"), once the sender's adapter has stopped and every registration is
cleaned up: each entry left in the store (keys under the prefix, claims excluded;
segments of the namespace) must belong to a stream that did not end verified; the
receiver's and the sender's ``stats()`` depths are 0; the receiving process's RSS is
flat after warm-up by ``chunk_adapter.bench.churn``'s verdict (its store bound applied
to the live store: entries of streams that may end incomplete set apart); both
adapters' threads are alive and no CRITICAL line was logged (R30). Without kills or
restarts (memory) the counters must also agree: every planned build failure raised
once, every chunk put was committed.

Output: one JSON line per sample (churn's fields and the tallies), a JSON summary and
a line to read per connector, then the verdict line; exit 0 when everything held, 1
otherwise, and a failure prints the command that reruns it. Every random choice comes
from ``random.Random`` seeded by ``--seed`` and the connector's name (one connector
alone reruns its own plan); the timing of threads and processes is not seeded, so a
rerun repeats the plan, not the interleaving. ``--sabotage`` spoils one value the
receiver gets, to show the check fails (tests/stress/test_soak.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from soak_ledger import BY_KILL, BY_RESTART, VERIFIED  # this folder is on sys.path
from soak_parts import open_backend
from soak_run import Settings, Soak
from soak_streams import SABOTAGE

import chunk_adapter
from chunk_adapter.bench.run import CONNECTORS
from chunk_adapter.connectors.redis_server import redis_unavailable


def reproduce(name: str, settings: Settings) -> str:
    """The command that runs this connector's soak again, as it ran."""
    extra = f" --sabotage {settings.sabotage}" if settings.sabotage else ""
    return (
        f"python benchmarks/soak.py --connector {name} --seconds {settings.seconds:g} "
        f"--seed {settings.seed} --settle {settings.settle:g}{extra}"
    )


def soak_one(name: str, settings: Settings, out: TextIO) -> dict[str, Any]:
    """Soak one connector; print its summary (a JSON line, then one line to read)."""
    with open_backend(name) as backend:
        summary = Soak(backend, settings, out).run()
    if not summary["held"]:
        summary["reproduce"] = reproduce(name, settings)
    print(json.dumps({"summary": summary}), file=out)
    verdict = "HELD" if summary["held"] else "FAILED: " + "; ".join(summary["failures"])
    print(
        f"soak {name}: {verdict} — {summary['streams_started']} streams, "
        f"{summary[VERIFIED]} verified, {summary[BY_KILL]} incomplete by kill, "
        f"{summary[BY_RESTART]} by restart, {summary['kills']} kills, "
        f"{summary['redis_restarts']} redis restarts; {summary['rss']}",
        file=out,
    )
    out.flush()
    return summary


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--seconds",
        type=float,
        default=600.0,
        help="in all, split evenly across the connectors (600)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds every random choice (0)")
    parser.add_argument(
        "--connector", action="append", choices=CONNECTORS, help="repeatable; all three by default"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=30.0,
        help="seconds a stream reported finished may take to arrive (30)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between samples (a twentieth of the run, 1-10)",
    )
    parser.add_argument(
        "--sabotage",
        choices=sorted(SABOTAGE),
        help="self-test: spoil one value received; the verdict must fail",
    )
    args = parser.parse_args(argv)  # fmt: skip
    for option in ("seconds", "settle", "interval"):
        value = getattr(args, option)
        if value is not None and not 0 < value < float("inf"):
            parser.error(f"--{option} is a number of seconds > 0, got {value!r}")
    return args


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = parse(argv)
    names = args.connector or list(CONNECTORS)
    why = redis_unavailable() if "redis" in names else None
    if why is not None:
        print(f"soak: cannot soak redis: {why} (or leave it out: --connector)", file=sys.stderr)
        return 2
    each = args.seconds / len(names)
    interval = args.interval or max(1.0, min(10.0, each / 20))
    settings = Settings(each, args.seed, args.settle, interval, args.sabotage)
    head = {"seed": args.seed, "seconds": args.seconds, "connectors": names, "each": each}
    print(json.dumps({"soak": head, "code": os.path.dirname(chunk_adapter.__file__)}), file=out)
    bad = [s for s in (soak_one(name, settings, out) for name in names) if not s["held"]]
    if not bad:
        print(f"soak verdict: HELD — nothing lost, mixed or leaked on {', '.join(names)} "
              f"(seed {args.seed}, {args.seconds:g} s)", file=out)  # fmt: skip
        return 0
    what = "; ".join(f"{s['connector']}: {', '.join(s['failures'])}" for s in bad)
    print(f"soak verdict: FAILED — {what} (seed {args.seed})", file=out)
    for s in bad:
        print(f"reproduce: {s['reproduce']}", file=out)
    return 1


if __name__ == "__main__":
    sys.exit(main())
