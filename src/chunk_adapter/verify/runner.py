"""Run the verify stages, each in a worker process with a deadline.

First a pre-flight worker builds two adapters with the factory: a factory that
raises, hangs or returns no adapter is a usage error (:class:`UsageError`, exit
2) before any stage runs. Then the budget (``max_seconds``) is shared: each
stage gets its share of what is left, plans its work inside it and reports
coverage. A worker that had to be killed past its deadline is *inconclusive*,
never a violation: a stuck call is named by the worker's own per-call
watchdog (:mod:`.watchdog`) before that.

Over 400 lines, and one module because the budget sharing, the worker lifecycle and the
verdict of a killed worker are one loop over the stages; the worker, watchdog, report
and stage table are apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..errors import UsageError
from ..factory import load_factory
from ..outcome import CheckResult
from ..profiles import DEFAULT, PROFILES
from .baseline import Baseline
from .progress import Progress
from .report import VerifyReport
from .stages import STAGES, Stage

__all__ = ["MARGIN", "MAX_JOBS", "UsageError", "default_jobs", "shard_seed", "verify"]

MARGIN = 5.0  # seconds a worker gets beyond its share, to start up and report
POLL = 0.25  # seconds between looks at a running worker's events
HYPOTHESIS_HOME = os.path.join(tempfile.gettempdir(), "chunk-adapter-hypothesis")
"""Hypothesis's storage for the quick and ci profiles (not ``.hypothesis/`` in the user's tree)."""
PREFLIGHT_SECONDS = 40.0  # two factory calls (15 s each) and the stops (3 s)
MAX_JOBS = 4
"""The most stages ``--jobs`` runs at once by default (there are five stages)."""


def default_jobs() -> int:
    """Half the cores this process may use, at least 1 and at most :data:`MAX_JOBS`.

    Half: a stage itself keeps more than one core busy at times (the stress stage's
    threads, the explorer's hub and driver), and each stage's budget is a share of
    real time, so two stages on one core each would run out of it on a 2-core runner
    (measured: two verifies at once, two stages each, left the generated worlds
    unfinished, exit 3); ``--jobs`` asks for more."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_JOBS, cores // 2))


def shard_seed(seed: int, shard: tuple[int, int]) -> int:
    """The seed shard ``I/N`` of a hunt runs with: distinct for every shard of *seed*, so
    N machines search N different parts of the random space (``--shard``)."""
    index, count = shard
    return seed * count + index - 1


def _replay_prefix(spec: str, profile: str, seed: int, reliability: bool = False) -> str:
    more = " --reliability" if reliability else ""
    return f"chunk-adapter verify --adapter {spec} --profile {profile} --seed {seed}{more}"


class _Tail:
    """Reads the worker's event file as it grows (complete lines only)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.events: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        """The events written since the last read."""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        fresh = []
        for line in data[:end].splitlines():
            try:
                fresh.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # cannot happen for whole lines; never let it stop the verdict
        self.events += fresh
        return fresh


OnEvent = Callable[[dict[str, Any]], None]


def _worker(
    name: str,
    spec: str,
    profile: str,
    seed: int,
    seconds: float,
    substitute: Sequence[str],
    on_event: OnEvent = lambda event: None,
    checks: Sequence[str] = (),
    run_all: bool = False,
    cancel: threading.Event | None = None,
    accepted: str | None = None,
    reliability: bool = False,
) -> tuple[list[dict[str, Any]], bool, str]:
    """Run one worker; its events, whether it had to be killed, and its stderr.

    *on_event* sees each event as the worker writes it (the live progress line).
    *cancel*, once set, kills the worker (its results are no longer wanted).
    """
    fd, path = tempfile.mkstemp(prefix=f"chunk-verify-{name}-", suffix=".jsonl")
    os.close(fd)
    command = [
        sys.executable, "-m", "chunk_adapter.verify.worker", name,
        "--adapter", spec, "--profile", profile, "--seed", str(seed),
        "--seconds", f"{seconds:.3f}",
        "--replay-prefix", _replay_prefix(spec, profile, seed, reliability), "--out", path,
    ]  # fmt: skip
    if reliability:
        command.append("--reliability")
    for module in substitute:
        command += ["--substitute", module]
    for check in checks:
        command += ["--check", check]
    if run_all:
        command.append("--all")
    if accepted is not None:
        command += ["--accepted", accepted]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if not PROFILES[profile].keeps_examples:  # hunt only; the others leave the user's tree alone
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", HYPOTHESIS_HOME)
    tail = _Tail(path)
    deadline = time.monotonic() + seconds + MARGIN
    killed = False
    with tempfile.TemporaryFile() as stderr_file:
        proc = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr_file,
        )  # fmt: skip
        while True:
            try:
                proc.wait(timeout=min(POLL, max(0.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    proc.kill()
                    proc.wait()
                    killed = True
                    break
            finally:
                for event in tail.read():
                    on_event(event)
        stderr_file.seek(0)
        stderr = stderr_file.read().decode(errors="replace")
    for event in tail.read():
        on_event(event)
    os.unlink(path)
    return tail.events, killed, stderr


def _preflight(spec: str, substitute: Sequence[str]) -> None:
    """Raise :class:`UsageError` when the factory cannot build usable adapters."""
    events, killed, stderr = _worker("preflight", spec, "quick", 0, PREFLIGHT_SECONDS, substitute)
    for event in events:
        if event.get("event") == "usage":
            raise UsageError(str(event["message"]))
    if killed:
        raise UsageError(
            f"building two adapters with {spec} did not finish within {PREFLIGHT_SECONDS:g} s "
            "(the factory, or importing its module, hangs); the factory must return promptly"
        )
    if not any(e.get("event") == "done" for e in events):
        raise UsageError(
            f"the process that builds adapters with {spec} died: {stderr.strip()[-600:]}"
        )


def _run_stage(
    stage: Stage,
    spec: str,
    profile: str,
    seed: int,
    seconds: float,
    substitute: Sequence[str],
    progress: Progress | None,
    checks: Sequence[str] = (),
    run_all: bool = False,
    cancel: threading.Event | None = None,
    accepted: str | None = None,
    seen: dict[str, int] | None = None,
    reliability: bool = False,
) -> list[CheckResult]:
    on_event: OnEvent = (
        (lambda event: progress.event(stage.name, event)) if progress else (lambda event: None)
    )
    events, killed, stderr = _worker(
        stage.name, spec, profile, seed, seconds, substitute, on_event, checks, run_all, cancel,
        accepted, reliability,
    )  # fmt: skip
    for event in events:
        if event.get("event") == "accepted" and seen is not None:
            for key, count in event.get("seen", {}).items():
                seen[key] = seen.get(key, 0) + int(count)
    prefix = _replay_prefix(spec, profile, seed, reliability)
    results = [CheckResult.from_json({k: v for k, v in e.items() if k != "event"})
               for e in events if e.get("event") == "result"]  # fmt: skip
    if killed or not any(e.get("event") == "done" for e in events):
        running = [e.get("name") for e in events if e.get("event") == "check"]
        what = f" (last check started: {running[-1]})" if running else ""
        cause = (
            f"did not report within {seconds + MARGIN:.1f} s{what} and was stopped; no call "
            "into the adapter was seen stuck past its bound, so this is not a violation. "
            "Give verify more time (--max-seconds)"
            if killed
            else f"the worker process died without a verdict{what} (the adapter may have "
            f"ended the process, or crashed the interpreter): {stderr.strip()[-400:]}"
        )
        results.append(
            CheckResult(stage.name, "stage finished", (), "inconclusive",
                        f"stage {stage.name} {cause}", detail=stderr[-2000:],
                        replay=f"{prefix} --stage {stage.name}")
        )  # fmt: skip
    return results


StageOutcome = list[CheckResult] | float | None
"""A stage's results; a float: not started, that many seconds were left; None: not wanted."""


def _run_stages(
    chosen: Sequence[Stage],
    jobs: int,
    budget: float,
    start: float,
    keep_going: bool,
    run: Callable[[Stage, float, threading.Event], list[CheckResult]],
    progress: Progress | None,
) -> list[StageOutcome]:
    """Run *chosen* in order, *jobs* at a time; each stage gets its share of the budget
    left when it starts. Once a stage has a confirmed violation (and not *keep_going*),
    the later stages are not started, and those running are stopped."""
    # unwanted[i]: set when stage i's results can no longer count (an earlier stage
    # failed); read by the stage's launch and by its worker's wait loop.
    unwanted = [threading.Event() for _ in chosen]

    def launch(index: int, stage: Stage) -> StageOutcome:
        if unwanted[index - 1].is_set():
            return None
        left = budget - (time.monotonic() - start)
        if left <= 1.0:
            return left
        share = left * stage.share if index < len(chosen) else left
        share = min(left, max(share, stage.floor))
        if progress is not None:
            progress.stage_started(
                f"[verify] stage {index}/{len(chosen)} {stage.name} ({stage.what}): "
                f"up to {share:.0f} s; {left:.0f} s of {budget:.0f} s budget left",
                stage.name,
                share,
            )
        results = run(stage, share, unwanted[index - 1])
        if not keep_going and any(r.verdict == "fail" for r in results):
            for later in unwanted[index:]:
                later.set()
        return results

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="verify-stage") as pool:
        futures: list[Future[StageOutcome]] = [
            pool.submit(launch, index, stage) for index, stage in enumerate(chosen, 1)
        ]
        return [future.result() for future in futures]


