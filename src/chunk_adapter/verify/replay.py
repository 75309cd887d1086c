"""``chunk-adapter replay STRING``: re-run one reported counterexample.

A replay string says which part of the suite found the failure and what it
needs to run it again, exactly:

``explore:SCENARIO:SCHEDULE``
    the explorer's library scenario under the recorded schedule, step for step;
``stateful:PROFILE:BLOB``
    the state machine's shrunk example (Hypothesis's ``@reproduce_failure`` blob);
``stateful:PROFILE:steps.DATA``
    the machine's steps, shrunk further by the stage (the pasteable test's steps);
``stress:SCENARIO:SEED``
    one stress scenario of the suite, with its seed.
"""

from __future__ import annotations

from typing import TextIO

from ..errors import InvalidValue
from ..factory import AdapterFactory, load_factory

__all__ = ["replay_string"]

FORMS = "explore:SCENARIO:SCHEDULE, stateful:PROFILE:BLOB or stress:SCENARIO:SEED"


def replay_string(string: str, adapter_spec: str, out: TextIO) -> int:
    """Replay *string* against the adapter; 0 if it now passes, 1 if it fails again."""
    kind, _, rest = string.partition(":")
    first, _, second = rest.partition(":")
    if kind not in ("explore", "stateful", "stress") or not first or not second:
        raise InvalidValue(f"cannot read the replay string {string!r}; it has the form {FORMS}")
    factory = load_factory(adapter_spec)
    if kind == "explore":
        return _explore(first, second, factory, adapter_spec, out)
    if kind == "stateful":
        return _stateful(first, second, factory, out)
    return _stress(first, second, factory, adapter_spec, out)


def _explore(name: str, schedule: str, factory: AdapterFactory, spec: str, out: TextIO) -> int:
    from ..explore import LIBRARY
    from ..explore import replay as replay_schedule
    from ..explore.control import substitute_from_env
    from ..explore.explorer import describe

    if name not in LIBRARY:
        raise InvalidValue(f"no explorer scenario {name!r}; choose one of {sorted(LIBRARY)}")
    # The same control as the verify stage: white-box or substitution as observed,
    # plus the modules $CHUNK_ADAPTER_SUBSTITUTE names (verify's --substitute).
    execution = replay_schedule(
        LIBRARY[name], schedule, factory=factory, substitute=substitute_from_env()
    )
    if execution.ok:
        print(f"explore {name} under {schedule}: no failure ({execution.steps} steps)", file=out)
        return 0
    print(describe(execution, "replay", 1, spec), file=out)
    return 1


def _stateful(profile: str, blob: str, factory: AdapterFactory, out: TextIO) -> int:
    from ..stateful.minimize import PREFIX

    if blob.startswith(PREFIX):
        return _stateful_steps(profile, blob, factory, out)
    import hypothesis
    from hypothesis.errors import DidNotReproduce

    from ..profiles import hypothesis_settings
    from ..stateful.api import make_machine, run_machine

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


def _stateful_steps(profile: str, data: str, factory: AdapterFactory, out: TextIO) -> int:
    from ..profiles import current_profile
    from ..stateful.minimize import decode, run_steps

    steps = decode(data)
    error = run_steps(factory, steps, liveness_timeout=current_profile(profile).liveness_timeout)
    listing = "\n".join(f"  {step}" for step in steps)
    if error is None:
        print(f"stateful steps: no failure\n{listing}", file=out)
        return 0
    print(f"{error}\nsteps ({len(steps)}):\n{listing}", file=out)
    return 1


def _stress(name: str, seed: str, factory: AdapterFactory, spec: str, out: TextIO) -> int:
    from ..stress import scenarios

    try:
        seed_value = int(seed)
    except ValueError:
        raise InvalidValue(f"the stress seed must be an integer, got {seed!r}") from None
    runs = {label: run for label, _, run in scenarios(seed_value)}
    if name not in runs:
        raise InvalidValue(f"no stress scenario {name!r}; choose one of {sorted(runs)}")
    report = runs[name](factory)
    print(report.describe(spec), file=out)
    return 0 if report.ok else 1
