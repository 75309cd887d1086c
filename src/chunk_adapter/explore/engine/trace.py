"""Print an execution as a per-thread trace: one column per thread, one row per step."""

from __future__ import annotations

from ..runtime.controller import Step

__all__ = ["format_trace"]

_COLUMN = 46


def format_trace(steps: list[Step], names: list[str], *, head: int = 150, tail: int = 250) -> str:
    """Rows ``step  t(ms)  <label in its thread's column>``; long traces keep head and tail."""
    short = [_short_name(n) for n in names]
    header = f"{'step':>6} {'t(ms)':>8}  " + "".join(f"{n:<{_COLUMN}}" for n in short)
    lines = [header.rstrip(), "-" * min(len(header), 6 + 9 + 2 + _COLUMN * len(names))]
    rows = steps
    skipped = 0
    if len(steps) > head + tail:
        skipped = len(steps) - head - tail
        rows = steps[:head] + steps[-tail:]
    for i, step in enumerate(rows):
        if skipped and i == head:
            lines.append(f"{'':>6} {'':>8}  ... {skipped} steps omitted ...")
        label = step.label if len(step.label) < _COLUMN - 1 else step.label[: _COLUMN - 4] + "..."
        pad = " " * (_COLUMN * step.tid)
        lines.append(f"{step.index:>6} {step.time * 1000:>8.2f}  {pad}{label}")
    return "\n".join(lines)


def _short_name(name: str) -> str:
    return name.replace("chunk-adapter-", "")
