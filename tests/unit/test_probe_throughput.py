"""R7, R17 — the throughput-stall probes of verify's examples stage (verify/probes_throughput.py).

``independent builds`` catches tests/quality/broken_stall.py's
``global_build_lock`` (a build lock shared by every adapter) under R7, and a
process-wide wait before puts under R17; ``quiet polling`` catches its
``backoff_recv`` (the RECV thread's pause grows while nothing arrives) under
R17, confirmed by a second run. Both pass the reference adapter and the
correct adapters of tests/quality/correct. The verdict of the quiet-polling
probe is a pure function of two rates (``judge_quiet_rates``), tested on its
own with made-up figures: no timing there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.bed.waiting import Hang
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.factory import load_factory
from chunk_adapter.oracles import ContractViolation
from chunk_adapter.verify import probes_throughput
from chunk_adapter.verify.leaks import Undecided
from chunk_adapter.verify.probes import PROBES, run_probes
from tests.quality.broken_stall import backoff_recv, global_build_lock
from tests.quality.correct.catalogue import CORRECT

SHORT_BOUND = 0.5  # s: B's put takes 1-8 ms; the broken adapters' waits are unbounded


@pytest.mark.rule("R17")
def test_the_probes_run_before_bounded_state() -> None:
    """The cheap probes decide a stalling receiver in seconds; bounded state takes ~45 s
    on one, so it runs last."""
    names = [name for name, _, _ in PROBES]
    assert names[-1] == "bounded state", names
    assert names.index("prompt hand-off") < names.index("bounded state"), names
    assert (
        "independent builds",
        ("R7", "R17"),
        probes_throughput.probe_independent_builds,
    ) in PROBES
    assert ("quiet polling", ("R17",), probes_throughput.probe_quiet_polling) in PROBES


# -- independent builds -----------------------------------------------------------------


@pytest.mark.rule("R7")
@pytest.mark.parametrize("spec", ["chunk_adapter.adapter:ChunkAdapter", *CORRECT])
def test_a_held_build_does_not_hold_up_another_adapter(spec: str) -> None:
    seconds = probes_throughput.independent_build_seconds(load_factory(spec))
    assert 0 <= seconds < probes_throughput.BUILD_BOUND


@pytest.mark.rule("R7")
def test_a_build_lock_shared_by_every_adapter_is_caught_under_r7() -> None:
    with pytest.raises(ContractViolation, match=r"^R7: while adapter A's build_payload") as caught:
        probes_throughput.independent_build_seconds(global_build_lock, bound=SHORT_BOUND)
    assert caught.value.violations[0].rules == ("R7", "R17"), caught.value.violations
    assert "did not even call build_payload for 'free'" in str(caught.value)
    assert "after A's build was released" in str(caught.value)


class _BuildsFirst:
    """Process-wide: puts wait while any adapter's build is running (a seeded bug)."""

    # Guards building (builds in progress in the process); notified by each build's
    # end; waited on by every put.
    cond = threading.Condition()
    building = 0


def _counted_build(build: Any) -> Any:
    def run(request_id: str, snapshot: Any, is_final: bool) -> Any:
        with _BuildsFirst.cond:
            _BuildsFirst.building += 1
        try:
            return build(request_id, snapshot, is_final)
        finally:
            with _BuildsFirst.cond:
                _BuildsFirst.building -= 1
                _BuildsFirst.cond.notify_all()

    return run


class _PutsAfterBuilds(ConnectorWrapper):
    def put(self, key: str, value: dict[str, Any]) -> None:
        with _BuildsFirst.cond:  # BUG: R17, one adapter's put waits for another's build
            _BuildsFirst.cond.wait_for(lambda: _BuildsFirst.building == 0)
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


def _puts_after_builds(connector: Any, *, stage_id: int, build_payload: Any = None) -> Any:
    adapter = ChunkAdapter(
        _PutsAfterBuilds(connector), stage_id=stage_id, build_payload=build_payload
    )
    adapter.build_payload = _counted_build(adapter.build_payload)
    return adapter


@pytest.mark.rule("R17")
def test_a_put_that_waits_for_another_adapters_build_is_caught_under_r17() -> None:
    with pytest.raises(ContractViolation, match=r"^R17: adapter B") as caught:
        probes_throughput.independent_build_seconds(_puts_after_builds, bound=SHORT_BOUND)
    assert caught.value.rules == ["R17"], caught.value.violations
    assert "built the final of 'free' but did not put free_2_0" in str(caught.value)


