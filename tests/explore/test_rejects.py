"""Calls with a wrong argument inside generated worlds (R21): raise at the call, change nothing.

A world now and then makes a call with a bad request id, a bad ``is_final`` or an
object no snapshot takes (``scenario.reject``) at a drawn point of its program: with
a stream open, a cancel mark set, the request registered or not. The call must raise
at the call (the script checks it: R21), and, raised, it must have changed nothing —
the oracles take it as never made, so whatever it changed shows in the history, and
the counterfactual "the same world without those calls passes" names R21 the root.
The examples stage's probe tries bad calls on an idle adapter only: the bugs below
pass it.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.errors import InvalidValue  # noqa: E402
from chunk_adapter.explore.engine.execution import prepared  # noqa: E402
from chunk_adapter.explore.engine.simulate import (  # noqa: E402
    run_world,
    sim_setup,
    simulate,
    strategy_for,
)
from chunk_adapter.explore.scenarios.codec import decode, encode  # noqa: E402
from chunk_adapter.explore.scenarios.counterfactual import COUNTERFACTUALS  # noqa: E402
from chunk_adapter.explore.scenarios.scenario import (  # noqa: E402
    Scenario,
    cancel,
    cleanup,
    load,
    poll,
    reject,
    save,
    settle,
)
from chunk_adapter.explore.stages.simulate import run_stage  # noqa: E402
from chunk_adapter.factory import load_factory, reference_factory  # noqa: E402
from chunk_adapter.oracles.inputs import REJECTS  # noqa: E402
from chunk_adapter.outcome import StageContext  # noqa: E402
from chunk_adapter.verify.probes_input import probe_bad_input  # noqa: E402
from tests.quality.correct.queue_fifo import QueueChunkAdapter  # noqa: E402

KNOWN = ("stage_id", "src_stage_id", "build_payload", "put_tries", "join_timeout")
WORLD = {"stage_ids": (0, 1), "liveness": 2.0}


class QueuesBeforeChecking(QueueChunkAdapter):
    """BUG (R21): ``save_async`` queues the chunk, then checks ``is_final``: a call with
    ``is_final=1`` raises ``TypeError`` as it must, but its chunk is put all the same."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._rid(request_id)
        self._running()
        self.fifo.put((request_id, copy.deepcopy(obj), bool(is_final)))
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final {is_final!r} is not a bool")


class TakesOneForTrue(QueueChunkAdapter):
    """BUG (R21): ``is_final`` is checked with ``in (True, False)``, which ``0`` and ``1``
    pass: the call does not raise."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if is_final not in (True, False):
            raise TypeError(f"is_final {is_final!r} is not a bool")
        super().save_async(request_id, obj, bool(is_final))


def fifo(cls: type[QueueChunkAdapter]) -> Any:
    def make(connector: Any, **kwargs: Any) -> QueueChunkAdapter:
        return cls(connector, **{k: v for k, v in kwargs.items() if k in KNOWN})

    return make


queues_before_checking = fifo(QueuesBeforeChecking)


def every_reject(rid: str) -> list[Any]:
    return [reject(call, rid, bad) for call, bads in REJECTS.items() for bad in bads]


def test_a_reject_op_names_a_call_and_a_wrong_value_of_it() -> None:
    op = reject("final", "a", "1")
    assert str(op) == "reject('final', 'a', '1')"
    with pytest.raises(InvalidValue, match="reject"):
        reject("final", "a", "int")  # a bad id is not a bad is_final
    with pytest.raises(InvalidValue, match="reject"):
        reject("poll", "a", "int")
    world = Scenario("w", (load("a"), *every_reject("a"), save("a", [0], True)), **WORLD)
    assert decode(encode(world)) == world
    # the counterfactual leaves them all out, and nothing else
    without = COUNTERFACTUALS[-1].of(world)
    assert COUNTERFACTUALS[-1].rule == "R21"
    assert without is not None and without.ops == (load("a"), save("a", [0], True))


@pytest.mark.rule("R21")
@pytest.mark.parametrize(
    "spec",
    ["reference", "tests.quality.correct.queue_fifo:make", "tests.quality.correct.due_heap:make"],
)
def test_correct_adapters_raise_at_every_wrong_call_and_change_nothing(spec: str) -> None:
    """Every wrong call, mid-stream: with a cancel mark set, a registration open, after
    the final; then the stream and a second one go on as if none had been made."""
    ops = (
        load("1"), save("1", [0]), *every_reject("1"), cancel("1"), *every_reject("1"),
        save("1", [1]), save("1", [2], True), settle(), *every_reject("1"), poll(),
        cleanup("1"), *every_reject("1"), load("1"), save("1", [3], True), settle(),
    )  # fmt: skip
    world = Scenario("w", ops, notify=True, **WORLD)
    factory = reference_factory if spec == "reference" else load_factory(spec)
    setup = sim_setup(factory, wall_timeout=10.0, max_steps=30_000)
    with prepared(setup):
        for seed in range(6):
            runs = run_world(world, strategy_for(("random", seed, ()), world), setup)
            assert runs[-1].ok, (seed, runs[-1].failures)


@pytest.mark.rule("R21")
def test_a_wrong_call_that_does_not_raise_is_r21() -> None:
    world = Scenario("w", (load("a"), reject("final", "a", "1"), save("a", [0], True)), **WORLD)
    setup = sim_setup(fifo(TakesOneForTrue), wall_timeout=10.0, max_steps=30_000)
    with prepared(setup):
        execution = run_world(world, strategy_for(("random", 0, ()), world), setup)[-1]
    assert [f.rules[:1] for f in execution.failures][:1] == [("R21",)], execution.failures
    message = execution.failures[0].message
    assert "must raise TypeError at the call, but it returned normally" in message


@pytest.mark.rule("R21")
def test_a_wrong_call_that_raised_but_queued_is_found_with_root_r21() -> None:
    """The probe (bad calls on an idle adapter, then one good final) passes this bug: its
    first put is still ``b_0_0``. The generated worlds find it, and the counterfactual
    without the wrong calls names R21 where the oracle saw an extra chunk (R5)."""
    factory = queues_before_checking
    probe_bad_input(factory)  # passes: the bug is past what an idle probe sees
    sim = simulate(factory, examples=150, deadline=time.monotonic() + 120, seed=0,
                   long_haul_share=0, shrink_seconds=10)  # fmt: skip
    assert sim.found is not None, "no generated world found it"
    assert any(op.kind == "reject" for op in sim.found.world.ops)
    spec = "tests.explore.test_rejects:queues_before_checking"
    ctx = StageContext(
        spec, "quick", 0, 120.0, f"chunk-adapter verify --adapter {spec}",
        deadline=time.monotonic() + 120,
    )  # fmt: skip
    results = [r for r in run_stage(load_factory(spec), ctx) if r.verdict != "pass"]
    assert [r.verdict for r in results] == ["fail"], [r.evidence for r in results]
    assert results[0].rules[0] == "R21", (results[0].rules, results[0].evidence)
    assert "wrong argument left out" in results[0].evidence
