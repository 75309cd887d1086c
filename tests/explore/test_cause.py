"""The root rule of a confirmed failure, asked of counterfactual scripts (R12, R16).

An oracle names the rule where a break shows; a script that fails while the same script
without a call's freedom (a reload left out: R12; every cleanup made once the adapters
have settled: R16) passes names that call's rule as the root. The counterfactuals are
pure functions of a script; the stages ask them only after a failure is confirmed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.adapter import ChunkAdapter  # noqa: E402
from chunk_adapter.explore.scenarios.counterfactual import COUNTERFACTUALS  # noqa: E402
from chunk_adapter.explore.scenarios.library import LIBRARY  # noqa: E402
from chunk_adapter.explore.scenarios.scenario import (  # noqa: E402
    Scenario,
    cancel,
    cleanup,
    load,
    poll,
    save,
    settle,
)
from chunk_adapter.explore.stages.cause import root_of  # noqa: E402
from chunk_adapter.explore.stages.explore import run_stage  # noqa: E402
from chunk_adapter.factory import load_factory  # noqa: E402
from chunk_adapter.outcome import StageContext  # noqa: E402
from chunk_adapter.rules import R2, R4, R5, R6, R12, R14, R16, R23  # noqa: E402

RELOADS, FENCE, CANCELS, REJECTS = COUNTERFACTUALS


def script(*ops: Any, topology: str = "pipeline") -> Scenario:
    return Scenario("s", tuple(ops), topology=topology)


@pytest.mark.rule("R12")
def test_the_reload_counterfactual_leaves_out_only_loads_of_a_registered_request() -> None:
    s = script(
        load("r"), load("r"), load("r", on="middle"), cleanup("r"), load("r"), load("a"), poll(),
        topology="three-stage",
    )  # fmt: skip
    changed = RELOADS.of(s)
    assert changed is not None
    # the second load of r on the receiver goes; the middle's is its own first; after the
    # cleanup r is registered afresh
    assert changed.ops == (
        load("r"), load("r", on="middle"), cleanup("r"), load("r"), load("a"), poll(),
    )  # fmt: skip
    assert RELOADS.of(script(load("r"), cleanup("r"), load("r"))) is None


@pytest.mark.rule("R16")
def test_the_fence_counterfactual_settles_before_each_cleanup_of_a_registered_request() -> None:
    s = script(
        save("r", 0), load("r"), cleanup("r"), cleanup("r"), load("r"), settle(), cleanup("r"),
    )  # fmt: skip
    changed = FENCE.of(s)
    assert changed is not None
    assert changed.ops == (
        save("r", 0), load("r"), settle(), cleanup("r"), cleanup("r"), load("r"), settle(),
        cleanup("r"),
    )  # fmt: skip
    assert FENCE.of(script(load("r"), settle(), cleanup("r"))) is None
    assert FENCE.of(script(cleanup("r"), load("r"))) is None  # not registered: nothing races


@pytest.mark.rule("R16")
def test_the_root_moves_only_where_a_counterfactual_passes_and_the_oracle_saw_a_symptom() -> None:
    s = script(load("r"), cleanup("r"), load("r"))
    asked: list[tuple[Any, ...]] = []

    def passes(changed: Scenario, only: tuple[str, ...] | None) -> str | None:
        asked.append(changed.ops)
        assert only is None  # settling a cleanup may change what is received: it must pass
        return "3 of 3 executions"

    root = root_of(s, (R2, R14), passes)
    assert root.rules == (R16, R2, R14)
    assert "root R16" in root.why and "not R2" in root.why and "3 of 3" in root.why
    assert asked == [(load("r"), settle(), cleanup("r"), load("r"))]  # the reload one: n/a

    assert root_of(s, (R2, R14), lambda changed, only: None).rules == (R2, R14)  # it failed too
    assert root_of(s, (R4,), passes).rules == (R4,)  # a snapshot is no fence's symptom
    assert root_of(s, (R16, R2), passes).rules == (R16, R2)  # already the root
    assert root_of(s, (), passes).rules == ()


@pytest.mark.rule("R6")
def test_the_cancel_counterfactual_leaves_the_cancels_out() -> None:
    s = script(save("r", 0), cancel("r"), save("r", 1, True), save("r", 2))
    changed = CANCELS.of(s)
    assert changed is not None
    assert changed.ops == (save("r", 0), save("r", 1, True), save("r", 2))
    assert CANCELS.of(script(save("r", 0, True))) is None
    # a chunk dropped with nothing to explain it (R5) that needs the cancel is R6's
    assert root_of(s, (R5,), lambda changed, only: "20 of 20").rules == (R6, R5)


@pytest.mark.rule("R6", "R12", "R16")
def test_a_counterfactual_changes_only_the_calls_made_on_the_failing_hop() -> None:
    """A failure one hop of a pipeline shows is asked only about the calls its two adapters
    were given: a cancel made on the sender reaches the middle->receiver hop only as data
    (the cancelled stream's None final, relayed on), so leaving it out is no counterfactual
    of that hop (the middle skipping a None final read R6, not R8/R11)."""
    s = script(
        cancel("r"), save("r", "end", True), load("r", on="middle"), load("r"),
        load("r"), cleanup("r", on="middle"), poll(), topology="three-stage",
    )  # fmt: skip
    assert CANCELS.of(s, ("middle", "receiver")) is None
    assert CANCELS.of(s, ("sender", "middle")) == CANCELS.of(s)
    assert CANCELS.of(s) is not None
    # the second load of r on the receiver is the receiver's own reload
    reloads = RELOADS.of(s, ("middle", "receiver"))
    assert reloads is not None and reloads.ops.count(load("r")) == 1
    assert RELOADS.of(s, ("sender", "middle")) is None
    # the middle's cleanup is a receiving call: of the hop it receives on only
    fence = FENCE.of(s, ("sender", "middle"))
    assert fence is not None and fence.ops[5:7] == (settle(), cleanup("r", on="middle"))
    assert FENCE.of(s, ("middle", "receiver")) is None
    # root_of asks nothing a hop's members were not given
    asked: list[Any] = []

    def passes(changed: Scenario, only: tuple[str, ...] | None) -> str | None:
        asked.append(changed.ops)
        return "20 of 20"

    assert root_of(s, ("R11",), passes, ("middle", "receiver")).rules == ("R11",)
    assert asked == []
    assert root_of(s, ("R11",), passes, ("sender", "middle")).rules == (R6, "R11")


@pytest.mark.rule("R12")
def test_a_rule_the_oracle_names_among_the_consequences_is_the_only_one_asked() -> None:
    # the oracle saw the reload (R12 second): only the reload counterfactual is asked, and
    # when it fails too the oracle's order stands, though another would have passed
    s = script(load("r"), load("r"), cleanup("r"), load("r"))
    reloads = RELOADS.of(s)
    assert reloads is not None
    asked: list[tuple[Any, ...]] = []

    def passes(changed: Scenario, only: tuple[str, ...] | None) -> str | None:
        asked.append(changed.ops)
        return None if changed.ops == reloads.ops else "60 of 60"

    assert root_of(s, (R23, R12), passes).rules == (R23, R12)
    assert asked == [reloads.ops]


def _pct_run(name: str, factory: str) -> Any:
    """The explore stage's pct run of the library scenario *name* on *factory* (a name in
    this module), which must fail."""
    spec = f"{__name__}:{factory}"
    ctx = StageContext(
        spec, "quick", 0, 60.0, f"chunk-adapter verify --adapter {spec}",
        deadline=time.monotonic() + 60.0, only=(f"{name} / pct",),
    )  # fmt: skip
    results = list(run_stage(load_factory(spec), ctx))
    (result,) = (r for r in results if r.name == f"{name} / pct")
    assert result.verdict == "fail", result.evidence
    return result


class StaleCommitMovesNextId(ChunkAdapter):
    """BUG (R16): a get whose registration was cleaned up while it was in flight is
    discarded, but still moves the request's next id — the new registration's — past
    the chunk it got (one counter per request id, not per registration)."""

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        with self._recv_lock:
            stale_before = self._recv_counts["stale_discarded"]
        progress = super()._poll_one(request_id, token, key, chunk_id)
        with self._recv_lock:
            if self._recv_counts["stale_discarded"] > stale_before and (
                request_id in self._next_recv_id
            ):
                self._next_recv_id[request_id] = chunk_id + 1  # BUG (R16)
        return progress


def make(connector: Any, **kwargs: Any) -> StaleCommitMovesNextId:
    return StaleCommitMovesNextId(connector, **kwargs)


@pytest.mark.rule("R16")
def test_the_explore_stage_names_the_fence_where_the_oracle_sees_a_chunk_out_of_order() -> None:
    # the new registration skips its chunk 0 and hands out chunk 1 first: the oracle sees
    # a chunk out of id order (R14) — the same script with the cleanup made once the
    # receiver settled passes, so the root is the fence
    name = "pipeline/q5-cleanup-inflight-get-event"
    result = _pct_run(name, "make")
    assert result.rules[0] == R16, result.evidence
    assert R14 in result.rules[1:], result.rules  # what the oracle saw, after the root
    assert "root R16" in result.evidence and "settled" in result.evidence
    # the library script itself is left alone: the counterfactual is a new script
    assert cleanup("r") in LIBRARY[name].ops and settle() not in LIBRARY[name].ops


class OneChunkPerLoad(ChunkAdapter):
    """``load_async`` arms one fetch, and each committed chunk waits in one slot per
    request. BUG (R12): a ``load_async`` of a registered request arms another fetch —
    an adapter that needs it to go on, as vllm-omni's does (its scheduler re-arms a
    request after each chunk), and whose second fetch overwrites the slot (R14)."""

    def load_async(self, request_id: str) -> None:
        with self._recv_cond:
            token = self._tokens.get(request_id)
            if token is not None:
                self._check_running("load_async")
                self._queue.append((request_id, token))  # BUG (R12): one more fetch
                self._recv_signal += 1
                self._recv_cond.notify()
                return
        super().load_async(request_id)

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        progress = super()._poll_one(request_id, token, key, chunk_id)
        if progress:
            with self._recv_lock:
                if (request_id, token) in self._queue:
                    self._queue.remove((request_id, token))  # one chunk per load_async
                ready = self._ready.get(request_id)
                if ready:
                    del ready[:-1]  # one slot: the newest chunk overwrites the one waiting
        return progress


def one_chunk_per_load(connector: Any, **kwargs: Any) -> OneChunkPerLoad:
    return OneChunkPerLoad(connector, **kwargs)


@pytest.mark.rule("R12")
def test_a_reload_that_must_change_nothing_is_the_root_though_the_script_without_it_fails() -> None:
    # the library script loads r a second time; with it this adapter hands out chunk 1 as
    # the registration's first (R14), without it it never fetches chunk 1 (R23). A
    # reload changes nothing by R12, so a script without it that never fails as found
    # shows the reload changed what broke: R12 is the root, though that script fails
    result = _pct_run("pipeline/q4-receiver-finished", "one_chunk_per_load")
    assert result.rules[0] == R12, result.evidence
    assert R14 in result.rules[1:], result.rules
    assert "never fails so" in result.evidence and "failed otherwise (R23" in result.evidence


@pytest.mark.rule("R12")
def test_only_a_counterfactual_the_contract_says_changes_nothing_may_fail_otherwise() -> None:
    s = script(load("r"), save("r", 0), load("r"), cleanup("r"))
    asked: list[tuple[Any, tuple[str, ...] | None]] = []

    def passes(changed: Scenario, only: tuple[str, ...] | None) -> str | None:
        asked.append((changed.ops, only))
        return "60 of 60, none failed with R14; some failed otherwise (R23)" if only else None

    root = root_of(s, (R14,), passes)
    assert root.rules == (R12, R14)
    assert "never fails so" in root.why and "makes no difference" in root.why
    reloads = RELOADS.of(s)
    assert reloads is not None
    assert asked == [(reloads.ops, (R14,))]  # asked with the failure's rules
    # a cleanup settled first: where a get consumes the value, the next registration may
    # find other values, so the script must pass outright; where gets keep values it
    # finds the same ones, and the failure's rules are asked
    fenced = (load("r"), save("r", 0), cleanup("r"))
    asked.clear()
    assert root_of(script(*fenced), (R14,), passes).rules == (R14,)
    assert asked == [((load("r"), save("r", 0), settle(), cleanup("r")), None)]
    asked.clear()
    keeping = Scenario("s", fenced, consume_on_get=False)
    assert root_of(keeping, (R14,), passes).rules == (R16, R14)
    assert asked == [((load("r"), save("r", 0), settle(), cleanup("r")), (R14,))]
