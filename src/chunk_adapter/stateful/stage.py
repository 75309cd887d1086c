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
  if it fails again with the same first rule; else ``inconclusive``.

The run happens on a helper thread the stage waits for until its deadline,
so the stage reports on time even if a call into the adapter never returns
(the verify worker's per-call watchdog names such a call).
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext
from .budget import Budget, Finding, first_rules

__all__ = ["STATEFUL_RULES", "plan", "run_stage"]

# What the machines check (docs/stateful.md: not timing, not bad input).
STATEFUL_RULES = tuple(f"R{i}" for i in (2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 23))
END_MARGIN = 1.0
"""Seconds before the deadline by which the stage has yielded its result."""
T = TypeVar("T")


def _name(profile: Any) -> str:
    p = profile
    return f"machines ({p.name}: {p.max_examples} examples x {p.step_count} steps)"


def plan(profile_name: str) -> list[str]:
    """The checks this stage runs under *profile_name* (for verify's "not reached" lines)."""
    from ..profiles import current_profile

    return [_name(current_profile(profile_name))]


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The Hypothesis state machines under the profile's settings, within ``ctx.deadline``."""
    from ..profiles import current_profile, hypothesis_settings
    from .api import make_machine, run_machine

    profile = current_profile(ctx.profile)
    name = _name(profile)
    if not ctx.wants(name):
        return
    ctx.announce(name)
    start = time.monotonic()
    end = ctx.deadline - END_MARGIN
    budget = Budget(end, seconds=ctx.seconds, liveness=profile.liveness_timeout)
    reproduce = f"{ctx.replay_prefix} --stage stateful"
    machine = make_machine(factory, reproduce=reproduce, budget=budget)
    finished, outcome = _on_thread(
        lambda: _run(lambda: run_machine(machine, hypothesis_settings(profile))), end
    )
    planned = profile.max_examples
    # Hypothesis may run a few more passing examples than max_examples (it counts
    # only some of them): the coverage says how many of the planned ones ran.
    coverage = f"{min(budget.done, planned)} of {planned} examples"

    def result(verdict: Any, evidence: str, **kw: Any) -> CheckResult:
        rules = kw.pop("rules", STATEFUL_RULES)
        return CheckResult(
            "stateful", name, rules, verdict, evidence, seconds=time.monotonic() - start, **kw
        )

    finding = _finding(budget, *(outcome if finished and outcome is not None else (None, "")))
    if finding is None:
        if not finished:
            yield result(
                "inconclusive",
                f"stateful: {coverage}; the example running at the deadline had not finished "
                "(no call into the adapter was seen stuck past its bound): give verify more "
                "time (--max-seconds)",
                coverage=coverage,
            )
        elif outcome is not None and outcome[0] is not None and not budget.aborted:
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
        else:
            yield result("pass", f"{name}: no violation ({coverage})", coverage=coverage)
        return
    yield _confirm(factory, ctx, profile.name, finding, end, result, coverage)


def _finding(
    budget: Budget, error: BaseException | None, printed: str
) -> tuple[Finding, str, bool] | None:
    """The failure to report: ``(finding, printed, shrunk)``, or ``None`` if nothing failed.

    Hypothesis's own report when the run ended with it (fully shrunk, with its
    blob); else the smallest failing example the budget recorded (shrinking
    was cut short at the budget, or Hypothesis gave up on it as flaky).
    """
    ours = isinstance(error, Exception) and not type(error).__module__.startswith("hypothesis")
    if ours and budget.findings:
        assert isinstance(error, Exception)
        blob = _printed_blob(printed)
        if blob is not None:
            seconds = max(f.seconds for f in budget.findings)
            return Finding(error, blob, 0, seconds), printed, True
    smallest = budget.smallest()
    if smallest is not None:
        return smallest, "", False
    if budget.findings:  # failures without a reproducer: reported as they are
        return budget.findings[0], "", False
    return None


def _confirm(
    factory: AdapterFactory,
    ctx: StageContext,
    profile: str,
    found: tuple[Finding, str, bool],
    end: float,
    result: Callable[..., CheckResult],
    coverage: str,
) -> CheckResult:
    """Re-run the shrunk example once; ``fail`` only if it fails again with the same first rule."""
    from .api import replay_example

    finding, printed, shrunk = found
    error = finding.error
    text = str(error)
    first = _headline(error)
    rules = first_rules(error)
    note = "" if shrunk else "\n(shrinking stopped at the stage's budget: steps not minimal)"
    if finding.blob is None:
        return result(
            "inconclusive",
            f"did not reproduce: found {first}, but this Hypothesis version gave no "
            "reproducer to re-run it with",
            rules=rules,
            detail=f"{text}\n{printed}{note}",
            coverage=coverage,
        )
    replay = (
        f"chunk-adapter replay 'stateful:{profile}:{finding.blob}' --adapter {ctx.adapter_spec}"
    )
    reproduce = f"{ctx.replay_prefix} --stage stateful"
    done, again = _on_thread(
        lambda: replay_example(factory, finding.blob or "", profile=profile, reproduce=reproduce),
        end,
    )
    if not done or again is None:
        return result(
            "inconclusive",
            f"did not reproduce: found {first}, but re-running the shrunk example did not "
            "finish within the stage's budget; re-run it with the replay command",
            rules=rules,
            detail=f"{text}\n{printed}{note}",
            replay=replay,
            coverage=coverage,
        )
    error_again, printed_again = again
    if error_again is None or not _same_first_rule(error, error_again):
        got = (
            "it passed"
            if error_again is None
            else f"it failed differently: {str(error_again).splitlines()[0]}"
        )
        return result(
            "inconclusive",
            f"did not reproduce: found {first}, but when the shrunk example was re-run {got}",
            rules=rules,
            detail=f"{text}\n{printed}{note}",
            replay=replay,
            coverage=coverage,
        )
    text_again = str(error_again)
    return result(
        "fail",
        _headline(error_again),
        rules=first_rules(error_again),
        detail=f"{text_again}\n{printed_again or printed}{note}",
        replay=replay,
        confirmation="re-ran the shrunk example: failed again",
        coverage=coverage,
    )


def _headline(error: BaseException) -> str:
    """One line for the report: the root-cause violation, else the error's first line."""
    violations = getattr(error, "violations", None)
    if isinstance(violations, list) and violations:
        return str(violations[0])
    text = str(error)
    return text.splitlines()[0] if text else repr(error)


def _same_first_rule(first: BaseException, again: BaseException) -> bool:
    """The same root-cause rule (or, for a failure naming no rule, the same exception type)."""
    a, b = first_rules(first), first_rules(again)
    if a or b:
        return a[:1] == b[:1]
    return type(first) is type(again)


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
