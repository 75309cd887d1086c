"""Run the verify stages, each in a worker process with a deadline.

The budget (``max_seconds``) is shared: each stage gets its share of what is
left, plus a small margin to report. A worker past its deadline is killed and
that is itself the finding: the check that was running hung the adapter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..factory import load_factory
from .report import VerifyReport
from .result import CheckResult
from .stages import STAGES, Stage

__all__ = ["MARGIN", "PROFILES", "verify"]

MARGIN = 5.0  # seconds a worker gets beyond its share, to start up and report

PROFILES: dict[str, float] = {"quick": 60.0, "ci": 150.0, "hunt": 1800.0}
"""Default ``--max-seconds`` of each profile."""


def _replay_prefix(spec: str, profile: str, seed: int) -> str:
    return f"chunk-adapter verify --adapter {spec} --profile {profile} --seed {seed}"


def _read_events(path: str) -> list[dict[str, Any]]:
    events = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut short by the kill
    return events


def _run_stage(
    stage: Stage, spec: str, profile: str, seed: int, seconds: float
) -> list[CheckResult]:
    prefix = _replay_prefix(spec, profile, seed)
    fd, path = tempfile.mkstemp(prefix=f"chunk-verify-{stage.name}-", suffix=".jsonl")
    os.close(fd)
    command = [
        sys.executable, "-m", "chunk_adapter.verify.worker", stage.name,
        "--adapter", spec, "--profile", profile, "--seed", str(seed),
        "--seconds", f"{seconds:.3f}", "--replay-prefix", prefix, "--out", path,
    ]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        proc = subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=seconds + MARGIN,
            check=False,
        )
        killed, stderr = False, proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        killed = True
        stderr = (exc.stderr or b"").decode(errors="replace")
    events = _read_events(path)
    os.unlink(path)
    results = [CheckResult.from_json({k: v for k, v in e.items() if k != "event"})
               for e in events if e.get("event") == "result"]  # fmt: skip
    if killed or not any(e.get("event") == "done" for e in events):
        running = [e.get("name") for e in events if e.get("event") == "check"]
        what = f" (last check started: {running[-1]})" if running else ""
        cause = (
            f"did not finish within {seconds + MARGIN:.1f} s{what}: a call into the adapter hung "
            "or ran away (a stop() or join without a timeout, a deadlock, a spin)"
            if killed
            else f"the worker died without a verdict{what}: {stderr.strip()[-400:]}"
        )
        results.append(
            CheckResult(stage.name, "stage finished", (), "fail", f"stage {stage.name} {cause}",
                        detail=stderr[-2000:], replay=f"{prefix} --stage {stage.name}")
        )  # fmt: skip
    return results


def verify(
    spec: str,
    *,
    profile: str = "ci",
    max_seconds: float | None = None,
    seed: int = 0,
    stages: Sequence[str] | None = None,
    keep_going: bool = False,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Verify the adapter named by *spec*; raises ``InvalidValue`` for a bad spec.

    Stages run cheapest first; unless *keep_going*, the first stage with a
    violation ends the run (a broken adapter fails fast).
    """
    if os.getcwd() not in sys.path:  # as in the workers: the current project is importable
        sys.path.insert(0, os.getcwd())
    load_factory(spec)  # usage errors surface here, before any worker starts
    budget = PROFILES[profile] if max_seconds is None else max_seconds
    report = VerifyReport(spec, profile, seed, budget)
    chosen = [s for s in STAGES if stages is None or s.name in stages]
    start = time.monotonic()
    for index, stage in enumerate(chosen, 1):
        left = budget - (time.monotonic() - start)
        if left <= 1.0:
            report.results.append(
                CheckResult(stage.name, "budget", (), "skip", "no budget left for this stage")
            )
            continue
        share = left * stage.share if index < len(chosen) else left
        if progress is not None:
            progress(
                f"[verify] stage {index}/{len(chosen)} {stage.name} ({stage.what}): "
                f"up to {share:.0f} s; {left:.0f} s of {budget:.0f} s budget left"
            )
        results = _run_stage(stage, spec, profile, seed, share)
        report.results.extend(results)
        report.stages_run.append(stage.name)
        if not keep_going and any(r.verdict == "fail" for r in results):
            break
    report.seconds = time.monotonic() - start
    return report
