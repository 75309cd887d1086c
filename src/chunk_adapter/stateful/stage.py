"""The ``stateful`` stage of ``chunk-adapter verify``: the machines, within the stage's budget.

One Hypothesis run (search, then shrink) under a :class:`~.budget.Budget`:
it stops starting examples when only the reserve for confirming a finding is
left, and stops shrinking when only the time to re-run the shrunk example is
left. Then:

* no failure, every planned example ran: ``pass``;
* no failure, the budget ran out first: ``inconclusive``, with coverage
  ("87 of 150 examples") — a slow adapter is not a broken one;
* a failure: the shrunk example is **re-run once** from its reproducer (the
  blob ``chunk-adapter replay 'stateful:PROFILE:BLOB'`` takes). ``fail`` only
  if it fails again with the same first rule; else ``inconclusive``. A
  confirmed failure is re-run once more on the reference adapter (unless that
  is the adapter under test): failing there the same way, it judged the
  machine or the suite, not the adapter, and is ``inconclusive``. The
  report gives the steps as a pytest test that calls the user's factory
  (:mod:`.counterexample`), and the replay command.

Under ``verify --all`` (``ctx.run_all``) Hypothesis keeps one failure per
root rule (``Budget.split_by_rule``) and the stage reports each, confirmed
the same way. The check's name is always :data:`NAME` (stable for CI test
history); the profile's settings are in the evidence.

The run happens on a helper thread the stage waits for until its deadline,
so the stage reports on time even if a call into the adapter never returns
(the verify worker's per-call watchdog names such a call).

Over 400 lines, and one module because search, shrink, confirm and the inconclusive
verdicts share one budget object and one Hypothesis run; its length is the verdict
ladder, each branch with its reason.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

from ..confirm import Run, confirm
from ..errors import InvalidValue
from ..factory import AdapterFactory, calibration_reference
from ..finding import Finding
from ..oracles import ContractViolation
from ..outcome import (
    PASTE_BEGIN,
    PASTE_END,
    REFERENCE_PASSED,
    CheckResult,
    StageContext,
    Verdict,
    raised_by_suite,
    reference_also_failed,
    suite_error,
)
from ..rules import R2, R3, R4, R5, R6, R7, R8, R9, R10, R11, R12, R13, R14, R15, R16, R19, R22, R23
from .budget import MARGIN, SHRINK_WAIT, Budget, FailingExample, finding_of, headline
from .counterexample import as_pytest, cap_lines, other_output, steps_of
from .minimize import Step, encode, minimize, parse, run_steps, same_failure, shown
from .reproduce import STATEFUL

__all__ = ["NAME", "STATEFUL_RULES", "plan", "run_stage"]

# What the machines check (docs/stateful.md: not pacing, not bad input; R3's timing only
# for a call made while a gate holds the adapter's work).
STATEFUL_RULES = (
    R2, R3, R4, R5, R6, R7, R8, R9, R10, R11, R12, R13, R14, R15, R16, R19, R22, R23,
)  # fmt: skip
NAME = "machines"
"""The stage's one check, under every profile and verdict."""
END_MARGIN = 1.0
"""Seconds before the deadline by which the stage has yielded its result."""
T = TypeVar("T")


def _settings(profile: Any) -> str:
    p = profile
    return f"{p.name}: {p.max_examples} examples x {p.step_count} steps"