@pytest.mark.slow  # two runs with the probe's own 5 s bound
@pytest.mark.rule("R7")
def test_verify_confirms_the_shared_build_lock() -> None:
    (result,) = run_probes(global_build_lock, "replay", wants=lambda n: n == "independent builds")
    assert (result.verdict, result.rules[:1]) == ("fail", ("R7",)), result
    assert result.confirmation.startswith("ran the check again"), result


# -- quiet polling ------------------------------------------------------------------------


@pytest.mark.rule("R17")
def test_rates_at_the_contracts_pace_pass() -> None:
    probes_throughput.judge_quiet_rates(probes_throughput.FLOOR, 0.0)  # however slow the reference
    probes_throughput.judge_quiet_rates(300.0, 500.0)


@pytest.mark.rule("R17")
def test_a_slow_poll_beside_a_starved_reference_is_undecided() -> None:
    with pytest.raises(Undecided, match="too busy"):
        probes_throughput.judge_quiet_rates(2.0, probes_throughput.DECISIVE - 1)


@pytest.mark.rule("R17")
def test_a_slow_poll_near_the_references_pace_is_undecided() -> None:
    reference = probes_throughput.DECISIVE
    with pytest.raises(Undecided, match=r"not under 0\.1 of the reference"):
        probes_throughput.judge_quiet_rates(probes_throughput.FRACTION * reference + 1, reference)


@pytest.mark.rule("R17")
@pytest.mark.parametrize("rate", [0.0, 2.0])
def test_a_slow_poll_beside_a_prompt_reference_is_r17(rate: float) -> None:
    with pytest.raises(ContractViolation, match=r"^R17: after 1 s of quiet") as caught:
        probes_throughput.judge_quiet_rates(rate, 400.0)
    assert caught.value.rules == ["R17"], caught.value.violations
    assert f"{rate:.1f} times a second" in str(caught.value)
    assert "reference ChunkAdapter, measured beside it in the same window, 400 times" in str(
        caught.value
    )


class _NeverPolls(ChunkAdapter):
    """Takes registrations and forgets them: no get is ever made (a seeded bug)."""

    def load_async(self, request_id: str) -> None:
        pass


@pytest.mark.rule("R23")
def test_requests_never_polled_are_r23(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes_throughput, "ARRIVE", SHORT_BOUND)
    with pytest.raises(Hang, match=r"^R23: 4 gets for the 4 registered requests did not") as hung:
        probes_throughput.quiet_rates(_NeverPolls)
    assert (hung.value.rules, hung.value.call) == (("R23",), False)


@pytest.mark.rule("R17")
def test_a_reference_that_never_polls_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference is the yardstick: if it cannot poll, no verdict on the adapter."""
    monkeypatch.setattr(probes_throughput, "ARRIVE", SHORT_BOUND)
    monkeypatch.setattr(probes_throughput, "ChunkAdapter", _NeverPolls)
    with pytest.raises(Undecided, match="the machine is too busy to measure"):
        probes_throughput.quiet_rates(ChunkAdapter)


@pytest.mark.rule("R17")
def test_the_reference_keeps_polling_after_a_quiet_spell() -> None:
    rate, reference = probes_throughput.quiet_rates(ChunkAdapter)
    assert rate >= probes_throughput.FLOOR or reference < probes_throughput.DECISIVE, (
        rate,
        reference,
    )


@pytest.mark.rule("R17")
def test_verify_confirms_a_backoff_after_a_quiet_spell() -> None:
    (result,) = run_probes(backoff_recv, "replay", wants=lambda n: n == "quiet polling")
    if result.verdict == "inconclusive":  # the reference itself was starved: allowed
        assert "too busy" in result.evidence or "not confirmed" in result.evidence, result
        pytest.skip(f"machine too busy to decide: {result.evidence}")
    assert (result.verdict, result.rules[:1]) == ("fail", ("R17",)), result
    assert result.confirmation.startswith("ran the check again"), result
    assert "one get every" in result.evidence, result


@pytest.mark.slow  # 2 s per adapter
@pytest.mark.rule("R17")
@pytest.mark.parametrize("spec", CORRECT)
def test_correct_adapters_keep_polling_after_a_quiet_spell(spec: str) -> None:
    probes_throughput.probe_quiet_polling(load_factory(spec))  # Undecided (inconclusive) fails too
