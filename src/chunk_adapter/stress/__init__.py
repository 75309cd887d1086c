"""Stress and fault-injection scenarios that hold for any adapter a factory builds.

Each scenario is a function ``scenario(factory, *, seed=..., <sizes, rates>)``
returning a :class:`StressReport`; a failed report names the contract rules it
broke and prints the seed, the parameters and the command that reproduce it.
The checks are the oracles' (:mod:`chunk_adapter.oracles`), plus what only a
live run shows: stop latency, threads left alive, CPU and get rates, call
latency, and the adapter's counters against the recording.
"""

from .blocked import blocked_work
from .pacing import head_of_line, idle_polling
from .report import DEFAULT_SEED, SEED_ENV, StressFailure, StressReport, seed_from_env
from .stopping import STATES, prompt_stop
from .streams import build_faults, get_faults, put_faults
from .suite import scenarios
from .verdicts import TINY_SWITCH_INTERVAL

__all__ = [
    "DEFAULT_SEED",
    "SEED_ENV",
    "STATES",
    "TINY_SWITCH_INTERVAL",
    "StressFailure",
    "StressReport",
    "blocked_work",
    "build_faults",
    "get_faults",
    "head_of_line",
    "idle_polling",
    "prompt_stop",
    "put_faults",
    "scenarios",
    "seed_from_env",
]
