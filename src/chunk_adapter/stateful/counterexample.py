"""A shrunk stateful counterexample as something to paste: a pytest test, and capped output.

Hypothesis prints a failing state machine as Python (``state = Machine()``,
one ``state.rule(...)`` line per step). The machine class it names exists only
inside the run (``make_machine`` builds it), so :func:`as_pytest` rewrites
those steps into a test module that builds the same machine from the user's
own factory and runs the steps in order: saved to a file and run with
``python -m pytest FILE`` it fails while the bug is there and passes once it is
fixed (the steps' outcome depends only on the steps before them).

What the adapter logged while the examples ran is kept, capped to its first
and last lines (:func:`cap_lines`): a traceback per injected fault would
otherwise bury the counterexample.
"""

from __future__ import annotations

import re

__all__ = ["HEAD", "TAIL", "as_pytest", "cap_lines", "other_output", "steps_of"]

HEAD = 15
"""Lines of captured adapter output kept from the start."""
TAIL = 15
"""Lines of captured adapter output kept from the end."""

_STATE = re.compile(r"^\s*state = \w+\(\)\s*$")
_STEP = re.compile(r"^\s*state\.(\w+)\(.*\)\s*$")
_NOISE = re.compile(
    r"^\s*(Falsifying example:.*|You can reproduce this example by temporarily adding "
    r"@reproduce_failure.*|@reproduce_failure\(.*|Trying example:.*)$"
)
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def steps_of(printed: str) -> list[str]:
    """The ``state.rule(...)`` lines of the last falsifying example Hypothesis printed,
    without ``teardown()`` (the generated test always runs it)."""
    lines = printed.splitlines()
    starts = [i for i, line in enumerate(lines) if _STATE.match(line)]
    if not starts:
        return []
    steps = []
    for line in lines[starts[-1] + 1 :]:
        match = _STEP.match(line)
        if match is None:
            break
        if match.group(1) != "teardown":
            steps.append(line.strip())
    return steps


def as_pytest(spec: str, steps: list[str], *, liveness_timeout: float, put_tries: int = 3) -> str:
    """A pytest module that replays *steps* on a machine built from the factory *spec*
    (``package.module:factory``) with the same liveness bound and put tries."""
    module, _, attr = spec.partition(":")
    if _IDENT.match(attr) and module:
        load = f"from {module} import {attr} as factory"
    else:  # a dotted attribute: let the suite's own loader resolve it
        load = f"from chunk_adapter.factory import load_factory\n\nfactory = load_factory({spec!r})"
    body = "\n".join(f"        {step}" for step in steps) or "        pass"
    count = f"{len(steps)} step" + ("" if len(steps) == 1 else "s")
    return f'''"""A counterexample `chunk-adapter verify` found ({count}).

Run: python -m pytest THIS_FILE  (fails while the bug is there, passes once it is fixed)
"""

from chunk_adapter.stateful import make_machine

{load}

Machine = make_machine(factory, liveness_timeout={liveness_timeout!r}, put_tries={put_tries!r})


def test_counterexample() -> None:
    state = Machine()
    try:
{body}
    finally:
        state.teardown()  # releases every gate and stops the adapters; checks liveness
'''


def cap_lines(text: str, head: int = HEAD, tail: int = TAIL) -> str:
    """*text* with at most *head* first and *tail* last lines, and how many were left out."""
    lines = text.rstrip().splitlines()
    if len(lines) <= head + tail + 1:
        return "\n".join(lines)
    omitted = len(lines) - head - tail
    return "\n".join([*lines[:head], f"… {omitted} lines omitted", *lines[-tail:]])


def other_output(printed: str) -> str:
    """What was printed besides Hypothesis's own report (the falsifying steps, the
    ``@reproduce_failure`` line): the adapter's log output, mostly."""
    kept = []
    for line in printed.splitlines():
        if _NOISE.match(line) or _STATE.match(line) or _STEP.match(line):
            continue
        kept.append(line)
    return "\n".join(kept).strip("\n")
