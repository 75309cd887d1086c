"""R17 — the prompt hand-off probe of verify's examples stage (verify/probes_handoff.py).

It passes the reference adapter over both kinds of connector, and catches an
adapter that loses its put notifications (each chunk then waits out the
re-poll), the shape of the mutants it was written for (docs/quality.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.oracles import ContractViolation
from chunk_adapter.verify import probes_handoff
from chunk_adapter.verify.probes import PROBES

REPOLL = 0.8  # s the deaf adapter waits before it re-polls: 3.2x HOP_BOUND


class DeafAdapter(ChunkAdapter):
    """Subscribes to put notifications and then ignores them (a seeded bug)."""

    def _on_put(self, key: str) -> None:
        pass


def _deaf(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return DeafAdapter(connector, repoll_interval=REPOLL, **kwargs)


@pytest.mark.rule("R17")
def test_probe_is_part_of_the_examples_stage() -> None:
    assert ("prompt hand-off", ("R17",), probes_handoff.probe_prompt_handoff) in PROBES


@pytest.mark.rule("R17")
def test_reference_hands_each_chunk_over_promptly() -> None:
    probes_handoff.probe_prompt_handoff(ChunkAdapter)


@pytest.mark.rule("R17")
def test_lost_notifications_are_caught_with_the_rule_and_the_times() -> None:
    assert min(probes_handoff.handoff_times(_deaf, notify=False)) < probes_handoff.HOP_BOUND
    with pytest.raises(ContractViolation, match=r"^R17: over a notifying connector") as caught:
        probes_handoff.probe_prompt_handoff(_deaf)
    assert caught.value.rules == ["R17"], caught.value.violations
    assert "fastest of 6 chunks" in str(caught.value)


class _NoSwap(ChunkAdapter):
    """poll_ready copies the ready lists instead of swapping them out (a seeded bug)."""

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            return {rid: list(values) for rid, values in self._ready.items()}


@pytest.mark.rule("R15", "R14")
def test_a_chunk_handed_out_again_is_named_r15_not_r14() -> None:
    """Its root is the missing swap (R15); it read as R14 (a wrong chunk), one more root
    cause for one defect in a baseline (docs/verify.md, baselines)."""
    with pytest.raises(ContractViolation, match=r"^R15: poll_ready handed out") as caught:
        probes_handoff.handoff_times(_NoSwap, notify=False, hops=2)
    assert caught.value.rules == ["R15"] and caught.value.violations[0].also == ("R14",)
