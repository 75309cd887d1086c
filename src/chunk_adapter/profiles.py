"""The profiles, in one table: how much every part of the suite does under each name.

=======  ======  ========  =====  ========  ======  ========  ======  ======  ===================
profile  budget  examples  steps  liveness  worlds  explorer  proofs  stress  use
=======  ======  ========  =====  ========  ======  ========  ======  ======  ===================
quick    120 s   100       30     5 s       150     25        0       short   pre-commit
ci       240 s   150       40     10 s      600     60        0       all     default CI gate
hunt     1800 s  1000      60     10 s      5000    2000      5       all     regression hunt
=======  ======  ========  =====  ========  ======  ========  ======  ======  ===================

``quick`` and ``ci`` are derandomized; ``hunt`` draws random seeds (see below).

"budget" is ``chunk-adapter verify``'s default ``--max-seconds``; "examples"
and "steps" the state machines' Hypothesis settings; "liveness" the harness's
bound on any single wait (a wait that runs out is a liveness violation);
"worlds" how many generated worlds the ``simulate`` stage runs (``explore.engine.simulate``);
"explorer" the executions per library scenario and strategy (and, with them, a
budget of 20,000 switch points an execution on average: a count too,
``explore.stages.explore.STEPS_PER_EXECUTION``); "proofs" how many
of the explorer's proof scenarios (``explore.scenarios.library.PROVE``, cheapest first,
five in all) the explore stage tries to prove after its seeded runs; "stress"
whether the stress stage runs every scenario or one of each kind. The state
machines run under ``CHUNK_ADAPTER_PROFILE`` when no profile is named; ``ci``
(:data:`DEFAULT`) everywhere by default. This is the one table: ``verify``'s
budgets, the explorer's run counts and proofs and the stress plan are read from it.
``dev`` and ``thorough`` are accepted as older names of ``quick`` and ``hunt``.

``quick`` and ``ci`` are derandomized, so a run is the same every time;
``hunt`` explores new sequences each run and saves failures in Hypothesis's
example database: ``.hypothesis/`` by default, or a shared Redis database when
``CHUNK_ADAPTER_HYPOTHESIS_DB=redis://host:port/db`` is set, so CI workers and
machines share every failure found. No profile takes data from the wall clock.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.database import ExampleDatabase

from .errors import InvalidValue

__all__ = [
    "DB_ENV",
    "DEFAULT",
    "ENV",
    "PROFILES",
    "Profile",
    "current_profile",
    "example_database",
    "hypothesis_settings",
    "seed_only_draws",
]

ENV = "CHUNK_ADAPTER_PROFILE"
DB_ENV = "CHUNK_ADAPTER_HYPOTHESIS_DB"
DEFAULT = "ci"
ALIASES = {"dev": "quick", "thorough": "hunt"}


@dataclass(frozen=True)
class Profile:
    """One row of the table (module doc)."""

    name: str
    max_examples: int
    step_count: int
    liveness_timeout: float
    derandomize: bool
    budget: float
    """``chunk-adapter verify``'s default ``--max-seconds``."""
    explore_runs: int
    """Executions per explorer scenario and strategy: a count, not a time, so the same
    input gets the same verdict (time only cuts a run short, and that is reported)."""
    stress_all: bool = True
    """Every stress scenario; ``False``: one representative of each kind."""
    proofs: int = 0
    """How many of the explorer's proof scenarios (``explore.scenarios.library.PROVE``, cheapest
    first) the explore stage tries to prove after its seeded runs: all five under
    ``hunt``, none under ``quick`` and ``ci`` (a proof costs up to a minute, and the ``ci``
    verdicts are certified by a frozen measurement that ran without proofs)."""
    sim_worlds: int = 600
    """Generated worlds the ``simulate`` stage draws (each run once, or a few times under a
    seeded PCT or random schedule): a count, so ``ci`` gives the same verdict every run.
    ``ci``'s 600 take about as long on the greenlet runtime as 400 did on threads."""

    @property
    def keeps_examples(self) -> bool:
        """Whether Hypothesis keeps failing examples in its database (only when not
        derandomized): the other profiles leave the user's tree alone."""
        return not self.derandomize


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "quick",
            100,
            30,
            5.0,
            True,
            budget=120.0,
            explore_runs=25,
            stress_all=False,
            sim_worlds=150,
        ),
        Profile("ci", 150, 40, 10.0, True, budget=240.0, explore_runs=60),
        Profile(
            "hunt",
            1000,
            60,
            10.0,
            False,
            budget=1800.0,
            explore_runs=2000,
            proofs=5,
            sim_worlds=5000,
        ),
    )
}


