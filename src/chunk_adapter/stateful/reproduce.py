"""The state machines' kind of reproducer: ``stateful:PROFILE:steps.DATA`` (the steps of
the printed test) or ``stateful:PROFILE:BLOB`` (Hypothesis's example, when its steps could
not be shrunk further); see :mod:`chunk_adapter.reproducer`."""

from __future__ import annotations

from typing import Any, TextIO

from ..reproducer import Kind, register

__all__ = ["STATEFUL"]


def _replay(fields: tuple[str, ...], factory: Any, spec: str, out: TextIO) -> int:
    from .minimize import PREFIX

    profile, blob = fields
    if blob.startswith(PREFIX):
        return _steps(profile, blob, factory, out)
    import hypothesis
    from hypothesis.errors import DidNotReproduce

    from ..profiles import hypothesis_settings
    from .api import make_machine, run_machine

    machine = make_machine(factory)
    hypothesis.reproduce_failure(hypothesis.__version__, blob.encode())(machine)
    try:
        run_machine(machine, hypothesis_settings(profile))
    except DidNotReproduce:
        print(f"stateful example {blob}: no failure (it did not reproduce here)", file=out)
        return 0
    except Exception as exc:
        print(str(exc), file=out)
        print("\n".join(getattr(exc, "__notes__", [])), file=out)
        return 1
    print(f"stateful example {blob}: no failure", file=out)
    return 0


def _steps(profile: str, data: str, factory: Any, out: TextIO) -> int:
    from ..profiles import current_profile
    from .minimize import decode, run_steps

    steps = decode(data)
    error = run_steps(factory, steps, liveness_timeout=current_profile(profile).liveness_timeout)
    listing = "\n".join(f"  {step}" for step in steps)
    if error is None:
        print(f"stateful steps: no failure\n{listing}", file=out)
        return 0
    print(f"{error}\nsteps ({len(steps)}):\n{listing}", file=out)
    return 1


STATEFUL = register(
    Kind(
        "stateful",
        ("PROFILE", "BLOB"),
        _replay,
        forms=("stateful:PROFILE:steps.DATA", "stateful:PROFILE:BLOB"),
    )
)
"""The machines' counterexample under a profile (the profile sets the liveness bound)."""
