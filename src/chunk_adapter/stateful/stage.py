"""The ``stateful`` stage of ``chunk-adapter verify``: the machines, found then shrunk."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext, rules_named_in

__all__ = ["STATEFUL_RULES", "run_stage"]


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The Hypothesis state machines under the profile's settings.

    First without shrinking, so a violation is known fast; then, within what is
    left of the stage's budget, again with shrinking for a minimal example
    (shrinking a liveness failure costs a full wait per try, and may not fit).
    """
    import threading

    from hypothesis import Phase, settings

    from ..profiles import current_profile, hypothesis_settings

    profile = current_profile(ctx.profile)
    name = (
        f"machines ({profile.name}: {profile.max_examples} examples x {profile.step_count} steps)"
    )
    ctx.announce(name)
    start = time.monotonic()
    full = hypothesis_settings(profile)
    search = settings(full, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    found = _run_machines(factory, search, ctx)
    if found is None:
        yield CheckResult(
            "stateful", name, STATEFUL_RULES, "pass", f"{name}: no violation",
            seconds=time.monotonic() - start,
        )  # fmt: skip
        return
    shrunk: list[tuple[BaseException, str] | None] = []
    worker = threading.Thread(
        target=lambda: shrunk.append(_run_machines(factory, full, ctx)), daemon=True
    )
    worker.start()
    worker.join(max(0.0, ctx.seconds - (time.monotonic() - start) - 3.0))
    exc, printed = shrunk[0] if shrunk and shrunk[0] is not None else found
    if not shrunk:
        printed += "\n(shrinking did not finish within the stage's budget: steps not minimal)"
    text = str(exc)
    blob = _reproduce_blob(printed)
    yield CheckResult(
        "stateful",
        name,
        rules_named_in(text.splitlines()[0] if text else "") or rules_named_in(text),
        "fail",
        text.splitlines()[0] if text else repr(exc),
        detail=f"{text}\n{printed}",
        replay=(
            f"chunk-adapter replay 'stateful:{profile.name}:{blob}' --adapter {ctx.adapter_spec}"
            if blob
            else f"{ctx.replay_prefix} --stage stateful"
        ),
        seconds=time.monotonic() - start,
    )


def _run_machines(
    factory: AdapterFactory, hypothesis_settings: Any, ctx: StageContext
) -> tuple[BaseException, str] | None:
    """Run the machines once; the failure and what Hypothesis printed, or ``None``."""
    import contextlib
    import io

    from ..stateful import run_conformance

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            run_conformance(
                factory, hypothesis_settings, reproduce=f"{ctx.replay_prefix} --stage stateful"
            )
    except Exception as exc:  # a violation (AssertionError) or the adapter raising
        # Hypothesis attaches the shrunk steps and the blob as notes to the exception.
        return exc, printed.getvalue() + "\n".join(getattr(exc, "__notes__", []))
    return None


# What the machines check (docs/stateful.md: not timing, not bad input).
STATEFUL_RULES = tuple(f"R{i}" for i in (2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 23))


def _reproduce_blob(printed: str) -> str | None:
    """The blob of Hypothesis's ``@reproduce_failure('version', b'blob')`` line, if printed."""
    import re

    match = re.search(r"@reproduce_failure\('[^']+', b'([^']+)'\)", printed)
    return match.group(1) if match else None
