"""A deterministic interleaving explorer for adapters (in the spirit of loom, shuttle, PCT).

The adapter's SAVE and RECV threads and the scheduler thread run one at a time
(as greenlets on one thread, or on real threads: :mod:`.carriers`), on a
controlled runtime with a virtual clock; a strategy picks which thread moves at
every switch point. See docs/explorer.md.
"""

from .engine.explorer import ExplorationFailed, Report, explore, replay
from .engine.result import Execution
from .runtime.controller import Failure
from .scenarios.library import LIBRARY
from .scenarios.scenario import Op, Scenario
from .strategies import (
    DfsStrategy,
    DporStrategy,
    DrawnStrategy,
    EffectStrategy,
    PctStrategy,
    ProofStrategy,
    RandomStrategy,
    ReplayStrategy,
    ScheduleDiverged,
    Strategy,
)

__all__ = [
    "LIBRARY",
    "DfsStrategy",
    "DporStrategy",
    "DrawnStrategy",
    "EffectStrategy",
    "Execution",
    "ExplorationFailed",
    "Failure",
    "Op",
    "PctStrategy",
    "ProofStrategy",
    "RandomStrategy",
    "ReplayStrategy",
    "Report",
    "Scenario",
    "ScheduleDiverged",
    "Strategy",
    "explore",
    "replay",
]
