"""Time and peak memory of one put+get of a large payload, per serializer and connector.

    python benchmarks/serializer_payloads.py [--runs 5] [--mb 100] [--payload float32]

Each measurement runs in a fresh interpreter: it makes the payload (``float32``:
a numpy float32 array of ``--mb`` MB; ``bytes``: a bytes object of that size),
resets the peak-RSS mark (``/proc/self/clear_refs``), then times
``put({"data": payload, "finished": False})`` and the ``get`` that reads it back
through a real connector, and reads the peak RSS (``VmHWM``; it includes the
shared-memory pages the process touched). Memory is that peak minus the RSS just
before the put, in multiples of the payload. Serializers alternate within each
run, so machine load falls on all alike; the table gives medians and the ratio to
pickle measured in the same run. Linux only (``/proc``); Redis rows need
redis-server (a private one is started on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from chunk_adapter.connectors.redis_server import RedisServer, redis_unavailable  # noqa: E402

CHILD = r"""
import gc, json, os, sys, time
import numpy as np
from chunk_adapter.connectors import PICKLE, SAFE, SAFE_JSON, RedisConnector, SharedMemoryConnector

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)

connector, name, kind, mb, url = sys.argv[1:6]
serializer = {"pickle": PICKLE, "safe-msgpack": SAFE, "safe-json": SAFE_JSON}[name]
size = int(float(mb) * 1_000_000)
if kind == "float32":
    payload = np.random.default_rng(0).random(size // 4, dtype=np.float32)
else:
    payload = np.random.default_rng(0).bytes(size)
if connector == "shm":
    conn = SharedMemoryConnector("bench" + os.urandom(4).hex(), serializer=serializer)
else:
    conn = RedisConnector(url=url, prefix="bench" + os.urandom(4).hex(), serializer=serializer)
conn.put("warm", {"data": 1, "finished": False})  # connect, take the lease
assert conn.get("warm") is not None
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak-RSS mark to the current RSS
before = status("VmRSS")
start = time.perf_counter()
conn.put("k", {"data": payload, "finished": False})
got = conn.get("k")
seconds = time.perf_counter() - start
peak = status("VmHWM")
data = got["data"]
if kind == "float32":
    assert type(data) is np.ndarray and np.array_equal(data, payload)
else:
    assert data == payload
conn.close()
print(json.dumps({"seconds": seconds, "memory": (peak - before) / size}))
"""


def measure(connector: str, serializer: str, kind: str, mb: float, url: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, connector, serializer, kind, str(mb), url],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{connector}/{serializer} failed:\n{proc.stderr}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--payload", choices=["float32", "bytes"], default="float32")
    parser.add_argument("--serializers", default="pickle,safe-msgpack")
    parser.add_argument("--connectors", default="shm,redis")
    args = parser.parse_args()
    serializers = args.serializers.split(",")
    connectors = args.connectors.split(",")
    server = None
    if "redis" in connectors:
        reason = redis_unavailable()
        if reason is not None:
            raise SystemExit(f"redis rows need redis-server: {reason}")
        server = RedisServer().start()
    try:
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for run in range(args.runs):
            for connector in connectors:
                for name in serializers:
                    url = server.url if server is not None else ""
                    got = measure(connector, name, args.payload, args.mb, url)
                    results.setdefault((connector, name), []).append(got)
                    print(f"run {run + 1} {connector:5} {name:12} {got}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    print(f"{args.mb:g} MB {args.payload}, put+get, medians of {args.runs} runs")
    print("| connector | serializer | time (s) | vs pickle | peak memory (x payload) | vs pickle |")
    print("| --- | --- | --- | --- | --- | --- |")
    for connector in connectors:
        base = results.get((connector, "pickle"))
        for name in serializers:
            rows = results[(connector, name)]
            secs = statistics.median(r["seconds"] for r in rows)
            mem = statistics.median(r["memory"] for r in rows)
            if base is None:
                vs_t = vs_m = "-"
            else:
                vs_t = f"{secs / statistics.median(r['seconds'] for r in base):.2f}x"
                vs_m = f"{mem / statistics.median(r['memory'] for r in base):.2f}x"
            print(f"| {connector} | {name} | {secs:.3f} | {vs_t} | {mem:.2f} | {vs_m} |")


if __name__ == "__main__":
    main()