def plan(profile_name: str) -> list[tuple[str, tuple[str, ...]]]:
    """The checks this stage runs under *profile_name*, with their rules (for verify's
    "not reached" lines)."""
    return [(NAME, STATEFUL_RULES)]


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The Hypothesis state machines under the profile's settings, within ``ctx.deadline``."""
    from hypothesis import settings as Settings

    from ..profiles import current_profile, hypothesis_settings
    from .api import make_machine, run_machine

    profile = current_profile(ctx.profile)
    name = NAME
    if not ctx.wants(name):
        return
    ctx.announce(name)
    start = time.monotonic()
    end = ctx.deadline - END_MARGIN
    planned = profile.max_examples
    budget = Budget(
        end,
        seconds=ctx.seconds,
        liveness=profile.liveness_timeout,
        split_by_rule=ctx.run_all,
        planned=planned,
    )
    reproduce = f"{ctx.replay_prefix} --stage stateful"
    machine = make_machine(factory, reproduce=reproduce, budget=budget)
    settings = hypothesis_settings(profile)
    if ctx.run_all:  # keep one failure per root rule, not only the first
        settings = Settings(settings, report_multiple_bugs=True)
    finished, outcome = _on_thread(lambda: _run(lambda: run_machine(machine, settings)), end)
    # Hypothesis may run a few more passing examples than max_examples (it counts
    # only some of them): the coverage says how many of the planned ones ran. Under a
    # verify baseline an example that showed an accepted root cause ran too, and is
    # counted, set aside (Budget.set_aside_example).
    coverage = f"{min(budget.done + budget.set_aside, planned)} of {planned} examples"
    if budget.set_aside:
        coverage += f" ({budget.set_aside} set aside: a root cause the baseline accepts)"

    def result(verdict: Any, evidence: str, **kw: Any) -> CheckResult:
        rules = kw.pop("rules", STATEFUL_RULES)
        return CheckResult(
            "stateful", name, rules, verdict, evidence, seconds=time.monotonic() - start, **kw
        )

    findings = _findings(budget, *(outcome if finished and outcome is not None else (None, "")))
    if not findings:
        if not finished:
            yield result(
                "inconclusive",
                f"stateful: {coverage}; the example running at the deadline had not finished "
                "(no call into the adapter was seen stuck past its bound): give verify more "
                "time (--max-seconds)",
                coverage=coverage,
            )
        elif (
            outcome is not None and outcome[0] is not None and not (budget.aborted or budget.enough)
        ):
            error = outcome[0]
            yield result(
                "inconclusive",
                f"the machines stopped with {type(error).__name__}: {error} — not a verdict on "
                "the adapter",
                detail=outcome[1],
                coverage=coverage,
            )
        elif budget.aborted:
            yield result(
                "inconclusive",
                f"stateful: {coverage} ran before the stage's budget ran out, with no "
                "violation; the rest did not run. Give verify more time (--max-seconds)",
                coverage=coverage,
            )
        else:  # Hypothesis ended, or Enough did (the planned examples ran)
            yield result(
                "pass", f"{name} ({_settings(profile)}): no violation ({coverage})",
                coverage=coverage,
            )  # fmt: skip
        return
    for index, finding in enumerate(findings):  # several only under --all: share the time
        until = time.monotonic() + (end - time.monotonic()) / (len(findings) - index)
        yield _confirm(factory, ctx, profile, finding, until, start, coverage)


def _findings(
    budget: Budget, error: BaseException | None, printed: str
) -> list[tuple[FailingExample, str, bool]]:
    """The failures to report: ``(finding, printed, shrunk)`` each; ``[]`` if nothing failed.

    Hypothesis's own report when the run ended with it (fully shrunk, with its
    blob; under ``--all`` an exception group, one per root rule); else the
    smallest failing example the budget recorded (per root rule under
    ``--all``): shrinking was cut short at the budget, or Hypothesis gave up on
    it as flaky.
    """
    inner = getattr(error, "exceptions", None)  # an exception group (``--all``)
    errors = list(inner) if isinstance(inner, tuple) else [error]
    found = []
    for one in errors:
        ours = isinstance(one, Exception) and not type(one).__module__.startswith("hypothesis")
        if not (ours and budget.findings):
            continue
        assert isinstance(one, Exception)
        notes = "\n".join(getattr(one, "__notes__", []))
        text = printed if len(errors) == 1 else notes
        blob = _printed_blob(text)
        if blob is not None:
            seconds = max(f.seconds for f in budget.findings)
            found.append((FailingExample(one, blob, 0, seconds), text, True))
    if found:
        return found
    rules = dict.fromkeys(f.rules[:1] for f in budget.findings) if budget.split_by_rule else {}
    smallest = [budget.smallest(r[0] if r else None) for r in rules] or [budget.smallest()]
    kept = [(f, "", False) for f in smallest if f is not None]
    if kept:
        return list({id(f): (f, p, s) for f, p, s in kept}.values())
    if budget.findings:  # failures without a reproducer: reported as they are
        return [(budget.findings[0], "", False)]
    return []


