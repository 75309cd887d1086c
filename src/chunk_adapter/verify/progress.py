"""What ``chunk-adapter verify`` shows while it runs, on stderr.

On a terminal one status line is rewritten in place (stage, checks done,
the check running, seconds left of the budget); otherwise plain lines, one per
stage and one per finished check, so a CI log is never silent for long.
``-q`` shows nothing but the report; ``-v`` also shows each check as it starts.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """Turns the runner's stage lines and worker events into lines on *out*."""

    def __init__(self, out: TextIO, *, verbosity: int = 0, tty: bool | None = None) -> None:
        self.out = out
        self.verbosity = verbosity  # -1 quiet, 0 default, 1 verbose
        self.tty = out.isatty() if tty is None else tty
        self.stage = ""
        self.done = 0
        self.deadline = 0.0
        self._width = 0

    def stage_started(self, line: str, stage: str, seconds: float) -> None:
        self.stage, self.done, self.deadline = stage, 0, time.monotonic() + seconds
        self._line(line, keep=True)

    def event(self, stage: str, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "check":
            name = str(event.get("name", ""))
            if self.tty:
                left = max(0.0, self.deadline - time.monotonic())
                self._line(
                    f"[verify] {stage}: {self.done} checks done, running {name[:60]} "
                    f"({left:.0f} s left)"
                )
            elif self.verbosity > 0:
                self._line(f"[verify] {stage}: running {name}", keep=True)
        elif kind == "result":
            self.done += 1
            if not self.tty:
                verdict = str(event.get("verdict", "")).upper()
                self._line(
                    f"[verify] {stage}/{event.get('name')}: {verdict} "
                    f"({float(event.get('seconds') or 0.0):.1f} s)",
                    keep=True,
                )

    def finish(self) -> None:
        if self.tty and self._width:
            self.out.write("\r" + " " * self._width + "\r")
            self.out.flush()
            self._width = 0

    def _line(self, text: str, *, keep: bool = False) -> None:
        if self.verbosity < 0:
            return
        if self.tty:
            pad = max(0, self._width - len(text))
            self.out.write("\r" + text + " " * pad + ("\n" if keep else ""))
            self._width = 0 if keep else len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()
