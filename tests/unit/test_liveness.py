"""R23 — liveness under seeded random faults, with R9/R11/R14 checked on the way.

Every random choice comes from the seed in the test id. A failure prints the
command that reruns it.
"""

from __future__ import annotations

import pytest

from chunk_adapter.connectors import FaultyConnector, MemoryConnector, RecordingConnector
from tests.unit._rig import Rig, ok_puts

REQUESTS = 6
CHUNKS = 15


@pytest.mark.rule("R23", "R9", "R11", "R14")
@pytest.mark.parametrize("seed", [11, 22, 33])
@pytest.mark.parametrize("consume", [False, True], ids=["keep", "consume"])
def test_every_final_arrives_under_random_faults(rig: Rig, seed: int, consume: bool) -> None:
    mem = MemoryConnector(consume_on_get=consume)
    faulty = FaultyConnector(mem, put_rate=0.3, get_rate=0.3, seed=seed)
    rec = RecordingConnector(faulty)
    snd, rcv, inbox = rig.receiving(rec, put_backoff=0.0005, put_backoff_max=0.002)
    rids = [f"s{seed}r{i}" for i in range(REQUESTS)]
    for rid in rids:
        rcv.load_async(rid)
    for i in range(CHUNKS):
        for rid in rids:
            snd.save_async(rid, i, i == CHUNKS - 1)
    inbox.wait_final(*rids, timeout=20.0)
    failed_puts = faulty.injected["put"]
    for rid in rids:
        put = ok_puts(rec, f"{rid}_")
        keys = [op.key for op in put]
        assert keys == [f"{rid}_0_{n}" for n in range(len(put))], f"R9: {keys}; {rig.repro}"
        values = [op.value for op in put]
        assert values[-1] == {"data": CHUNKS - 1, "finished": True}, f"R11: {values}"
        assert sum(v["finished"] for v in values) == 1, f"R11: {values}"
        assert inbox.of(rid) == values, f"R14/R23: received != put for {rid}; {rig.repro}"
        data = [v["data"] for v in values]
        assert data == sorted(set(data)), f"R5: out of order or repeated: {data}"
        missing = CHUNKS - len(data)
        # A chunk is only dropped after 3 failed tries (R10): never without failures.
        assert failed_puts >= 3 * missing, f"{missing} chunks of {rid} lost; {rig.repro}"