def _not_reached(
    report: VerifyReport, stage: Stage, profile: str, why: str, checks: Sequence[str] = ()
) -> None:
    """A ``skip`` result for each check *stage* plans (of *checks*, if any) that has no
    result yet; records the rules each planned check covers (``VerifyReport.planned``)."""
    seen = {r.name for r in report.results if r.stage == stage.name}
    for name, rules in stage.planned(profile):
        if checks and name not in checks:
            continue
        report.planned[f"{stage.name}/{name}"] = list(rules)
        if name not in seen:
            report.results.append(
                CheckResult(stage.name, name, rules, "skip", f"not reached: {why}")
            )


def _check_names(checks: Sequence[str], chosen: Sequence[Stage], profile: str) -> None:
    """Raise :class:`UsageError` for a check name that no chosen stage plans."""
    planned = [name for stage in chosen for name in stage.plan(profile)]
    unknown = [name for name in checks if name not in planned]
    if unknown:
        raise UsageError(
            f"unknown check(s) {unknown} under profile {profile!r}; the chosen stages "
            f"plan: {', '.join(repr(n) for n in planned)}"
        )


def verify(
    spec: str,
    *,
    profile: str = DEFAULT,
    max_seconds: float | None = None,
    seed: int = 0,
    stages: Sequence[str] | None = None,
    keep_going: bool = False,
    progress: Progress | None = None,
    substitute: Sequence[str] = (),
    checks: Sequence[str] = (),
    run_all: bool = False,
    jobs: int | None = None,
    baseline: Baseline | None = None,
    reliability: bool = False,
) -> VerifyReport:
    """Verify the adapter named by *spec*.

    Raises :class:`UsageError` (an ``InvalidValue``) when *spec* cannot be
    imported or its factory cannot build adapters. Stages run cheapest first;
    unless *keep_going*, the first stage with a confirmed violation ends the
    run (a broken adapter fails fast). *run_all* (``--all``) runs every check
    of every stage to the budget even after violations (it implies
    *keep_going*); the report then groups the findings by root cause
    (:attr:`VerifyReport.groups`). *substitute* names extra modules or
    packages whose threads the explorer must control. *checks* (names from
    ``Stage.plan``) runs only those checks of the chosen stages (the pytest
    plugin runs one check alone); every check when empty. *jobs* stages run at
    once, each in its own worker process (default :func:`default_jobs`); the report
    is the one running them one at a time gives: a stage after the first one with a
    confirmed violation is dropped (and stopped if it runs) unless *keep_going*.
    *baseline* (:mod:`.baseline`) accepts known root causes: the verdict is a violation
    only for a root cause it does not accept; it implies *run_all* (every root cause).
    *reliability* (``--reliability``) also judges R25, R30 and R31, the reference adapter's
    rules an adapter may claim too, in the simulate stage's generated worlds
    (:mod:`chunk_adapter.explore.engine.reliability`).
    """
    run_all = run_all or baseline is not None
    keep_going = keep_going or run_all
    if os.getcwd() not in sys.path:  # as in the workers: the current project is importable
        sys.path.insert(0, os.getcwd())
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if max_seconds is not None and not max_seconds > 0:
        raise UsageError(f"max_seconds must be a number of seconds > 0, got {max_seconds!r}")
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise UsageError(f"jobs must be a whole number of worker processes >= 1, got {jobs!r}")
    jobs = default_jobs() if jobs is None else jobs
    unknown = sorted(set(stages or ()) - {s.name for s in STAGES})
    if unknown:
        raise UsageError(
            f"unknown stage(s) {unknown}; choose from {', '.join(s.name for s in STAGES)}"
        )
    _check_names(checks, [s for s in STAGES if stages is None or s.name in stages], profile)
    load_factory(spec)  # usage errors surface here, before any worker starts
    start = time.monotonic()
    if progress is not None:
        progress.stage_started(f"[verify] pre-flight: building two adapters with {spec}", "", 0)
    _preflight(spec, substitute)
    budget = PROFILES[profile].budget if max_seconds is None else max_seconds
    report = VerifyReport(
        spec, profile, seed, budget, run_all=run_all, baseline=baseline, reliability=reliability
    )
    chosen = [s for s in STAGES if stages is None or s.name in stages]
    if checks:  # only the stages that plan one of them
        chosen = [s for s in chosen if set(s.plan(profile)) & set(checks)]
    with tempfile.TemporaryDirectory(prefix="chunk-verify-") as folder:
        known = None
        if baseline is not None:  # what the workers' judge sets aside (oracles.accepted)
            known = os.path.join(folder, "accepted.json")
            with open(known, "w", encoding="utf-8") as handle:
                json.dump(baseline.accepted_json(), handle)
        outcomes = _run_stages(
            chosen, jobs, budget, start, keep_going,
            lambda stage, share, cancel: _run_stage(
                stage, spec, profile, seed, share, substitute, progress, checks, run_all,
                cancel, known, report.accepted_seen, reliability,
            ),
            progress,
        )  # fmt: skip
    stopped_at: int | None = None
    for index, (stage, results) in enumerate(zip(chosen, outcomes, strict=True), 1):
        if stopped_at is not None or results is None:
            # a later stage whose results are not wanted: what running one at a time gives
            _not_reached(
                report, stage, profile,
                "an earlier stage found a confirmed violation (--keep-going runs every stage)",
                checks,
            )  # fmt: skip
            continue
        if isinstance(results, float):
            report.results.append(
                CheckResult(
                    stage.name, "budget", (), "inconclusive",
                    f"stage {stage.name} not started: no budget left of {budget:g} s "
                    "(--max-seconds)", coverage="not started",
                )
            )  # fmt: skip
            _not_reached(report, stage, profile, "no budget was left for the stage", checks)
            continue
        report.results.extend(results)
        report.stages_run.append(stage.name)
        stopped = any(r.verdict == "fail" for r in results)
        _not_reached(
            report, stage, profile,
            "the stage ended at its first confirmed violation (--all runs every check)"
            if stopped and not run_all
            else "the stage stopped before it (see the stage's inconclusive result)",
            checks,
        )  # fmt: skip
        if stopped and not keep_going:
            stopped_at = index
    report.seconds = time.monotonic() - start
    if progress is not None:
        progress.finish()
    return report
