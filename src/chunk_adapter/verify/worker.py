"""One verify stage in a process of its own.

``python -m chunk_adapter.verify.worker STAGE --adapter SPEC --out FILE ...``
appends one JSON line per event to FILE as it goes (``start`` before a check
runs, ``result`` after), so the parent knows what finished and what was running
if it has to kill the worker. The worker leaves with ``os._exit``: threads the
adapter left behind, daemon or not, cannot keep it alive.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from typing import Any

from ..factory import load_factory
from ..outcome import StageContext
from .result import CheckResult
from .stages import STAGES

__all__ = ["main"]


def _emit(out: Any, event: dict[str, Any]) -> None:
    out.write(json.dumps(event, default=repr) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chunk_adapter.verify.worker")
    parser.add_argument("stage", choices=[s.name for s in STAGES])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--replay-prefix", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    stage = next(s for s in STAGES if s.name == args.stage)
    # The reference adapter logs every injected fault; a verdict does not need them.
    logging.getLogger("chunk_adapter").setLevel(logging.CRITICAL)
    with open(args.out, "a", encoding="utf-8") as out:
        ctx = StageContext(
            args.adapter,
            args.profile,
            args.seed,
            args.seconds,
            args.replay_prefix,
            announce=lambda name: _emit(out, {"event": "check", "name": name}),
            deadline=time.monotonic() + args.seconds,
        )
        _emit(out, {"event": "start", "stage": stage.name})
        try:
            factory = load_factory(args.adapter)
            for result in stage.load()(factory, ctx):
                _emit(out, {"event": "result", **result.to_json()})
        except Exception as exc:
            crash = CheckResult(
                stage.name,
                "stage crashed",
                (),
                "fail",
                f"{type(exc).__name__}: {exc}",
                detail=traceback.format_exc(),
                replay=f"{args.replay_prefix} --stage {stage.name}",
            )
            _emit(out, {"event": "result", **crash.to_json()})
        _emit(out, {"event": "done", "stage": stage.name})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
