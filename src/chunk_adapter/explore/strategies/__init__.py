"""Scheduling strategies, one module each, all behind :class:`~.base.Strategy`."""

from .base import Strategy
from .dfs import DfsStrategy
from .dpor import DporStrategy, ProofStrategy
from .drawn import DrawnStrategy
from .effects import EffectStrategy
from .pct import PctStrategy
from .replay import ReplayStrategy, ScheduleDiverged
from .sections import SectionStrategy
from .uniform import RandomStrategy

__all__ = [
    "DfsStrategy",
    "DporStrategy",
    "DrawnStrategy",
    "EffectStrategy",
    "PctStrategy",
    "ProofStrategy",
    "RandomStrategy",
    "ReplayStrategy",
    "ScheduleDiverged",
    "SectionStrategy",
    "Strategy",
]