def _confirm(
    factory: AdapterFactory,
    ctx: StageContext,
    profile: Any,
    found: tuple[FailingExample, str, bool],
    end: float,
    start: float,
    coverage: str,
) -> CheckResult:
    """Re-run the shrunk example once; ``fail`` only if it fails again with the same first rule."""
    from .api import replay_example

    example, printed, shrunk = found
    error = example.error
    note = "" if shrunk else "(shrinking stopped at the stage's budget: steps not minimal)"
    finding = replace(example.finding, evidence=_detail(error, printed, note, ctx, profile))
    first = headline(error)

    def result(verdict: Verdict, finding: Finding, evidence: str, **kw: Any) -> CheckResult:
        return CheckResult.of_finding(
            "stateful", NAME, verdict, finding, evidence=evidence,
            seconds=time.monotonic() - start, coverage=coverage, **kw,
        )  # fmt: skip

    unconfirmed = replace(finding, reproducer=None)  # the blob is not a replay command
    if not isinstance(error, ContractViolation) and raised_by_suite(error):
        return result("inconclusive", unconfirmed, suite_error(error), rules=())
    if example.blob is None:
        return result(
            "inconclusive",
            unconfirmed,
            f"did not reproduce: found {first}, but this Hypothesis version gave no "
            "reproducer to re-run it with",
        )
    finding = replace(
        finding,
        reproducer=STATEFUL.command(profile.name, example.blob, adapter_spec=ctx.adapter_spec),
    )
    reproduce = f"{ctx.replay_prefix} --stage stateful"
    runs: dict[str, tuple[Exception | None, str]] = {}

    def again(adapter: AdapterFactory, who: str) -> Callable[[], Run | None]:
        def run_it() -> Run | None:
            done, outcome = _on_thread(
                lambda: replay_example(
                    adapter, example.blob or "", profile=profile.name, reproduce=reproduce
                ),
                end,
            )
            if not done or outcome is None:
                return None  # it did not finish within the stage's budget
            runs[who] = outcome
            return shown(outcome[0])

        return run_it

    reference = calibration_reference(factory)
    judged = confirm(
        finding,
        again(factory, "adapter"),
        None if reference is None else again(reference, "reference"),
    )
    if judged.why == "not re-run":
        return result(
            "inconclusive",
            finding,
            f"did not reproduce: found {first}, but re-running the shrunk example did not "
            "finish within the stage's budget; re-run it with the replay command",
        )
    if judged.why == "not reproduced":
        error_again = runs["adapter"][0]
        got = (
            "it passed"
            if error_again is None
            else f"it failed differently: {str(error_again).splitlines()[0]}"
        )
        return result(
            "inconclusive",
            finding,
            f"did not reproduce: found {first}, but when the shrunk example was re-run {got}",
        )
    if judged.why == "reference failed":
        reference_error = runs["reference"][0]
        assert reference_error is not None
        return result(
            "inconclusive", finding, reference_also_failed(first, headline(reference_error))
        )
    error_again, printed_again = runs["adapter"]
    assert error_again is not None
    confirmation = "re-ran the shrunk example: failed again"
    confirmation += REFERENCE_PASSED if judged.reference_passed else ""
    lines = steps_of(printed_again or printed)
    replay = finding.reproducer
    smaller = _shrink_steps(factory, profile, lines, error_again, end, example.seconds, reproduce)
    if smaller is not None:
        steps, error_small, complete = smaller
        lines, error_again = [str(s) for s in steps], error_small
        note = (
            "" if complete else "(the stage's budget ended the shrinking: steps may not be minimal)"
        )
        replay = STATEFUL.command(profile.name, encode(steps), adapter_spec=ctx.adapter_spec)
        confirmation += f"; so did its {len(steps)} step(s), shrunk further and run again"
    confirmed = replace(
        finding_of(error_again, replay),
        evidence=_detail(error_again, printed_again or printed, note, ctx, profile, lines),
    )
    return result("fail", confirmed, headline(error_again), confirmation=confirmation)


