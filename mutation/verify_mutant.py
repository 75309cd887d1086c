"""cosmic-ray's test command: run ``chunk-adapter verify`` on the mutated reference adapter.

cosmic-ray mutates a module in place in a working copy, runs this command from
that copy's root, and restores the module. This script makes sure the verify
run imports the MUTATED copy (``PYTHONPATH`` is the copy's ``src``, checked
before anything runs), runs verify with a JSON report, and classifies the
outcome (docs/quality.md, "Outcomes"):

==========  =============================================  =============  ======
outcome     when                                           in the score   exit
==========  =============================================  =============  ======
killed      verify exit 1 and its JSON report's verdict    killed         1
            is "violation" (a confirmed reproducer)
survived    verify exit 0 (pass)                           not killed     0
undecided   verify exit 3 (inconclusive), or verify ran    not killed     0
            past this script's own limit (timeout)
incompetent verify exit 2 (the mutated adapter cannot be   left out       0
            imported or built), or verify crashed (any
            other exit, or exit 1 without a violation
            report)
==========  =============================================  =============  ======

Only "killed" exits non-zero, so cosmic-ray's own counts (``cr-report``) never
credit verify with a kill it did not confirm: they are a lower bound. The
outcome is printed on a line ``MUTATION-OUTCOME: <outcome> ...`` which
``mutation/report.py`` reads back from the session.

Usage (as cosmic-ray's test-command; run by hand to try one mutant)::

    python mutation/verify_mutant.py [--src DIR] [--limit SECONDS] -- VERIFY-ARGS...
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MARKER = "MUTATION-OUTCOME:"
OUTCOMES = ("killed", "survived", "undecided", "incompetent")
EXIT_KILLED = 1


def classify(exit_code: int | None, report: dict[str, Any] | None) -> tuple[str, str]:
    """The outcome of one verify run and why: ``exit_code`` None means it timed out.

    ``report`` is verify's ``--json`` report, or None when it wrote none.
    """
    if exit_code is None:
        return "undecided", "verify ran past the mutation run's limit (timeout)"
    if exit_code == 1:
        if report is not None and report.get("verdict") == "violation":
            failed = [r["rule"] for r in report.get("rules", []) if r.get("verdict") == "FAIL"]
            root = _root_rules(report)
            checks = [
                f"{c.get('stage')}/{c.get('name')}"
                for c in report.get("checks", [])
                if c.get("verdict") == "fail"
            ]
            return "killed", (
                "verify exit 1: violation of "
                + ",".join(root or failed or ["?"])
                + (f" [{'; '.join(checks)}]" if checks else "")
            )
        return "incompetent", "verify exit 1 without a violation report: it crashed"
    if exit_code == 0:
        return "survived", "verify exit 0: pass"
    if exit_code == 2:
        return "incompetent", "verify exit 2: the mutated adapter cannot be imported or built"
    if exit_code == 3:
        return "undecided", "verify exit 3: inconclusive"
    return "incompetent", f"verify exit {exit_code}: it crashed"


def _root_rules(report: dict[str, Any]) -> list[str]:
    """The root-cause rule (first listed) of each failed check, in report order."""
    roots: list[str] = []
    for check in report.get("checks", []):
        rules = check.get("rules") or []
        if check.get("verdict") == "fail" and rules and rules[0] not in roots:
            roots.append(rules[0])
    return roots


def parse_outcome(output: str | None) -> tuple[str, str]:
    """Read back the outcome line this script printed into *output* (cosmic-ray stores it).

    No such line means the command did not finish normally: incompetent.
    """
    for line in reversed((output or "").splitlines()):
        if line.startswith(MARKER):
            outcome, _, why = line[len(MARKER) :].strip().partition(" ")
            if outcome in OUTCOMES:
                return outcome, why.strip().removeprefix("(").removesuffix(")")
    return "incompetent", "no outcome line: the test command did not finish normally"


def exit_status(outcome: str) -> int:
    """What cosmic-ray sees: non-zero (a kill) for a confirmed violation only."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
    return EXIT_KILLED if outcome == "killed" else 0


def _check_imports(src: Path, env: dict[str, str]) -> str | None:
    """None if ``chunk_adapter`` resolves to *src*; else what it resolves to."""
    probe = subprocess.run(
        [sys.executable, "-c", "import chunk_adapter.adapter as m; print(m.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    where = probe.stdout.strip()
    expected = (src / "chunk_adapter" / "adapter.py").resolve()
    if probe.returncode != 0:
        return None  # the mutant breaks the import: verify will say so (exit 2)
    return None if Path(where).resolve() == expected else where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default="src", help="the working copy's src directory (src)")
    parser.add_argument(
        "--limit", type=float, default=600.0, help="seconds before verify counts as hung (600)"
    )
    parser.add_argument("verify_args", nargs="*", help="arguments for chunk-adapter verify")
    args = parser.parse_args(argv)
    src = Path(args.src).resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a stale .pyc must never stand in for a mutant
    wrong = _check_imports(src, env)
    if wrong is not None:
        print(
            f"chunk_adapter imports from {wrong}, not from the mutated copy under {src}: "
            "run this from the working copy's root or pass --src"
        )
        print(f"{MARKER} incompetent (imports resolve outside the working copy)")
        return 0
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        report_path = Path(tmp) / "verify.json"
        command = [
            sys.executable,
            "-m",
            "chunk_adapter",
            "verify",
            "-q",
            "--json",
            str(report_path),
            *args.verify_args,
        ]
        print("$", " ".join(command), flush=True)
        proc = subprocess.Popen(command, env=env, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=args.limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # verify and its stage processes
            proc.wait()
            code = None
        report = None
        if report_path.exists():
            try:
                report = json.loads(report_path.read_text())
            except ValueError:
                report = None
    outcome, why = classify(code, report)
    print(f"{MARKER} {outcome} ({why})", flush=True)
    return exit_status(outcome)


if __name__ == "__main__":
    sys.exit(main())