def current_profile(name: str | None = None) -> Profile:
    """The profile named *name*, else by ``$CHUNK_ADAPTER_PROFILE``, else ``ci``."""
    chosen = name if name is not None else os.environ.get(ENV, "").strip() or DEFAULT
    try:
        return PROFILES[ALIASES.get(chosen, chosen)]
    except KeyError:
        source = "argument" if name is not None else f"${ENV}"
        raise InvalidValue(
            f"unknown profile {chosen!r} (from {source}); choose one of "
            f"{', '.join(sorted(PROFILES))}, e.g. {ENV}=ci"
        ) from None


def hypothesis_settings(profile: Profile | str | None = None) -> settings:
    """Hypothesis settings for the machines under *profile* (default: current)."""
    p = profile if isinstance(profile, Profile) else current_profile(profile)
    return settings(
        max_examples=p.max_examples,
        stateful_step_count=p.step_count,
        deadline=None,
        derandomize=p.derandomize,
        database=None if p.derandomize else example_database(),
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@contextlib.contextmanager
def seed_only_draws() -> Iterator[None]:
    """Hypothesis draws inside depend on the seed only, not on this process's source code.

    Hypothesis (6.131 on) mixes constants it finds in the source of every *local* module
    loaded (not installed in site-packages: this package from a checkout, the user's
    adapter, their tests) into about one draw in twenty. The derandomized sample of
    generated worlds and of the machines' programs then moved with any edit that added a
    literal anywhere — to this package or to the adapter under test — and differed
    between a checkout and an installed wheel: a bug found on one commit was missed on
    the next with nothing about it changed (measured: the ``simulate`` stage at seed 0
    found ``stop_joins_each_thread`` at world 109 before a change that added two modules
    with new literals, and passed all 600 after it). Inside this context the draws see no
    local constants (Hypothesis's own, fixed, still take part), so one seed gives one
    sample on every machine and commit. A Hypothesis without the feature, or whose
    private hook moved, is left as it is."""
    try:
        from hypothesis.internal.conjecture import providers as _providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        yield
        return
    providers: Any = _providers
    get = getattr(providers, "_get_local_constants", None)
    cache: Any = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    empty = getattr(providers, "Constants", None)
    if get is None or empty is None or not hasattr(cache, "clear"):
        yield
        return
    global _inside, _saved_hook
    with _draws_lock:
        if _inside == 0:
            none = empty()
            _saved_hook = get
            providers._get_local_constants = lambda: none
            cache.clear()  # permitted constants computed before, with the local ones
        _inside += 1
    try:
        yield
    finally:
        with _draws_lock:
            _inside -= 1
            if _inside == 0:
                providers._get_local_constants = _saved_hook
                cache.clear()


# _draws_lock guards _inside and _saved_hook: how many seed_only_draws() contexts are open
# in this process (any thread: a machine abandoned on a timeout may still be inside one
# while the next starts) and Hypothesis's own hook, put back when the last one closes.
# Held only for those updates, never across the draws, so no context waits for another.
_draws_lock = threading.Lock()
_inside = 0
_saved_hook: Any = None


def example_database() -> ExampleDatabase | None:
    """Where the ``hunt`` profile keeps failing examples (see module doc)."""
    url = os.environ.get(DB_ENV, "").strip()
    if not url:
        return settings.default.database if settings.default is not None else None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise InvalidValue(
            f"${DB_ENV}={url!r} is not a Redis URL; use e.g. redis://127.0.0.1:6379/0, "
            "or unset it for the local .hypothesis/ directory"
        )
    import redis
    from hypothesis.extra.redis import RedisExampleDatabase

    return RedisExampleDatabase(redis.Redis.from_url(url), key_prefix=b"chunk-adapter:hypothesis:")
