"""``chunk-adapter demo``: the contract's worked examples 2 and 3, run live.

Prints the keys put and the chunks received for the reference adapter over an
in-memory connector, and whether that is what the contract allows.
"""

from __future__ import annotations

from typing import TextIO

from .examples import EXAMPLES
from .factory import reference_factory

__all__ = ["run_demo"]


def run_demo(out: TextIO) -> int:
    """Run both examples; 0 if each matched what the contract allows, else 1."""
    status = 0
    for example in EXAMPLES:
        outcome = example(reference_factory)
        print(outcome.title, file=out)
        for line in outcome.lines:
            print(f"  {line}", file=out)
        for problem in outcome.problems:
            print(f"  problem: {problem}", file=out)
        print(
            f"  -> {'as the contract says' if outcome.ok else 'NOT as the contract says'}\n",
            file=out,
        )
        status |= 0 if outcome.ok else 1
    return status
