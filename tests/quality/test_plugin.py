"""The pytest plugin and the one-call API, as a user's test suite meets them.

The suite is run in a subprocess the way a user runs it: ``--pyargs
chunk_adapter.conformance``, from the repository or from a directory of the
user's own (where the installed suite lies outside pytest's rootdir).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chunk_adapter.conformance import _planned, _verdict, check_id
from chunk_adapter.verify import ContractViolation, UsageError, check_adapter
from chunk_adapter.verify.report import VerifyReport
from chunk_adapter.verify.result import CheckResult
from chunk_adapter.verify.runner import verify
from chunk_adapter.verify.stages import STAGES, Stage

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "tests.quality.broken_explore:NoTokenCheck"  # breaks R16 in the cleanup-fence probe


def run_pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # COLUMNS: the short summary line is cut to the terminal's width.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]),
               COLUMNS="300")  # fmt: skip
    env.pop("CI", None)  # under CI pytest prints whole messages: test the ordinary terminal
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip


def junit_cases(path: Path) -> list[ET.Element]:
    return list(ET.parse(path).getroot().iter("testcase"))


@pytest.mark.rule("R16")
@pytest.mark.timeout(300)  # two pytest runs in subprocesses, each with its own workers
def test_the_conformance_suite_fails_a_broken_adapter_naming_the_rule(tmp_path: Path) -> None:
    proc = run_pytest(
        "--pyargs", "chunk_adapter.conformance", "-k", "examples",
        "--chunk-adapter", BROKEN, "--junit-xml", str(tmp_path / "all.xml"),
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "reproduce with:" in out, out
    # The header shows the flags in effect, ready to paste back.
    assert f"chunk-adapter: --chunk-adapter {BROKEN} --chunk-profile ci --chunk-seed 0" in out, out
    # The short summary line: the node id, then the root rule and cause.
    nodeid = "chunk_adapter.conformance::test_check[examples-cleanup-fence]"
    summary = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert len(summary) == 1 and summary[0].startswith(f"FAILED {nodeid} - R16: "), summary
    # JUnit: one case per check, a non-empty classname, the one-line cause as the message.
    cases = {c.get("name"): c for c in junit_cases(tmp_path / "all.xml")}
    from chunk_adapter.verify.stage_fns import examples_plan

    assert len(cases) == len(examples_plan("ci")), sorted(cases)
    assert {c.get("classname") for c in cases.values()} == {"chunk_adapter.conformance"}
    failure = cases["test_check[examples-cleanup-fence]"].find("failure")
    assert failure is not None, cases
    message = failure.get("message", "")
    assert message.startswith("R16: ") and "\n" not in message, message
    assert cases["test_check[examples-stop-with-a-blocked-build]"].find("skipped") is not None
    # The failure prints the command that runs this check alone; run it.
    alone = next(line for line in out.splitlines() if "this check alone: " in line)
    command = shlex.split(alone.split("this check alone: ", 1)[1])
    assert command[0] == "pytest" and nodeid in command, command
    again = run_pytest(*command[1:], "--junit-xml", str(tmp_path / "one.xml"))
    assert again.returncode == 1, again.stdout + again.stderr
    assert [c.get("name") for c in junit_cases(tmp_path / "one.xml")] == [
        "test_check[examples-cleanup-fence]"
    ], again.stdout


@pytest.mark.timeout(300)  # two pytest runs in subprocesses
def test_each_check_is_one_item_whose_node_id_runs_it_alone(tmp_path: Path) -> None:
    """Collected from a user's directory (the suite outside the rootdir), every node id
    names the suite's module; pasted back after --pyargs it runs exactly that check."""
    proc = run_pytest("--pyargs", "chunk_adapter.conformance", "--collect-only", "-q",
                      cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    checks = [(s.name, c) for s in STAGES for c in s.plan("ci")]
    assert len(ids) == len(set(ids)) == len(checks), ids
    assert all(i.startswith("chunk_adapter.conformance::test_check[") for i in ids), ids
    picked = next(i for i in ids if i.endswith("[examples-bad-input]"))
    one = run_pytest("--pyargs", picked, "--junit-xml", str(tmp_path / "one.xml"), cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "1 passed" in one.stdout, one.stdout
    cases = junit_cases(tmp_path / "one.xml")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("chunk_adapter.conformance", "test_check[examples-bad-input]")
    ], one.stdout


def test_verify_runs_only_the_checks_named() -> None:
    """The broken adapter fails the cleanup-fence probe; alone, another probe passes."""
    report = verify(BROKEN, stages=["examples"], checks=["stop and after"], max_seconds=60)
    assert [(r.name, r.verdict) for r in report.results] == [("stop and after", "pass")]
    with pytest.raises(UsageError, match="unknown check"):
        verify(BROKEN, stages=["examples"], checks=["no such check"])


def test_a_stage_without_a_plan_is_one_item(monkeypatch: pytest.MonkeyPatch) -> None:
    import chunk_adapter.conformance as suite

    planless = Stage("planless", "chunk_adapter.verify.stage_fns:examples", 0.1, "no plan")
    monkeypatch.setattr(suite, "STAGES", (*STAGES[:1], planless))
    planned = [(stage.name, check) for stage, check in _planned("ci")]
    assert planned[-1] == ("planless", "")
    assert check_id("planless", "") == "planless"
    assert check_id("stateful", "machines (ci: 150 examples x 40 steps)") == "stateful-machines"


def _report(*results: CheckResult) -> VerifyReport:
    report = VerifyReport("m:f", "ci", 0, 10.0)
    report.results.extend(results)
    return report


def test_a_check_without_a_verdict_of_its_own_reports_the_stages() -> None:
    """A stage stopped while running a check: that check and the later ones are
    inconclusive with the stage's reason; a check that ran keeps its own verdict."""
    stopped = CheckResult("examples", "stage finished", (), "inconclusive", "killed")
    report = _report(
        CheckResult("examples", "example 2", ("R1",), "pass", "held"),
        stopped,
        CheckResult("examples", "example 3", (), "skip", "not reached"),
    )
    assert [r.verdict for r in _verdict(report, "examples", "example 2")] == ["pass"]
    assert _verdict(report, "examples", "example 3")[0] is stopped
    assert _verdict(report, "examples", "bad input") == [stopped]
    # A finding that belongs to no planned check is never lost.
    found = CheckResult("examples", "stage", ("R3",), "fail", "R3: stuck")
    assert _verdict(_report(found), "examples", "example 2") == [found]


@pytest.mark.rule("R4")
def test_check_adapter_raises_with_the_report() -> None:
    with pytest.raises(ContractViolation) as caught:
        check_adapter("tests.quality.broken_stateful:missing_snapshot", profile="quick")
    report = caught.value.report
    assert report.exit_code == 1
    assert any("R4" in r.rules for r in report.failures), report.failures
    assert "R4" in str(caught.value)


def test_the_old_option_name_still_works_with_a_deprecation_warning() -> None:
    proc = run_pytest(
        "--pyargs", "chunk_adapter.conformance", "-k", "examples-bad-input",
        "--adapter", "chunk_adapter.adapter:ChunkAdapter", "--hypothesis-seed", "7",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "--adapter is deprecated; use --chunk-adapter" in out, out
    assert "--chunk-seed 7" in out, out


@pytest.mark.timeout(300)  # two pytest runs in subprocesses, one with its examples worker
def test_an_accepted_failure_is_xfailed_and_a_bad_baseline_is_a_usage_error(
    tmp_path: Path,
) -> None:
    proc = run_pytest(
        "--pyargs", "chunk_adapter.conformance", "-k", "examples-cleanup-fence", "-rx",
        "--chunk-adapter", BROKEN, "--chunk-accept", "R16=tracked upstream",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 xfailed" in out and "accepted: R16" in out and "tracked upstream" in out, out
    proc = run_pytest("--pyargs", "chunk_adapter.conformance", "--collect-only", "-q",
                      "--chunk-baseline", str(tmp_path / "missing.toml"))  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "does not exist; write one with chunk-adapter verify --write-baseline" in proc.stderr
