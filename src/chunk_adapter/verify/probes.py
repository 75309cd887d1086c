"""The first, cheapest verify stage: the worked examples and one probe per risky rule.

Each probe drives a fresh pair of adapters through one short scripted scenario
(gates, not sleeps, force the interleavings) and raises
:class:`~chunk_adapter.oracles.violations.ContractViolation` carrying the rule
when the adapter does something the contract forbids. Every adapter call is
bounded (:func:`~chunk_adapter.bed.waiting.call_bounded`): a call or a wait that
runs out is a :class:`~chunk_adapter.bed.waiting.Hang`, which carries its rules
too. The stage reads rules from these exceptions' data, never from their messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ..bed.crashes import died, thread_crashes
from ..bed.stack import Bed, SlowFactory
from ..bed.waiting import (
    STOP_RULES,
    Hang,
    Raised,
    call_bounded,
    holds_for,
    stopping,
    wait_until,
)
from ..confirm import Confirmed, Run, confirm
from ..connectors import RecordingConnector
from ..examples import ARRIVE, CALL, EXAMPLES, FACTORY, ExampleOutcome
from ..factory import AdapterFactory, calibration_reference
from ..finding import Finding, first_line
from ..history import BuildCall
from ..oracles import accepted
from ..oracles.violations import ContractViolation, rules_in_order
from ..outcome import REFERENCE_PASSED, raised_by_suite, reference_also_failed, suite_error
from ..rules import R7, R12, R16, R17, R18, R19, R21, R22, R23, R24
from ..stress.verdicts import UNKNOWN_JOIN_STOP_BOUND
from .leaks import Undecided, probe_bounded_state
from .probes_handoff import probe_prompt_handoff
from .probes_input import probe_bad_input
from .probes_throughput import probe_independent_builds, probe_quiet_polling
from .result import CheckResult

__all__ = ["PROBES", "run_probes"]

STOP_IDLE = 0.5  # s: idle stop() should take well under 0.1 s (R18)
# s: stop() with a build blocked forever (R18): the bound the stress stage uses for a join
# timeout it cannot read, so the two stages never disagree about one adapter.
STOP_BLOCKED = UNKNOWN_JOIN_STOP_BOUND

Probe = Callable[[AdapterFactory], None]
Ran = tuple[str, str, tuple[str, ...], str]
"""One run of a check: ``(verdict, evidence, rules, detail)``."""
Check = Callable[[AdapterFactory], Ran]


def _got_ok_get(conn: RecordingConnector, key: str) -> bool:
    return any(op.op == "get" and op.key == key and op.outcome == "ok" for op in conn.ops())


def probe_stop(factory: AdapterFactory) -> None:
    """R18, R19: idle stop is prompt and idempotent; afterwards calls fail or still work."""
    bed = Bed(record=True)
    conn = bed.recording
    snd = bed.adapter(factory, bound=FACTORY, stage_id=0)
    rcv = bed.adapter(factory, bound=FACTORY, stage_id=1)
    call_bounded(lambda: rcv.load_async("s"), CALL, "load_async('s')")
    call_bounded(lambda: snd.save_async("s", "x", True), CALL, "save_async('s', 'x', True)")
    wait_until(lambda: _got_ok_get(conn, "s_0_0"), ARRIVE, "the get of s_0_0")
    for adapter in (snd, rcv):
        start = time.monotonic()
        call_bounded(adapter.stop, STOP_IDLE, "stop() of an idle adapter", rules=STOP_RULES)
        call_bounded(adapter.stop, STOP_IDLE, "a second stop()", rules=STOP_RULES)
        assert time.monotonic() - start < STOP_IDLE * 2
    for text, call in [
        ("save_async", lambda: snd.save_async("t", 1, False)),
        ("cancel_sender", lambda: snd.cancel_sender("t")),
        ("load_async", lambda: rcv.load_async("t")),
    ]:
        try:
            call_bounded(call, CALL, f"{text} after stop()")
        except RuntimeError:
            continue
        raise ContractViolation.of(R19, f"{text} after stop() did not raise RuntimeError")
    ready: dict[str, Any] = {}
    wait_until(  # the get returned before stop; its commit may lag a moment
        lambda: bool(ready.update(call_bounded(rcv.poll_ready, CALL, "poll_ready()")) or ready),
        CALL,
        "poll_ready after stop() handing out the chunk received before it",
        rules=(R19,),
    )
    if ready != {"s": [{"data": "x", "finished": True}]}:
        raise ContractViolation.of(R19, f"poll_ready gave {ready}")
    call_bounded(lambda: rcv.cleanup_receiver("s"), CALL, "cleanup_receiver after stop()")


def probe_cleanup_fence(factory: AdapterFactory) -> None:
    """R16: a value whose get was in flight across cleanup_receiver never shows up."""
    bed = Bed(gated=True, record=True)
    gated, conn = bed.gated, bed.recording
    snd = bed.adapter(factory, bound=FACTORY, stage_id=0)
    rcv = bed.adapter(factory, bound=FACTORY, stage_id=1)
    with stopping(snd, rcv, seconds=STOP_BLOCKED, first=bed.release_all):
        call_bounded(lambda: snd.save_async("c", "old", False), CALL, "save_async('c', 'old')")
        wait_until(lambda: "c_0_0" in conn.puts, ARRIVE, "the put of c_0_0")
        gate = gated.hold_get("c_0_0")
        call_bounded(lambda: rcv.load_async("c"), CALL, "load_async('c')")
        if not gate.wait_started(ARRIVE):
            raise ContractViolation.of(R23, "the receiver never asked for c_0_0")
        call_bounded(lambda: rcv.cleanup_receiver("c"), CALL, "cleanup_receiver('c')")
        gate.release()
        wait_until(lambda: _got_ok_get(conn, "c_0_0"), ARRIVE, "the held get returning")
        # Let the RECV thread finish what it does with that value: one more round trip.
        call_bounded(lambda: snd.save_async("d", "probe", True), CALL, "save_async('d', ...)")
        call_bounded(lambda: rcv.load_async("d"), CALL, "load_async('d')")
        seen: dict[str, list[Any]] = {}

        def arrived(request_id: str) -> bool:
            for rid, chunks in call_bounded(rcv.poll_ready, CALL, "poll_ready()").items():
                seen.setdefault(rid, []).extend(chunks)
            return request_id in seen

        wait_until(lambda: arrived("d"), ARRIVE, "the chunk of 'd'")
        if "c" in seen:
            raise ContractViolation.of(
                R16,
                f"poll_ready handed out {seen['c']} for 'c' after cleanup_receiver('c') "
                "returned (its get was in flight during the cleanup)",
            )
        call_bounded(lambda: rcv.load_async("c"), CALL, "load_async('c') again")
        wait_until(lambda: arrived("c"), ARRIVE, "c_0_0 for the new registration")
        if seen["c"] != [{"data": "old", "finished": False}]:
            raise ContractViolation.of(
                R16, f"a new registration of 'c' got {seen['c']}, expected chunk 0 once"
            )


def probe_stop_blocked_build(factory: AdapterFactory) -> None:
    """R18: stop() returns within its join timeout while a build is blocked forever."""
    bed = Bed(record=True)
    conn = bed.recording
    builder = bed.builder()
    gate = builder.hold("x")
    snd = bed.adapter(factory, bound=FACTORY, stage_id=0, build_payload=builder)
    try:
        call_bounded(lambda: snd.save_async("x", 1, True), CALL, "save_async('x', 1, True)")
        if not gate.wait_started(ARRIVE):
            raise ContractViolation.of(R23, "the build of 'x' never started")
        call_bounded(
            snd.stop, STOP_BLOCKED, "stop() while a build is blocked forever", rules=STOP_RULES
        )
    finally:
        bed.release_all()
    wait_until(lambda: bool(conn.history.records(BuildCall)), CALL, "the released build returning")
    # A put would follow the build within microseconds; give it half a second to show.
    if not holds_for(lambda: not conn.puts, 0.5):
        raise ContractViolation.of(R18, f"{conn.puts} put after stop() returned")


PROBES: tuple[tuple[str, tuple[str, ...], Probe], ...] = (
    ("bad input", (R21,), probe_bad_input),
    ("stop and after", (R18, R19), probe_stop),
    ("cleanup fence", (R16, R12), probe_cleanup_fence),
    ("stop with a blocked build", (R18,), probe_stop_blocked_build),
    ("independent builds", (R7, R17), probe_independent_builds),
    ("prompt hand-off", (R17,), probe_prompt_handoff),
    ("quiet polling", (R17,), probe_quiet_polling),
    ("bounded state", (R24,), probe_bounded_state),
)
"""The probes in the order they run: cheapest first. The bounded-state probe runs
thousands of request ids through the adapter; it goes last, because on a receiver that
stalls it alone takes most of the stage's budget (43 s with a 0.5 s re-poll), while the
probes before it decide such an adapter in seconds (they ran after it until issue 11,
and a stalling receiver was then named by the stress stage, 80 s in)."""


def _finding(exc: Exception, rules: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    """``(verdict, evidence, rules)`` for an exception out of a check planned for *rules*.

    The rules come from the exception's data, never from its message. A
    :class:`ContractViolation` carries its violations' rules (each with its
    consequences). A :class:`Hang` carries the rules its caller named; one that
    named none is R3 for a call that did not return (a scheduler call must not
    block) and R23 for a wait that ran out (something that must happen did
    not). A :class:`Raised` (a call that must return raised) carries its rules.
    A :class:`SlowFactory` decides nothing (inconclusive). Any other
    ``AssertionError`` (a bare ``assert`` of the check's, or the adapter's own)
    fails under the check's planned *rules*. Any other exception is the adapter
    raising where no call may raise: a failure without a rule, unless it was
    raised through the suite's code alone (inconclusive). :class:`~.leaks.Undecided`
    is inconclusive, or not reached (skip) where what kept it from deciding is a
    violation of rules a verify baseline accepts.
    """
    if isinstance(exc, Undecided):  # a check that could not decide: never a violation
        if accepted.accepts_all(exc.blocked_by):
            return "skip", (
                f"not reached: {exc} (a root cause the baseline accepts, "
                f"{', '.join(exc.blocked_by)}, kept the check from deciding)"
            ), rules  # fmt: skip
        return "inconclusive", str(exc), rules
    if isinstance(exc, SlowFactory):
        return "inconclusive", f"{exc}: too slow to check here, not a violation", ()
    if isinstance(exc, Hang):
        return "fail", str(exc), exc.broken
    if isinstance(exc, Raised):  # a call that must return raised: the rules it keeps
        return "fail", str(exc), exc.rules
    if isinstance(exc, ContractViolation):
        return "fail", str(exc), tuple(rules_in_order(exc.violations, also=True)) or rules
    if isinstance(exc, AssertionError):
        return "fail", str(exc), rules
    if raised_by_suite(exc):  # no adapter or factory code ran where it was raised
        return "inconclusive", suite_error(exc), ()
    return "fail", f"the adapter raised {exc!r}", ()


def _shown(name: str, ran: Ran) -> Run:
    """What a run of the check *name* showed, as :func:`~chunk_adapter.confirm.confirm`
    compares it: its finding when it failed (:func:`_found`), else none."""
    verdict, evidence, rules, detail = ran
    return (_found(name, evidence, rules, detail),) if verdict == "fail" else ()


def _found(
    name: str, evidence: str, rules: tuple[str, ...], detail: str, replay: str | None = None
) -> Finding:
    """A failure of the check *name* as a :class:`~chunk_adapter.finding.Finding`. Its kind
    is the check: a failure naming no rule (the adapter raising) is the same failure as
    any failure of that check again."""
    return Finding(rules, name, first_line(evidence), detail, replay)


def _example_check(example: Callable[[AdapterFactory], ExampleOutcome]) -> Check:
    def run(factory: AdapterFactory) -> Ran:
        try:
            outcome = example(factory)
        except Exception as exc:  # AssertionError or Hang: a finding; anything else: it raised
            verdict, evidence, rules = _finding(exc, ())
            return verdict, evidence, rules, ""
        found = outcome.finding
        if found is None:
            return "pass", outcome.title, outcome.rules, "\n".join(outcome.lines)
        return "fail", found.message, found.rules, found.evidence

    return run


def _probe_check(probe: Probe, rules: tuple[str, ...]) -> Check:
    def run(factory: AdapterFactory) -> Ran:
        try:
            probe(factory)
        except Exception as exc:  # AssertionError or Hang: a finding; anything else: it raised
            verdict, evidence, named = _finding(exc, rules)
            return verdict, evidence, named, ""
        return "pass", probe.__doc__ or "", rules, ""

    return run


def _watching(check: Check) -> Check:
    """*check*, watching the threads the adapters start (``threading.excepthook``): when it
    fails and one of them died of an uncaught exception, R22 is named first — the death is
    the root of what the check then missed (a chunk never received, a put that never
    came). A death in a check that passed changes nothing here (stress judges deaths)."""

    def run(factory: AdapterFactory) -> Ran:
        with thread_crashes(chain=True, since_now=True) as deaths:
            verdict, evidence, rules, detail = check(factory)
        if verdict != "fail" or not deaths:
            return verdict, evidence, rules, detail
        first = f"R22: {died(deaths[0])}"
        return verdict, f"{first}; then {evidence}", (R22, *(r for r in rules if r != R22)), detail

    return run


def _confirm(
    check: Check, factory: AdapterFactory, first: Finding
) -> tuple[Confirmed, dict[str, Ran]]:
    """*first*, a failure of *check*, confirmed on fresh adapters and calibrated on the
    reference (:mod:`chunk_adapter.confirm`); with the last run of each (``"adapter"``,
    ``"reference"``), whose evidence the report quotes."""
    reference = calibration_reference(factory)
    runs: dict[str, Ran] = {}

    def again(adapter: AdapterFactory, who: str) -> Callable[[], Run | None]:
        def run_it() -> Run | None:
            runs[who] = ran = check(adapter)
            if who == "reference" and ran[0] not in ("pass", "fail"):
                return None  # the reference's run did not decide: it says nothing
            return _shown(first.kind, ran)

        return run_it

    judged = confirm(
        first,
        again(factory, "adapter"),
        None if reference is None else again(reference, "reference"),
    )
    return judged, runs


def run_probes(
    factory: AdapterFactory,
    replay: str,
    announce: Callable[[str], None] = lambda name: None,
    wants: Callable[[str], bool] = lambda name: True,
    *,
    keep_going: bool = False,
) -> Iterator[CheckResult]:
    """The examples stage: Examples 2 and 3, then the probes; every failure named by rule.

    A failing check is confirmed as every stage confirms one
    (:mod:`chunk_adapter.confirm`): run once more on fresh adapters, it must break its
    root rule again (else ``inconclusive``: seen once), and the reference adapter
    (unless that is the adapter under test) must not fail it (else the check judged
    the machine, not the adapter: ``inconclusive``). The stage ends at its
    first confirmed failure (the rest would mostly repeat it, and a hanging adapter
    makes each check cost its bounds), unless *keep_going* (``verify --all``): then
    every check runs.
    """
    checks: list[tuple[str, Check]] = [
        (example.__name__.replace("_", " "), _watching(_example_check(example)))
        for example in EXAMPLES
    ]
    checks += [(name, _watching(_probe_check(probe, rules))) for name, rules, probe in PROBES]
    for name, check in checks:
        if not wants(name):  # the caller runs some checks alone
            continue
        announce(name)
        start = time.monotonic()
        verdict, evidence, rules, detail = check(factory)
        if verdict != "fail":
            yield CheckResult(
                "examples", name, rules, verdict, evidence,  # type: ignore[arg-type]
                detail=detail if verdict != "pass" else "", seconds=time.monotonic() - start,
            )  # fmt: skip
            continue
        first = _found(name, evidence, rules, detail, replay)
        result = _judge(check, factory, name, first, evidence, start)
        yield result
        if result.verdict == "fail" and not keep_going:
            return


def _judge(
    check: Check, factory: AdapterFactory, name: str, first: Finding, evidence: str, start: float
) -> CheckResult:
    """The result of the check *name* that failed: *first* confirmed (``fail``), or
    ``inconclusive``. *evidence* is the check's own, whole (its first line is the
    finding's message: a contract violation of several rules lists each on a line)."""
    judged, runs = _confirm(check, factory, first)
    if judged.verdict == "fail":
        confirmation = "ran the check again on fresh adapters: failed the same way"
        confirmation += REFERENCE_PASSED if judged.reference_passed else ""
        return CheckResult.of_finding(
            "examples", name, "fail", first, evidence=evidence,
            seconds=time.monotonic() - start, confirmation=confirmation,
        )  # fmt: skip
    if judged.why == "reference failed":
        evidence = reference_also_failed(evidence, runs["reference"][1])
    else:
        verdict, said = runs["adapter"][:2]
        evidence = (
            f"seen once, not confirmed on a second run (which gave "
            f"{verdict}{': ' + said if verdict != 'pass' else ''}): {evidence}"
        )
    return CheckResult.of_finding(
        "examples", name, "inconclusive", replace(first, reproducer=None),
        evidence=evidence, seconds=time.monotonic() - start,
    )  # fmt: skip
