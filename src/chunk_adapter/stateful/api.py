"""The entry points: ``make_machine(factory)``, ``run_conformance(factory)``, and
``replay_example(factory, blob)`` to re-run one recorded example."""

from __future__ import annotations

from typing import Any

from hypothesis import settings as Settings
from hypothesis import stateful as hypothesis_stateful

from ..factory import AdapterFactory
from ..profiles import current_profile, hypothesis_settings, seed_only_draws
from .budget import Budget
from .machine import ConformanceMachine, MachineConfig

__all__ = [
    "make_machine",
    "replay_example",
    "reproduce_command",
    "run_conformance",
    "run_machine",
]


def reproduce_command(factory: AdapterFactory, profile: str | None = None) -> str:
    """The command that re-runs the project's machines on *factory*."""
    spec = f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', '?')}"
    name = current_profile(profile).name
    return (
        f"CHUNK_ADAPTER_PROFILE={name} python -m pytest tests/stateful --adapter {spec} "
        "(then add the @reproduce_failure line Hypothesis prints to replay exactly this run)"
    )


def make_machine(
    factory: AdapterFactory,
    *,
    put_tries: int = 3,
    liveness_timeout: float | None = None,
    reproduce: str | None = None,
    settings: Settings | None = None,
    name: str | None = None,
    loopback: bool = False,
    budget: Budget | None = None,
) -> type[ConformanceMachine]:
    """A ``ConformanceMachine`` subclass bound to *factory*; use its ``.TestCase``.

    *put_tries* is the adapter's configured number of put tries (the contract's
    default is 3). *liveness_timeout* bounds each wait (default: the profile's).
    *settings* defaults to the current profile's. The machine drives a sender
    and a receiver built by *factory*; *loopback* makes it drive one adapter
    that receives its own chunks instead. *budget* (a
    :class:`~chunk_adapter.stateful.budget.Budget`) stops it starting examples
    past a deadline and records every failure with its reproducer.
    """
    if not callable(factory):
        raise TypeError(f"make_machine needs an adapter factory (a callable), got {factory!r}")
    if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
        raise ValueError(f"put_tries counts every try and must be an int >= 1, got {put_tries!r}")
    config = MachineConfig(
        factory=factory,
        put_tries=put_tries,
        liveness_timeout=liveness_timeout,
        reproduce=reproduce if reproduce is not None else reproduce_command(factory),
        loopback=loopback,
        budget=budget,
    )
    cls_name = name or f"Conformance_{getattr(factory, '__name__', 'adapter')}"
    machine: type[ConformanceMachine] = type(cls_name, (ConformanceMachine,), {"config": config})
    machine.TestCase.settings = settings if settings is not None else hypothesis_settings()
    return machine


def run_conformance(
    factory: AdapterFactory,
    settings: Settings | None = None,
    *,
    put_tries: int = 3,
    liveness_timeout: float | None = None,
    reproduce: str | None = None,
) -> None:
    """Run the machine on *factory* now; raises on the first (shrunk) violation."""
    machine = make_machine(
        factory, put_tries=put_tries, liveness_timeout=liveness_timeout, reproduce=reproduce
    )
    run_machine(machine, settings or hypothesis_settings())


def run_machine(machine: type[ConformanceMachine], settings: Settings) -> None:
    """``run_state_machine_as_test`` (typed only in newer Hypothesis releases)."""
    runner: Any = hypothesis_stateful.run_state_machine_as_test
    with seed_only_draws():  # the programs drawn do not move with the source code
        runner(machine, settings=settings)


def replay_example(
    factory: AdapterFactory,
    blob: str,
    *,
    profile: str | None = None,
    reproduce: str | None = None,
    loopback: bool = False,
) -> tuple[Exception | None, str]:
    """Re-run one example from its ``@reproduce_failure`` *blob*, once.

    Returns the exception it failed with (``None`` if it passed) and what
    Hypothesis printed (the steps, as runnable code). The same run as
    ``chunk-adapter replay 'stateful:PROFILE:BLOB' --adapter SPEC``.
    """
    import contextlib
    import io

    import hypothesis
    from hypothesis.errors import DidNotReproduce

    machine = make_machine(factory, reproduce=reproduce, loopback=loopback)
    hypothesis.reproduce_failure(hypothesis.__version__, blob.encode())(machine)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            run_machine(machine, hypothesis_settings(profile))
    except DidNotReproduce:
        return None, printed.getvalue()
    except Exception as exc:  # the failure again (or the adapter raising)
        return exc, printed.getvalue() + "\n".join(getattr(exc, "__notes__", []))
    return None, printed.getvalue()
