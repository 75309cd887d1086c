"""The stress stage plans its scenarios inside its deadline and confirms a finding by re-runs.

``run_stage`` is driven directly with a :class:`StageContext` whose deadline
is set by the test. A scenario that does not fit is skipped and the stage
reports its coverage as inconclusive; one that reaches the budget while a
slow adapter is still delivering is inconclusive, not a violation; a finding
is re-run with the same seed and is ``fail`` only if a re-run fails too.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.factory import reference_factory
from chunk_adapter.history import History
from chunk_adapter.oracles import accepted
from chunk_adapter.outcome import CheckResult, StageContext
from chunk_adapter.stress import StressReport, scenarios, scheduler
from chunk_adapter.stress.report import ORACLE, ROOT
from chunk_adapter.stress.rig import Pipeline, make_adapter, setting
from chunk_adapter.stress.scheduler import SchedulerLoop
from chunk_adapter.stress.stage import run_stage
from chunk_adapter.stress.suite import STALL
from tests.quality import baseline_bugs
from tests.stateful import pipeline_adapters as pa


def _run(factory: Any, seconds: float) -> tuple[list[CheckResult], float]:
    ctx = StageContext(
        "tests.stateful.pipeline_adapters:shared_state", "ci", 7, seconds,
        "chunk-adapter verify --adapter X", deadline=time.monotonic() + seconds,
    )  # fmt: skip
    start = time.monotonic()
    results = list(run_stage(factory, ctx))
    return results, time.monotonic() - start


class _OddAtFirst:
    """The first sender it builds puts malformed values; every later adapter is correct."""

    def __init__(self) -> None:
        self.first = True
        self._lock = threading.Lock()

    def __call__(self, connector: Any, **kwargs: Any) -> pa.SharedStateAdapter:
        with self._lock:
            bad, self.first = self.first, False
        return pa.odd_wire(connector, **kwargs) if bad else pa.shared_state(connector, **kwargs)


@pytest.mark.rule("R23")
def test_a_slow_correct_adapter_out_of_budget_is_inconclusive_never_failed() -> None:
    """Every get takes 2 ms: correct, but 200 streams take longer than the 6 s given."""
    results, took = _run(pa.slow_gets, 6.0)
    verdicts = {r.verdict for r in results}
    assert "fail" not in verdicts, [r.evidence for r in results if r.verdict == "fail"]
    assert "inconclusive" in verdicts, results
    summary = results[-1]
    assert summary.name == "planned scenarios" and summary.verdict == "inconclusive", summary
    match = re.fullmatch(r"(\d+) of (\d+) scenarios", summary.coverage)
    planned = sum(not run.advisory for _, _, run in scenarios(7))
    assert match and int(match.group(1)) < int(match.group(2)) == planned
    skipped = [r for r in results if r.verdict == "skip"]
    assert skipped and all(r.evidence.startswith("not started:") for r in skipped)
    assert took < 6.0, f"the stage took {took:.1f} s of its 6 s"


def test_a_pipeline_adapter_sharing_state_between_its_sides_passes() -> None:
    results, _ = _run(pa.shared_state, 90.0)
    assert {r.verdict for r in results} == {"pass"}, [
        (r.name, r.verdict, r.evidence) for r in results if r.verdict != "pass"
    ]
    assert len(results) == len(scenarios(7))


@pytest.mark.rule("R2")
def test_a_finding_is_re_run_with_its_seed_and_confirmed() -> None:
    results, _ = _run(pa.odd_wire, 60.0)
    failed = [r for r in results if r.verdict == "fail"]
    assert len(failed) == 1 and failed[0] is results[-1], results  # the stage ends there
    (result,) = failed
    assert result.rules[0] == "R2" and result.evidence.startswith("R2: ")
    assert result.confirmation == "reproduced 2 of 2; the reference adapter passed it right after"
    assert result.replay == (
        f"chunk-adapter replay 'stress:{result.name}:7' --adapter "
        "tests.stateful.pipeline_adapters:shared_state"
    )


@pytest.mark.rule("R2")
def test_a_finding_that_does_not_reproduce_is_inconclusive() -> None:
    results, _ = _run(_OddAtFirst(), 60.0)
    assert "fail" not in {r.verdict for r in results}
    first = results[0]
    assert first.verdict == "inconclusive" and first.confirmation == "reproduced 0 of 2"
    assert first.evidence.startswith("did not reproduce: R2: "), first.evidence
    assert {r.verdict for r in results[1:]} == {"pass"}


def test_the_loopback_variant_is_a_note_never_a_verdict() -> None:
    """Driven as one adapter receiving its own chunks, the shared-state adapter loses
    its finals (the final's put wipes the registration): the scenario says so."""
    (name, _, run) = scenarios(7)[-1]
    assert name == "put failures, loopback" and run.advisory
    report = run(pa.shared_state)
    assert not report.ok and "R23" in report.rules, report.describe()


def test_stress_failures_are_listed_root_cause_first() -> None:
    report = StressReport("x", {"seed": 1})
    report.fail("R23", "3 streams had no final handed out")
    report.fail("stats", "chunks_put: stats() says 1, the recording shows 2")
    report.fail("R9", "a gap", rank=ORACLE, at=40)
    report.fail("R2", "malformed", rank=ORACLE, at=12)
    report.fail("R22", "the SAVE thread died", rank=ROOT)
    assert report.rules == ["R22", "R2", "R9", "R23", "stats"]


def test_the_pipeline_routes_calls_adds_up_stats_and_reads_settings() -> None:
    connector = MemoryConnector()
    pipe = make_adapter(reference_factory, connector, join_timeout=0.5)
    assert isinstance(pipe, Pipeline) and not pipe.loopback
    assert (pipe.sender.stage_id, pipe.receiver.stage_id, pipe.receiver.src_stage_id) == (0, 1, 0)
    try:
        pipe.load_async("r")
        pipe.save_async("r", "a", True)
        sched = SchedulerLoop(pipe, History())
        assert sched.run_until(lambda: "r" in sched.finished, stall=5.0) == "done"
        stats = pipe.stats()
        assert stats.chunks_put == 1 and stats.committed == 1  # sender's + receiver's
        assert setting(pipe, "join_timeout", 9.0) == 0.5
        assert sched.run_until(lambda: False, stall=0.1) == "stalled"
        assert sched.run_until(lambda: False, stall=10.0, until=time.monotonic()) == "budget"
    finally:
        pipe.stop()
    one = make_adapter(reference_factory, MemoryConnector(), loopback=True)
    try:
        assert one.loopback and one.sender.stage_id == one.sender.src_stage_id == 1
    finally:
        one.stop()


@pytest.mark.rule("R23")
def test_handing_the_same_chunks_out_again_and_again_is_no_progress() -> None:
    class Repeats:
        """A receiver whose poll_ready never clears: the same chunk on every call."""

        def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
            return {"r": [{"data": 0, "finished": False}]}

        def stop(self) -> None:
            pass

    sched = SchedulerLoop(Pipeline(Repeats(), Repeats()), History())  # type: ignore[arg-type]
    start = time.monotonic()
    assert sched.run_until(lambda: False, stall=0.2, until=start + 30) == "stalled"
    assert sched.handed_out > sched.new_handed_out == 1


@pytest.mark.rule("R23")
def test_run_until_ends_when_its_cut_says_the_run_tells_nothing_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Quiet:
        def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
            return {}

        def stop(self) -> None:
            pass

    monkeypatch.setattr(scheduler, "CUT_EVERY", 0.01)
    asked: list[float] = []

    def cut() -> bool:
        asked.append(time.monotonic())
        return len(asked) == 3

    sched = SchedulerLoop(Pipeline(Quiet(), Quiet()), History())  # type: ignore[arg-type]
    start = time.monotonic()
    assert sched.run_until(lambda: False, stall=30.0, until=start + 60, cut=cut) == "set aside"
    assert len(asked) == 3 and time.monotonic() - start < 6.0  # asked at its pace, not 30 s


@pytest.mark.rule("R23")
@pytest.mark.timeout(120)
def test_under_a_baseline_a_scenario_showing_an_accepted_bug_is_set_aside_at_once() -> None:
    """five_bugs' build-failure scenario under its baseline: its history shows accepted
    root causes, the oracles let it pass, and a 10 s stall of the bugs' doing was then read
    as a new R23 and re-run until the stage's budget ran out (every five-bug run under a
    baseline was inconclusive). Now the run ends at the first judgement that shows one,
    and the scenario is set aside naming the accepted rules."""
    accepted.install(accepted.Accepted.of(["R15", "R11", "R14", "R16", "R6", "R9", "R12"]))
    try:
        ctx = StageContext(
            "tests.quality.baseline_bugs:five_bugs", "ci", 0, 60.0,
            "chunk-adapter verify --adapter X", deadline=time.monotonic() + 60.0,
            only=("build failures 20%",),
        )  # fmt: skip
        start = time.monotonic()
        results = list(run_stage(baseline_bugs.five_bugs, ctx))
        took = time.monotonic() - start
    finally:
        accepted.install(accepted.Accepted())
    assert [r.verdict for r in results] == ["skip"], [r.evidence for r in results]
    assert "set aside" in results[0].evidence and "R15" in results[0].evidence
    assert took < STALL, took  # cut at a judgement (every CUT_EVERY s), not at the stall