def _shrink_steps(
    factory: AdapterFactory,
    profile: Any,
    lines: list[str],
    error: Exception,
    end: float,
    seconds: float,
    reproduce: str,
) -> tuple[list[Step], Exception, bool] | None:
    """The steps *lines* shrunk further (:func:`.minimize.minimize`, waits bounded by
    ``SHRINK_WAIT``) and then re-run with the profile's full liveness bound: the steps,
    the failure they gave again and whether no single step can be removed; ``None`` when
    they cannot be parsed, nothing was gained, or they did not fail the same way with the
    full bound."""
    try:
        steps = [parse(line) for line in lines]
    except InvalidValue:
        return None
    if not steps:
        return None
    wait = min(profile.liveness_timeout, SHRINK_WAIT)

    def fails(candidate: list[Step]) -> bool:
        return same_failure(
            error, run_steps(factory, candidate, liveness_timeout=wait, reproduce=reproduce)
        )

    # Keep room for the final run with the full bound (it may wait that long once).
    until = end - seconds - profile.liveness_timeout - MARGIN
    done, small = _on_thread(lambda: minimize(steps, fails, until), until + 1.0)
    if not done or small is None or (len(small.steps) == len(steps) and not small.complete):
        return None
    done, again = _on_thread(
        lambda: run_steps(
            factory, small.steps, liveness_timeout=profile.liveness_timeout, reproduce=reproduce
        ),
        end,
    )
    if not done or again is None or not same_failure(error, again):
        return None
    return small.steps, again, small.complete


def _detail(
    error: BaseException,
    printed: str,
    note: str,
    ctx: StageContext,
    profile: Any,
    steps: list[str] | None = None,
) -> str:
    """The counterexample as reported: the violation, the steps as a pytest test that
    calls the user's factory, and the adapter's output (capped)."""
    parts = [cap_lines(str(error), head=40, tail=10)]
    steps = steps_of(printed) if steps is None else steps
    if steps:
        parts.append(
            f"Counterexample: {len(steps)} step(s) ({_settings(profile)}). As a pytest test — "
            "save it as test_counterexample.py and run `python -m pytest "
            "test_counterexample.py` (it fails while the bug is there):"
        )
        parts.append(f"{PASTE_BEGIN}test_counterexample.py -----")
        parts.append(as_pytest(ctx.adapter_spec, steps, liveness_timeout=profile.liveness_timeout))
        parts.append(PASTE_END)
    if note:
        parts.append(note)
    output = other_output(printed)
    if output.strip():
        parts.append("Output captured while the example ran (capped):\n" + cap_lines(output))
    return "\n".join(parts)


def _run(fn: Callable[[], None]) -> tuple[BaseException | None, str]:
    """Run the machines; the exception they ended with (``None`` if none) and what was printed."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            fn()
    except BaseException as exc:  # a violation, the budget, or Hypothesis giving up
        # Hypothesis attaches the shrunk steps and the blob as notes to the exception.
        return exc, printed.getvalue() + "\n".join(getattr(exc, "__notes__", []))
    return None, printed.getvalue()


def _on_thread(fn: Callable[[], T], until: float) -> tuple[bool, T | None]:
    """Run *fn* on a daemon thread; ``(finished, result)`` by the ``monotonic()`` time *until*."""
    box: list[T] = []  # fn never raises here: _run and replay_example return what happened
    thread = threading.Thread(target=lambda: box.append(fn()), name="stateful-run", daemon=True)
    thread.start()
    thread.join(max(0.0, until - time.monotonic()))
    return (True, box[0]) if box else (False, None)


def _printed_blob(printed: str) -> str | None:
    """The blob of Hypothesis's ``@reproduce_failure('version', b'blob')`` line, if printed."""
    import re

    match = re.search(r"@reproduce_failure\('[^']+', b'([^']+)'\)", printed)
    return match.group(1) if match else None
