"""Settling after each step: wait until the adapters have done what the model says, then judge.

:class:`Settling` is the half of the harness that waits and judges; the
half that makes calls is :class:`~chunk_adapter.stateful.harness.Harness`.
Quiescence is detected, not guessed: a marker chunk saved behind everything
else shows the sender's SAVE thread has worked through its FIFO (R5), and a
quiet round of the receiver's RECV thread (the gets of a sentinel
registration nobody sends to are its heartbeat) shows nothing is left to
fetch. Then the counts must match the model within a short grace period, and
every oracle runs. Every wait is bounded by ``timeout``: one that runs out is
a liveness violation, never a hang; seeing more than the model allows is
reported at once.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

from hypothesis import reject
from hypothesis.errors import UnsatisfiedAssumption

from ..bed.crashes import died
from ..connectors.gates import Gate
from ..history import ConnectorOp
from ..model import ContractModel
from ..oracles import ContractViolation, RecordedPipeline, Violation, accepted, check
from ..rules import R11, R17, R22, R23
from .budget import Budget
from .verdicts import count_violation, differs, sent_violation
from .watch import Counts
from .world import World

__all__ = ["GRACE", "MARKER", "SENTINEL", "Settling", "step", "violation_type"]

SENTINEL = "sentinel"
"""A request id registered at start and never sent to: its gets are the RECV heartbeat."""
MARKER = "marker"
"""A request id whose final chunks, saved after each step, show the SAVE FIFO is done."""
GRACE = 0.05
"""Seconds the counts may still lag once both threads were seen idle."""
F = TypeVar("F", bound=Callable[..., Any])


_BY_RULE: dict[str, type[ContractViolation]] = {}


def violation_type(rule: str) -> type[ContractViolation]:
    """A subclass of ``ContractViolation`` per root *rule*, named the same.

    Hypothesis tells failures apart by exception type and place; under
    ``verify --all`` (``Budget.split_by_rule``) each root rule gets its own
    type, so Hypothesis keeps, shrinks and reports one failure per rule
    instead of only the first.
    """
    if rule not in _BY_RULE:
        _BY_RULE[rule] = type(
            "ContractViolation",
            (ContractViolation,),
            {"__module__": ContractViolation.__module__, "__qualname__": "ContractViolation"},
        )
    return _BY_RULE[rule]


def step(fn: F) -> F:
    """A harness step: checks the budget first; on an exception marks the harness failed
    (so teardown does not pile on) and records the failure with its reproducer, unless
    the step rejected its example (a baseline's accepted root cause)."""

    @functools.wraps(fn)
    def wrapper(self: Settling, *args: Any, **kwargs: Any) -> Any:
        if self.budget is not None:
            self.budget.check()
        try:
            return fn(self, *args, **kwargs)
        except UnsatisfiedAssumption:
            # reject(): the history showed a root cause a verify baseline accepts
            # (_unless_accepted). The example is set aside, not failed: recorded as a
            # failure, it would be reported as one nothing can reproduce.
            self.failed = True
            raise
        except Exception as exc:
            self.failed = True
            if self.budget is not None:
                self.budget.record_failure(exc)
            raise
        except BaseException:
            self.failed = True
            raise

    return cast(F, wrapper)


class Settling:
    """Waiting for quiescence and judging it (module doc); the harness's base."""

    world: World
    model: ContractModel
    adapter: RecordedPipeline
    timeout: float
    put_tries: int
    reproduce: str
    budget: Budget | None
    steps: list[str]
    failed: bool
    accepted_mark: int  # accepted.total() when the harness was built
    save_gate: Gate | None
    recv_gate: Gate | None
    _armed_builds: dict[str, deque[Gate]]
    _armed_puts: dict[str, deque[Gate]]
    _armed_gets: dict[str, deque[Gate]]
    _markers: int
    _failed_puts_settled: int  # the model's failed_puts when the last settle ended
    judge_each_settle: bool

    @step
    def settle(self, what: str) -> None:
        """Wait until the adapters have done what the model says, then run the oracles.

        When a thread cannot be observed idle (it is held, or injected put
        failures are pending), the counts get the full liveness timeout.
        """
        self.steps.append(what)
        if self.model.stopped:
            self._oracles(what, quiescent=False)
            return
        self._catch_gates(what)
        m = self.model
        if m.held_save is None and m.put_failures_pending == 0:
            self._await_marker(what)  # the SAVE thread finished what was saved before now
        if m.held_get is None:
            self._await_quiet_round(what)  # the RECV thread went round once with nothing new
        # Pending injected put failures, or failures met since the last settle: retries
        # may still run (R5 orders a request's chunks only, so the marker may pass a
        # chunk waiting for its retry), and the counts get the full liveness timeout;
        # otherwise both threads were just seen done or held.
        retrying = m.put_failures_pending > 0 or m.failed_puts > self._failed_puts_settled
        self._failed_puts_settled = m.failed_puts
        # The SAVE thread held at a gate while a chunk may wait for its retry behind it
        # (an adapter that parks it; the model retries in place): counts that still
        # differ after the wait are compared again at the next settle, once the gate is
        # released (the history keeps every record). The wait itself still happens: the
        # next step must find the adapter where the model is, as far as it can get.
        deferred = m.held_save is not None and retrying
        if deferred:
            self._failed_puts_settled = -1
        grace = GRACE if m.held_save is not None or not retrying else self.timeout
        if m.held_get is not None and m.gets_beside_held:
            grace = self.timeout  # gets beside the held one: no quiet round tells they are done
        history = self.world.history
        reached = history.wait_for(lambda c: differs(c, m) is not None, grace)
        diff = differs(history.counts_copy(), m)
        if diff not in (None, "equal") and self._gets_beside_held(history.counts_copy()):
            reached = history.wait_for(lambda c: differs(c, m) is not None, self.timeout)
            diff = differs(history.counts_copy(), m)
        if (not reached or diff != "equal") and not deferred:
            self._diagnose(what)
            self._fail(what, [count_violation(diff, history.counts_copy(), m, reached)])
        if self.judge_each_settle:
            self.judge(what)

    def _gets_beside_held(self, counts: Counts) -> bool:
        """Does the adapter get for other registrations while one get is held? The
        contract allows it (it orders a registration's own gets only); a model of that
        design explains *counts* where the one-RECV-thread model sees gets too many. If
        so the model learns it, for the rest of the run (``ContractModel.gets_beside_held``)."""
        m = self.model
        if m.held_get is None or m.gets_beside_held:
            return False
        other = copy.deepcopy(m)
        other.learn_gets_beside_held()
        if differs(counts, other) not in (None, "equal"):
            return False
        m.learn_gets_beside_held()
        return True

    @step
    def judge(self, what: str) -> None:
        """Every oracle on the history so far, and the puts in order against the model's.

        The harness runs it after each settle; the machine, once per rule (an
        invariant), which finds the same violations — the history keeps them —
        at a fraction of the cost of re-reading the history after every call.
        """
        self._oracles(what, quiescent=False)
        self._compare_sent(what)

    def _await_marker(self, what: str) -> None:
        """Save a final chunk for MARKER and wait for its put: the FIFO before it was
        taken (a chunk waiting for a put retry may still be due: see :meth:`settle`).
        Fails the step (R23) if the put does not come."""
        self._markers += 1
        obj = [MARKER, self._markers]
        self.model.save(MARKER, copy.deepcopy(obj), True)
        self.adapter.save_async(MARKER, obj, True)
        key = self.model.key(MARKER, 0)
        target = self.model.ok_puts[key]
        if not self.world.history.wait_for(
            lambda c: c.ok_puts[key] >= target or differs(c, self.model) not in (None, "equal"),
            self.timeout,
        ):
            self._diagnose(what)
            self._fail(
                what,
                [
                    Violation(
                        R23,
                        f"a chunk saved after this step ({obj!r}) was not put within "
                        f"{self.timeout}s: the SAVE thread is stuck or lost it",
                        MARKER,
                        key,
                    )
                ],
            )

    def _await_quiet_round(self, what: str) -> None:
        """Wait for a RECV round, begun after now, in which no get found anything (watch).
        Fails the step (R17) if none comes."""
        history = self.world.history
        start = history.tick()
        m = self.model
        if not history.wait_for(
            lambda c: c.quiet_since > start or differs(c, m) not in (None, "equal"),
            self.timeout,
        ):
            self._diagnose(what)
            self._fail(
                what,
                [
                    Violation(
                        R17,
                        f"the RECV thread did not complete an idle round over its polling "
                        f"queue within {self.timeout}s (the registered request {SENTINEL!r} "
                        "must be polled every round)",
                        SENTINEL,
                    )
                ],
            )

    def _catch_gates(self, what: str) -> None:
        """A hold the model expects must be reached by the adapter's thread in time."""
        m = self.model
        if m.held_save is not None and self.save_gate is None:
            held = m.held_save
            if held.stage == "build":
                gate = self._armed_builds[held.item.request_id].popleft()
                desc = f"the build of {held.item.snapshot!r} for {held.item.request_id!r}"
            else:
                assert held.key is not None
                gate = self._armed_puts[held.key].popleft()
                desc = f"the put of {held.key!r}"
            self.save_gate = gate
            if not gate.wait_started(self.timeout):
                self._diagnose(what)
                rule = R11 if held.item.is_final else R23
                self._fail(
                    what,
                    [
                        Violation(
                            rule,
                            f"{desc} never started (waited {self.timeout}s)",
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
                self._diagnose(what)
                self._fail(
                    what,
                    [
                        Violation(
                            R23,
                            f"the registration's get of {hg.key!r} never came "
                            f"(waited {self.timeout}s)",
                            hg.request_id,
                            hg.key,
                        )
                    ],
                )

    def _diagnose(self, what: str) -> None:
        """Before reporting a missing or extra action: poll once (recorded) so the
        oracles see what the receiver committed, and report their verdict if any:
        an oracle names the root cause; a count that is off is its consequence."""
        with contextlib.suppress(Exception):  # the oracles and the count check report
            self.adapter.poll_ready()
        self._oracles(what, quiescent=False)
        if accepted.active():
            # Under a verify baseline: what is missing may be an accepted bug's doing (a
            # cancelled final it drops reads as puts never made). The machine waited for
            # the adapter to go quiet, so judge the history as settled too; it only sets
            # the example aside when that shows an accepted violation (else the count's
            # own finding below stands, as without a baseline).
            check(self.world.history, quiescent=True, put_tries=self.put_tries)
            self._unless_accepted()

    def _oracles(self, what: str, *, quiescent: bool) -> None:
        violations = check(self.world.history, quiescent=quiescent, put_tries=self.put_tries)
        violations[:0] = self._deaths()
        if violations:
            self._fail(what, violations)
        self._unless_accepted()

    def _deaths(self) -> list[Violation]:
        """R22 for the first of the adapters' threads that died of an uncaught exception:
        the root of whatever its work left undone (the oracles' R11, R23 follow it)."""
        return [Violation(R22, died(crash)) for crash in self.world.deaths[:1]]

    def _unless_accepted(self) -> None:
        """End this example as telling nothing once its history showed a root cause a
        verify baseline accepts (:mod:`~chunk_adapter.oracles.accepted`): the adapter left
        the model there, so what the machine compares after it is that bug's consequence."""
        if accepted.total() != self.accepted_mark:
            self._set_aside()

    def _set_aside(self) -> None:
        if self.budget is not None:
            self.budget.set_aside_example()
        reject()

    def _compare_sent(self, what: str) -> None:
        ops = sorted(self.world.history.records(ConnectorOp), key=lambda o: o.begin)
        actual = [(o.key, o.value) for o in ops if o.op == "put" and o.outcome == "ok"]
        violation = sent_violation(self.model.sent, actual)
        if violation is not None:
            self._fail(what, [violation])

    def _fail(self, what: str, violations: list[Violation]) -> None:
        if accepted.covers(violations):
            self._set_aside()
        self._unless_accepted()
        recent = "; ".join(self.steps[-8:])
        context = f"  at step: {what}\n  recent steps: {recent}"
        if self.reproduce:
            context += f"\n  reproduce: {self.reproduce}"
        if self.budget is not None and self.budget.split_by_rule:
            raise violation_type(violations[0].rule)(violations, context)
        raise ContractViolation(violations, context)
