"""Benchmarks (``chunk-adapter bench``); not part of the test run."""

from .run import CONNECTORS, run_bench

__all__ = ["CONNECTORS", "run_bench"]
