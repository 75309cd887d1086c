"""Scheduling strategies, one module each, all behind :class:`~.base.Strategy`."""

from .base import Strategy
from .dfs import DfsStrategy
from .drawn import DrawnStrategy
from .pct import PctStrategy
from .replay import ReplayStrategy, ScheduleDiverged
from .uniform import RandomStrategy

__all__ = [
    "DfsStrategy",
    "DrawnStrategy",
    "PctStrategy",
    "RandomStrategy",
    "ReplayStrategy",
    "ScheduleDiverged",
    "Strategy",
]
