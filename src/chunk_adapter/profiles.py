"""Hypothesis profiles for the stateful machines, chosen by ``CHUNK_ADAPTER_PROFILE``.

=========  ========  =====  ========  ==================================
profile    examples  steps  liveness  use
=========  ========  =====  ========  ==================================
dev        100       30     5 s       default: fast, derandomized
ci         150       40     10 s      CI: more, still derandomized
thorough   1000      60     10 s      regression hunting: random seeds
=========  ========  =====  ========  ==================================

"liveness" is the harness's bound on any single wait (a wait that runs out is
a liveness violation). ``dev`` and ``ci`` are derandomized, so a run is the
same every time; ``thorough`` explores new sequences each run and saves
failures in Hypothesis's example database. No profile takes data from the
wall clock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings

from .errors import InvalidValue

__all__ = ["DEFAULT", "ENV", "PROFILES", "Profile", "current_profile", "hypothesis_settings"]

ENV = "CHUNK_ADAPTER_PROFILE"
DEFAULT = "dev"


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int
    step_count: int
    liveness_timeout: float
    derandomize: bool


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("dev", 100, 30, 5.0, True),
        Profile("ci", 150, 40, 10.0, True),
        Profile("thorough", 1000, 60, 10.0, False),
    )
}


def current_profile(name: str | None = None) -> Profile:
    """The profile named *name*, else by ``$CHUNK_ADAPTER_PROFILE``, else ``dev``."""
    chosen = name if name is not None else os.environ.get(ENV, "").strip() or DEFAULT
    try:
        return PROFILES[chosen]
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
        database=None if p.derandomize or settings.default is None else settings.default.database,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
