"""The ``simulate`` stage alone (``verify --stage simulate``) finds broken adapters.

Generated worlds, with no check written for any of these adapters, must exit 1
naming a rule of the bug (or the liveness rule its loss shows first as). The
list is what the stage finds under ``ci`` (derandomized: the same worlds every
run); the adapters it misses are listed in docs/quality.md with the stage that
finds them. Each runs one whole ``ci`` simulate stage in a subprocess: -m slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quality.test_verify_catalogue import BUDGET, CATALOGUE
from tests.quality.unnamed import UNNAMED

ROOT = Path(__file__).resolve().parents[2]
LIVENESS = {"R11", "R23"}
"""A lost chunk or final shows first as never put or never received."""

SEEDS = (0, 1, 2)
"""The samples tried, in order, until one finds the bug: a bug only a few of a sample's 600
worlds reach is found in some samples and missed in others (``two_step_commit``: missed at
seed 0 since the twenty-eighth session, found at 1 and 2; docs/quality.md), so one sample
is a lottery, three are a measure. A find with a wrong rule fails at once."""

FOUND = [
    "broken_deep:container_snapshot",
    "broken_deep:reuse_drops_queued",
    "broken_deep:shallow_snapshot",
    "broken_explore:LostWakeup",
    "broken_explore:SplitPoll",
    "broken_explore:NoTokenCheck",
    "broken_explore:TwoSaveThreads",
    "broken_explore:WaitNotInLoop",
    "broken_stall:backoff_recv",
    "broken_stall:global_build_lock",
    "broken_stall:fixed_period_recv",
    "broken_stateful:cleanup_keeps_ready",
    "broken_stateful:final_dropped_on_cancel",
    "broken_stateful:final_lost_on_build_failure",
    "broken_stateful:missing_token_check",
    "broken_stateful:get_past_final",
    "broken_stateful:id_bumped_before_put",
    "broken_stateful:load_not_idempotent",
    "broken_stateful:missing_snapshot",
    "broken_stateful:none_payload_uses_id",
    "broken_stateful:poll_no_swap",
    "broken_stress:builds_in_save_async",
    "broken_stress:busy_spinning_recv",
    "broken_stress:final_not_retried",
    "broken_stress:head_of_line_recv",
    "broken_stress:puts_after_stop",
    "broken_stress:save_dies_on_put_error",
    "broken_stress:stop_joins_each_thread",
    "broken_stress:stop_joins_forever",
    "broken_stress:stop_without_notify",
    "broken_two_bugs:snapshot_and_swap",
    "broken_verify:deadlocks_in_save",
    "broken_verify:hangs_in_stop",
    "plain_threading_adapter:PlainChunkAdapter",
    "broken_asyncio:threadsafe_order",
    "broken_leaks:send_state_kept",
    "broken_leaks:leak_after_cleanup",
]
"""The catalogue's adapters the stage alone finds with a rule of the bug under ``ci`` in
one of the samples of :data:`SEEDS` (listed from the twenty-first session's measurement at
seed 0: the worlds' calls with a wrong argument moved the sample, docs/quality.md). Missed
there: ``stale_round_get``, ``put_state_on_loop`` (found by other stages) and
``await_between_check_and_commit`` (found by this stage at seed 1, not listed: the list
keeps what seed 0 found then)."""


FOUND_UNNAMED = [
    "config_factory",
    "queue_worker",
    "evented",
    "patient",
    "timed_build",
    "burst",
    "lazy_cancel",
    "two_step_commit",
    "records",
    "retiring",
    "keyed_inbox",
]
"""The unnamed adapters (tests/quality/unnamed, written to measure the suite blind) the
stage finds under ``ci`` with a rule of the bug in one of the samples of :data:`SEEDS`
(``two_step_commit``: at seeds 1 and 2, not 0, since the twenty-eighth session): eleven
of twelve at seed 0 in the twenty-first session's measurement (``batched`` is found
too, but reads R5, the chunk its misapplied cancel dropped; the long-haul worlds added
``retiring`` and ``keyed_inbox``, which were read before those worlds were designed, so
they no longer measure blind). A bug a few of 600 worlds reach is found in some samples
and missed in others (docs/quality.md)."""


@pytest.mark.slow
@pytest.mark.timeout(len(SEEDS) * (BUDGET + 60) + 60)
@pytest.mark.parametrize("name", FOUND)
def test_generated_worlds_alone_find_the_broken_adapter(name: str, tmp_path: Path) -> None:
    _finds(f"tests.quality.{name}", CATALOGUE[name], tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(len(SEEDS) * (BUDGET + 60) + 60)
@pytest.mark.parametrize("name", FOUND_UNNAMED)
def test_generated_worlds_alone_find_the_unnamed_adapter(name: str, tmp_path: Path) -> None:
    spec = f"tests.quality.unnamed.{name}:make"
    _finds(spec, UNNAMED[spec], tmp_path)


def _finds(spec: str, rules: set[str], tmp_path: Path) -> None:
    outputs = []
    for seed in SEEDS:
        report = tmp_path / f"report-{seed}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec,
             "--stage", "simulate", "--seed", str(seed), "--json", str(report)],
            cwd=ROOT, capture_output=True, text=True, timeout=BUDGET + 60, check=False,
        )  # fmt: skip
        if proc.returncode != 1:
            assert proc.returncode == 0, f"seed {seed}: exit {proc.returncode}:\n{proc.stdout}"
            outputs.append(f"seed {seed}: exit 0")
            continue
        [check] = [c for c in json.loads(report.read_text())["checks"] if c["stage"] == "simulate"]
        assert check["verdict"] == "fail" and check["confirmation"].startswith("replayed once")
        assert set(check["rules"]) & (rules | LIVENESS), (seed, check["rules"], proc.stdout)
        assert "chunk-adapter replay 'sim:" in proc.stdout
        return
    pytest.fail(f"{spec} not found in the samples of seeds {SEEDS}: {outputs}")
