"""Benchmarks (``chunk-adapter bench``); not part of the test run."""

from .run import CONNECTORS, run_bench, unavailable

__all__ = ["CONNECTORS", "run_bench", "unavailable"]
