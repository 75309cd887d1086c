"""One verify stage (or the pre-flight) in a process of its own.

``python -m chunk_adapter.verify.worker STAGE --adapter SPEC --out FILE ...``
appends one JSON line per event to FILE as it goes (``check`` before a check
runs, ``result`` after, ``done`` at the end), so the parent knows what finished
and what was running. The worker watches itself (:mod:`.watchdog`): a call into
the adapter stuck past its bound ends the stage with a finding naming that
call; reaching the stage's deadline with nothing stuck ends it inconclusive; the
verify that started it killed (a cancelled CI job) ends it within a tick.
It leaves with ``os._exit``: threads the adapter left behind, daemon or not,
cannot keep it alive.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import traceback
from dataclasses import replace
from typing import Any

from ..factory import LoadedFactory, load_factory
from ..oracles import accepted
from ..outcome import CheckResult, StageContext
from .preflight import preflight
from .stages import STAGES
from .watchdog import CallWatch

__all__ = ["PREFLIGHT", "main"]

PREFLIGHT = "preflight"
TICK = 0.05  # s between the watchdog's looks
WATCHED = ("examples", "stress", "stateful")  # the explorer judges its own calls in virtual time


class _Events:
    """The event file; written by the stage thread and the watchdog thread."""

    def __init__(self, path: str) -> None:
        self._out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by os._exit)
        # _lock guards _out and _closed: one event line at a time, nothing after close.
        self._lock = threading.Lock()
        self._closed = False
        self.current = ""  # the check running now (for the watchdog's report)

    def emit(self, event: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            self._out.write(json.dumps(event, default=repr) + "\n")
            self._out.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._out.flush()


def _finish(events: _Events, stage: str) -> None:
    seen = accepted.seen()
    if seen:  # root causes the baseline accepts, set aside while the checks searched on
        events.emit({"event": "accepted", "seen": seen})
    events.emit({"event": "done", "stage": stage})
    events.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _watchdog(
    events: _Events, watch: CallWatch, ctx: StageContext, stage: str, parent: int
) -> None:
    """Runs beside the stage until one of: a stuck call, the deadline, the verify that
    started this worker gone. Then ends the worker."""
    while True:
        if os.getppid() != parent:  # verify was killed (a CI job cancelled): nobody reads on
            events.close()
            os._exit(3)
        stuck = watch.stuck()
        if stuck:
            worst = stuck[0]
            events.emit(
                {
                    "event": "result",
                    **CheckResult(
                        stage,
                        events.current or "stage",
                        (worst.rule,),
                        "fail",
                        worst.describe(),
                        detail="\n".join(s.describe() for s in stuck),
                        replay=f"{ctx.replay_prefix} --stage {stage}",
                        confirmation="the call never returned (no re-run needed)",
                    ).to_json(),
                }
            )
            _finish(events, stage)
        if ctx.left() <= 0:
            events.emit(
                {
                    "event": "result",
                    **CheckResult(
                        stage,
                        events.current or "stage",
                        (),
                        "inconclusive",
                        f"stage {stage} ran out of its {ctx.seconds:.0f} s during "
                        f"'{events.current or 'its start'}', with no call into the adapter "
                        "stuck past its bound: not a violation. Give verify more time "
                        "(--max-seconds) to finish the planned work.",
                        coverage="stopped at the deadline",
                    ).to_json(),
                }
            )
            _finish(events, stage)
        time.sleep(TICK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chunk_adapter.verify.worker")
    parser.add_argument("stage", choices=[PREFLIGHT, *(s.name for s in STAGES)])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--replay-prefix", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--substitute", action="append", default=[])
    parser.add_argument("--check", action="append", default=[])  # run only these checks
    parser.add_argument("--all", action="store_true", help="run every check after violations")
    parser.add_argument("--reliability", action="store_true", help="judge R25, R30 and R31 too")
    parser.add_argument(  # a JSON file: {"rules": [...]} (verify --baseline)
        "--accepted", default=None, help="root causes a baseline accepts"
    )
    # Run another stage function under this stage's name (the worker's own tests).
    parser.add_argument("--target", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    parent = os.getppid()  # the verify that started this worker; it ends with it
    # The reference adapter logs every injected fault; a verdict does not need them.
    logging.getLogger("chunk_adapter").setLevel(logging.CRITICAL)
    events = _Events(args.out)
    if args.accepted is not None:
        with open(args.accepted, encoding="utf-8") as handle:
            known = json.load(handle)
        accepted.install(accepted.Accepted.of(known["rules"]))
    events.emit({"event": "start", "stage": args.stage})
    if args.stage == PREFLIGHT:
        problem = preflight(load_factory(args.adapter), args.adapter)
        if problem is not None:
            events.emit({"event": "usage", "message": problem})
        _finish(events, args.stage)
    stage = next(s for s in STAGES if s.name == args.stage)
    if args.target is not None:
        stage = replace(stage, target=args.target)

    def announce(name: str) -> None:
        events.current = name
        events.emit({"event": "check", "name": name})

    ctx = StageContext(
        args.adapter,
        args.profile,
        args.seed,
        args.seconds,
        args.replay_prefix,
        announce=announce,
        deadline=time.monotonic() + args.seconds,
        substitute=tuple(args.substitute),
        only=tuple(args.check),
        run_all=args.all,
        reliability=args.reliability,
    )
    watch = CallWatch()
    threading.Thread(
        target=_watchdog,
        args=(events, watch, ctx, stage.name, parent),
        name="verify-watchdog",
        daemon=True,
    ).start()
    try:
        factory = load_factory(args.adapter)
        if stage.name in WATCHED:
            factory = watch.factory(factory)
        for result in stage.load()(factory, ctx):
            events.emit({"event": "result", **result.to_json()})
    except Exception as exc:
        whose = (
            f"the adapter's factory raised {type(exc).__name__}: {exc} while the {stage.name} "
            "stage built an adapter — not a verdict on the adapter; the factory is called as "
            "factory(connector, stage_id=..., src_stage_id=..., build_payload=...) plus the "
            "optional keywords it takes (see the detail)"
            if _raised_in_factory(exc)
            else f"the {stage.name} stage itself raised {type(exc).__name__}: {exc} — not a "
            "verdict on the adapter; please report it to chunk-adapter with the detail"
        )
        crash = CheckResult(
            stage.name,
            "stage crashed",
            (),
            "inconclusive",
            whose,
            detail=traceback.format_exc(),
            replay=f"{args.replay_prefix} --stage {stage.name}",
        )
        events.emit({"event": "result", **crash.to_json()})
    _finish(events, stage.name)
    return 0


def _raised_in_factory(exc: BaseException) -> bool:
    """Whether *exc* came up through the user's factory (a :class:`LoadedFactory` call)."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "__call__" and code is LoadedFactory.__call__.__code__:
            return True
        tb = tb.tb_next
    return False


if __name__ == "__main__":
    main()
