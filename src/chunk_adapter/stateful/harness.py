"""The harness: one adapter under test, its recorded world, and the model beside it.

It builds ``RecordingConnector(FaultyConnector(GatedConnector(MemoryConnector)))``
and a recording ``GatedBuilder`` around one shared :class:`WatchedHistory`,
asks the factory for an adapter that both sends and receives (``stage_id ==
src_stage_id``), and drives adapter and :class:`~chunk_adapter.model.ContractModel`
with the same calls. After every step it **settles**: waits (bounded by
``liveness_timeout``) until the connector and the builder have seen exactly
what the model says a quiescent adapter has done, then until the RECV thread
has made two more rounds (the gets of a sentinel registration nobody sends to
are its heartbeat), then runs every oracle. A wait that runs out is reported
as a liveness violation, never a hang; seeing more than the model allows is
reported at once. So each step's outcome depends only on the steps so far.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..connectors import (
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
    RecordingConnector,
)
from ..connectors.gates import Gate
from ..factory import AdapterFactory
from ..history import ConnectorOp
from ..model import ContractModel, ModelStopped
from ..oracles import ContractViolation, RecordedAdapter, Violation, check
from .verdicts import count_violation, differs, is_prefix, poll_violation, sent_violation
from .watch import WatchedHistory

__all__ = ["SENTINEL", "Harness"]

SENTINEL = "sentinel"
"""A request id registered at start and never sent to: its gets are the RECV heartbeat."""

MARKER = "marker"
"""A request id whose final chunks, saved after each step, show the SAVE FIFO is done."""
MUTATION = "<mutated after save_async>"
GRACE = 0.05
"""Seconds the counts may still lag once both threads were seen idle."""
F = TypeVar("F", bound=Callable[..., Any])


def _step(fn: F) -> F:
    """Mark the harness failed if the step raises, so teardown does not pile on."""

    @functools.wraps(fn)
    def wrapper(self: Harness, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except BaseException:
            self.failed = True
            raise

    return cast(F, wrapper)


class Harness:
    """One adapter under test plus its model (module doc)."""

    def __init__(
        self,
        factory: AdapterFactory,
        *,
        put_tries: int = 3,
        liveness_timeout: float = 5.0,
        stage_id: int = 1,
        reproduce: str = "",
    ) -> None:
        self.put_tries = put_tries
        self.timeout = liveness_timeout
        self.reproduce = reproduce
        self.history = WatchedHistory()
        self.memory = MemoryConnector(consume_on_get=True)
        self.gated = GatedConnector(self.memory)
        self.faulty = FaultyConnector(self.gated)
        self.connector = RecordingConnector(self.faulty, self.history)
        self.builder = GatedBuilder(history=self.history)
        self.model = ContractModel(stage_id=stage_id, src_stage_id=stage_id, put_tries=put_tries)
        self.raw = factory(
            self.connector, stage_id=stage_id, src_stage_id=stage_id, build_payload=self.builder
        )
        self.adapter = RecordedAdapter(self.raw, self.history)
        self._armed_builds: dict[str, deque[Gate]] = {}
        self._armed_puts: dict[str, deque[Gate]] = {}
        self._armed_gets: dict[str, deque[Gate]] = {}
        self.save_gate: Gate | None = None
        self.recv_gate: Gate | None = None
        self.steps: list[str] = []
        self.failed = False
        self._markers = 0
        self.history.counts.sentinel_key = self.model.key(SENTINEL, 0, receiver=True)
        self.load(SENTINEL)

    # ---------------------------------------------------------- scheduler calls
    @_step
    def save(self, request_id: str, obj: Any, is_final: bool) -> None:
        """``save_async``, then mutate *obj* (R4): before settling when the SAVE thread is
        held (its build comes later), else after (the build is done by then)."""
        step = f"save_async({request_id!r}, {obj!r}, {is_final})"
        snap = copy.deepcopy(obj)
        expect_stop = self._model(lambda: self.model.save(request_id, snap, is_final))
        self._call(step, expect_stop, lambda: self.adapter.save_async(request_id, obj, is_final))
        if self.model.held_save is not None and isinstance(obj, list):
            obj.append(MUTATION)
            self.settle(step)
        else:
            self.settle(step)
            if isinstance(obj, list):
                obj.append(MUTATION)

    @_step
    def cancel(self, request_id: str) -> None:
        step = f"cancel_sender({request_id!r})"
        expect_stop = self._model(lambda: self.model.cancel(request_id))
        self._call(step, expect_stop, lambda: self.adapter.cancel_sender(request_id))
        self.settle(step)

    @_step
    def load(self, request_id: str) -> None:
        step = f"load_async({request_id!r})"
        expect_stop = self._model(lambda: self.model.load(request_id))
        self._call(step, expect_stop, lambda: self.adapter.load_async(request_id))
        self.settle(step)

    @_step
    def cleanup(self, request_id: str) -> None:
        step = f"cleanup_receiver({request_id!r})"
        self.model.cleanup(request_id)
        self._call(step, False, lambda: self.adapter.cleanup_receiver(request_id))
        self.settle(step)

    @_step
    def poll(self) -> dict[str, list[dict[str, Any]]]:
        """``poll_ready`` until it has handed out what the model committed (bounded)."""
        step = "poll_ready()"
        self.steps.append(step)
        expected = self.model.poll()
        got: dict[str, list[dict[str, Any]]] = {}
        deadline = time.monotonic() + self.timeout
        while True:
            ready = self.adapter.poll_ready()
            if not isinstance(ready, dict):
                self._oracles(step, quiescent=False)  # names it: R15
            for rid, values in ready.items():
                got.setdefault(rid, []).extend(values if isinstance(values, list) else [values])
            if got == expected or not is_prefix(got, expected) or self.model.stopped:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.history.wait_for_append(remaining):
                break
        self._oracles(step, quiescent=False)
        if got != expected:
            self._fail(step, [poll_violation(expected, got, self.model)])
        return got

    @_step
    def stop(self) -> None:
        step = "stop()"
        self.steps.append(step)
        self.model.stop()
        self.adapter.stop()
        self._oracles(step, quiescent=False)

    # -------------------------------------------------------------- environment
    @_step
    def fail_puts(self, times: int) -> None:
        self.faulty.fail_next("put", times=times)
        self.model.fail_puts(times)
        self.settle(f"fail the next {times} put(s)")

    @_step
    def fail_gets(self, times: int) -> None:
        self.faulty.fail_next("get", times=times)
        self.settle(f"fail the next {times} get(s)")

    @_step
    def fail_build(self, request_id: str) -> None:
        self.builder.fail(request_id)
        self.model.fail_build(request_id)
        self.settle(f"fail the next build of {request_id!r}")

    @_step
    def hold_build(self, request_id: str) -> None:
        self._armed_builds.setdefault(request_id, deque()).append(self.builder.hold(request_id))
        self.model.hold_build(request_id)

    @_step
    def hold_put(self, key: str) -> None:
        self._armed_puts.setdefault(key, deque()).append(self.gated.hold_put(key))
        self.model.hold_put(key)

    @_step
    def hold_get(self, key: str) -> None:
        self._armed_gets.setdefault(key, deque()).append(self.gated.hold_get(key))
        self.model.hold_get(key)
        self.settle(f"hold the next get of {key!r}")

    @_step
    def release_save(self) -> None:
        gate, self.save_gate = self.save_gate, None
        held = self.model.held_save
        if gate is None or held is None:
            return
        gate.release()
        self.model.release_save()
        self.settle(f"release the SAVE thread ({held.stage} of {held.item.request_id!r})")

    @_step
    def release_recv(self) -> None:
        gate, self.recv_gate = self.recv_gate, None
        held = self.model.held_get
        if gate is None or held is None:
            return
        gate.release()
        self.model.release_recv()
        self.settle(f"release the RECV thread (get of {held.key!r})")

    # ---------------------------------------------------------------- settling
    @_step
    def settle(self, step: str) -> None:
        """Wait until the adapter has done what the model says, then run the oracles.

        Quiescence is detected, not guessed: a marker chunk saved behind
        everything else shows the SAVE thread has worked through its FIFO (R5),
        and a quiet RECV round shows the receiver has nothing left to fetch.
        Then the counts must match the model within a short grace period; when
        a thread cannot be observed that way (it is held, or injected put
        failures are pending), the full liveness timeout applies.
        """
        self.steps.append(step)
        if self.model.stopped:
            self._oracles(step, quiescent=False)
            return
        self._catch_gates(step)
        m = self.model
        sender_known = m.held_save is not None or (m.put_failures == 0 and self._marker(step))
        receiver_known = m.held_get is not None or self._quiet_rounds(step)
        grace = GRACE if sender_known and receiver_known else self.timeout
        reached = self.history.wait_for(lambda c: differs(c, m) is not None, grace)
        diff = differs(self.history.counts_copy(), m)
        if not reached or diff != "equal":
            self._diagnose(step)
            self._fail(step, [count_violation(diff, self.history.counts_copy(), m, reached)])
        self._oracles(step, quiescent=False)
        self._compare_sent(step)

    def _marker(self, step: str) -> bool:
        """Save a final chunk for MARKER and wait for its put: the FIFO before it is done."""
        self._markers += 1
        obj = [MARKER, self._markers]
        self.model.save(MARKER, copy.deepcopy(obj), True)
        self.adapter.save_async(MARKER, obj, True)
        key = self.model.key(MARKER, 0)
        target = self.model.ok_puts[key]
        if not self.history.wait_for(
            lambda c: c.ok_puts[key] >= target or differs(c, self.model) not in (None, "equal"),
            self.timeout,
        ):
            self._diagnose(step)
            self._fail(
                step,
                [
                    Violation(
                        "R23",
                        f"a chunk saved after this step ({obj!r}) was not "
                        f"put within {self.timeout}s: the SAVE thread is stuck "
                        "or lost it",
                        MARKER,
                        key,
                    )
                ],
            )
        return True

    def _quiet_rounds(self, step: str) -> bool:
        """Wait for a RECV round, begun after now, in which no get found anything (watch)."""
        start = self.history.tick()
        m = self.model
        if not self.history.wait_for(
            lambda c: c.quiet_since > start or differs(c, m) not in (None, "equal"),
            self.timeout,
        ):
            self._diagnose(step)
            self._fail(
                step,
                [
                    Violation(
                        "R17",
                        f"the RECV thread did not complete an idle round "
                        f"over its polling queue within {self.timeout}s (the "
                        f"registered request {SENTINEL!r} must be polled "
                        "every round)",
                        SENTINEL,
                    )
                ],
            )
        return True

    @_step
    def finish(self) -> None:
        """Release everything, settle, poll, and check liveness (R11, R14, R23)."""
        while not self.model.stopped and (self.save_gate or self.recv_gate):
            self.release_save()
            self.release_recv()
        if not self.model.stopped:
            self.settle("teardown: quiescence")
        self.poll()
        self.poll()  # nothing new: must return {} (R15)
        self._oracles("teardown", quiescent=True)

    def close(self) -> None:
        """Release every gate and stop the adapter (idempotent; errors ignored)."""
        self.gated.release_all()
        self.builder.release_all()
        with contextlib.suppress(Exception):  # after a failure, the failure is what matters
            self.raw.stop()

    # ---------------------------------------------------------------- helpers
    def _model(self, fn: Callable[[], object]) -> bool:
        try:
            fn()
        except ModelStopped:
            return True
        return False

    def _call(self, step: str, expect_stop: bool, fn: Callable[[], object]) -> None:
        try:
            fn()
        except RuntimeError:
            if not expect_stop:
                raise
        except Exception as exc:
            if expect_stop:
                self._fail(
                    step,
                    [Violation("R19", f"{step} after stop() raised {exc!r}, not RuntimeError")],
                )
            raise

    def _catch_gates(self, step: str) -> None:
        m = self.model
        if m.held_save is not None and self.save_gate is None:
            held = m.held_save
            if held.stage == "build":
                gate = self._armed_builds[held.item.request_id].popleft()
                what = f"the build of {held.item.snapshot!r} for {held.item.request_id!r}"
            else:
                assert held.key is not None
                gate = self._armed_puts[held.key].popleft()
                what = f"the put of {held.key!r}"
            self.save_gate = gate
            if not gate.wait_started(self.timeout):
                self._diagnose(step)
                rule = "R11" if held.item.is_final else "R23"
                self._fail(
                    step,
                    [
                        Violation(
                            rule,
                            f"{what} never started (waited {self.timeout}s)",
                            held.item.request_id,
                            held.key,
                        )
                    ],
                )
        if m.held_get is not None and self.recv_gate is None:
            hg = m.held_get
            gate = self._armed_gets[hg.key].popleft()
            self.recv_gate = gate
            if not gate.wait_started(self.timeout):
                self._diagnose(step)
                self._fail(
                    step,
                    [
                        Violation(
                            "R23",
                            f"the registration's get of {hg.key!r} never "
                            f"came (waited {self.timeout}s)",
                            hg.request_id,
                            hg.key,
                        )
                    ],
                )

    def _diagnose(self, step: str) -> None:
        """Before reporting a missing or extra action: poll once (recorded) so the
        oracles see what the adapter committed, and report their verdict if any."""
        with contextlib.suppress(Exception):  # the oracles and the count check report
            self.adapter.poll_ready()
        self._oracles(step, quiescent=False)

    def _oracles(self, step: str, *, quiescent: bool) -> None:
        violations = check(self.history, quiescent=quiescent, put_tries=self.put_tries)
        if violations:
            self._fail(step, violations)

    def _compare_sent(self, step: str) -> None:
        ops = sorted(self.history.records(ConnectorOp), key=lambda o: o.begin)
        actual = [(o.key, o.value) for o in ops if o.op == "put" and o.outcome == "ok"]
        violation = sent_violation(self.model.sent, actual)
        if violation is not None:
            self._fail(step, [violation])

    def _fail(self, step: str, violations: list[Violation]) -> None:
        recent = "; ".join(self.steps[-8:])
        context = f"  at step: {step}\n  recent steps: {recent}"
        if self.reproduce:
            context += f"\n  reproduce: {self.reproduce}"
        raise ContractViolation(violations, context)
