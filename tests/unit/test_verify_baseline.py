"""Baselines (``verify --write-baseline / --baseline / --accept``): accept the root causes
an adapter already has, fail only on new ones, report the fixed ones as stale.

The findings are CheckResults as the stages report them; the same defect found
with other particulars or other words (another seed: other chunk ids, request
names, values; another check) must match its entry, another rule must not.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from chunk_adapter.cli import main
from chunk_adapter.errors import UsageError
from chunk_adapter.oracles import accepted, check
from chunk_adapter.outcome import CheckResult
from chunk_adapter.verify.baseline import (
    Baseline,
    Waiver,
    judge,
    load_baseline,
    parse_waiver,
    write_baseline,
)
from chunk_adapter.verify.junit import write_junit
from chunk_adapter.verify.markdown import to_markdown
from chunk_adapter.verify.report import VerifyReport, write_text
from tests.unit._history_script import Script, c
from tests.unit._reports import validated_json


def stale_commit(n: int, rid: str) -> CheckResult:
    return CheckResult(
        "stateful", "machines", ("R16", "R14"), "fail",
        f"R16: chunk {n} handed out ({{'data': ['{rid}', {n}]}}) was fetched by a get that "
        f"began before this registration's load_async [request '{rid}']",
        replay=f"chunk-adapter replay 'stateful:ci:{rid}{n}' --adapter p:f",
    )  # fmt: skip


def no_swap(rid: str) -> CheckResult:
    return CheckResult(
        "simulate", "worlds", ("R15",), "fail",
        f"R15: poll_ready should hand out [] for this request, handed out [{{'data': 1}}] "
        f"[request '{rid}']",
        replay="chunk-adapter replay 'simulate:ab' --adapter p:f",
    )  # fmt: skip


def id_skipped(n: int) -> CheckResult:
    evidence = f"R9: chunk ids 0..{n} were put as {n + 1} (a chunk id skipped)"
    return CheckResult("examples", "example 4", ("R9",), "fail", evidence)


PASSED = CheckResult("examples", "example 2", ("R1",), "pass", "held")


def run(*results: CheckResult, baseline: Baseline | None = None) -> VerifyReport:
    return VerifyReport("p:f", "ci", 0, 240.0, list(results), run_all=True, baseline=baseline)


def text_of(report: VerifyReport) -> str:
    out = io.StringIO()
    write_text(report, out)
    return out.getvalue()


def written(tmp_path: Path, *results: CheckResult) -> Baseline:
    return write_baseline(run(*results), str(tmp_path / "baseline.toml"), None)


def test_a_written_baseline_accepts_what_it_recorded_and_the_verdict_passes(
    tmp_path: Path,
) -> None:
    baseline = written(tmp_path, PASSED, stale_commit(0, "a"), no_swap("b"))
    assert [e.rule for e in baseline.entries] == ["R16", "R15"]
    # another seed: other chunk ids, other request names, another stage order
    again = run(PASSED, no_swap("z_3"), stale_commit(7, "q"), baseline=baseline)
    assert again.verdict == "pass" and again.exit_code == 0
    text = text_of(again)
    assert text.count("\nACCEPTED in ") == 2 and "\nVIOLATION in " not in text, text
    assert "no reason given yet" in text
    assert "PASS: " in text and "2 known root cause(s)" in text
    table = {line.split()[0]: line.split()[1] for line in text.splitlines()[3:27] if line}
    assert table["R16"] == "accepted" and table["R15"] == "accepted" and table["R1"] == "pass"


def test_a_new_root_cause_fails_and_is_the_only_violation_named(tmp_path: Path) -> None:
    baseline = written(tmp_path, stale_commit(0, "a"), no_swap("b"))
    report = run(stale_commit(2, "c"), id_skipped(3), no_swap("d"), baseline=baseline)
    assert report.verdict == "violation" and report.exit_code == 1
    assert [g.rule for g in report.new_groups] == ["R9"]
    text = text_of(report)
    assert text.count("\nVIOLATION in ") == 1 and "VIOLATION in examples/example 4" in text
    assert "new: no entry of the baseline accepts it" in text
    assert "1 new root cause(s) (exit 1); 2 known root cause(s) accepted" in text


def test_the_accepted_rule_seen_through_another_check_is_still_accepted(tmp_path: Path) -> None:
    """On another seed one defect may show first through a check with other words: the
    entry is the rule's, so the gate stays green (it went red under version 1's matching
    by message); another rule is new."""
    baseline = written(tmp_path, stale_commit(0, "a"))
    other = CheckResult("stress", "faults", ("R16",), "fail",
                        "R16: cleanup_receiver returned while a get was in flight")  # fmt: skip
    assert run(other, baseline=baseline).exit_code == 0
    assert run(other, id_skipped(1), baseline=baseline).exit_code == 1


def test_a_version_1_file_is_read_its_entries_of_one_rule_folded(tmp_path: Path) -> None:
    """Version 1 wrote an entry per message; each rule's entries fold into one, reasons and
    checks kept, and a rule-less entry is named by the check that saw it."""
    path = tmp_path / "old.toml"
    path.write_text(
        "version = 1\n"
        "[[accepted]]\nrule = 'R16'\ncause = 'chunk … handed out … was fetched'\n"
        "reason = 'tracked in #12'\nseen_by = ['stateful/machines']\n"
        "[[accepted]]\nrule = 'R16'\ncause = 'the get … began after cleanup_receiver'\n"
        "reason = 'tracked in #12'\nseen_by = ['explore/q5 / pct']\n"
        "[[accepted]]\nrule = 'R16'\ncause = 'poll_ready handed out … after'\n"
        "reason = 'same bug, fence'\n"
        "[[accepted]]\nrule = ''\ncause = 'the adapter raised …'\n"
        "seen_by = ['examples/example 2']\n"
    )
    old = load_baseline(str(path))
    assert [(e.signature, e.reason, e.seen_by) for e in old.entries] == [
        ("R16", "tracked in #12; same bug, fence", ("stateful/machines", "explore/q5 / pct")),
        ("no rule: examples/example 2", "", ("examples/example 2",)),
    ]
    raised = CheckResult("examples", "example 2", (), "fail", "the adapter raised KeyError(1)")
    assert run(stale_commit(3, "x"), raised, baseline=old).exit_code == 0
    rewritten = write_baseline(run(stale_commit(3, "x")), str(path), old)
    assert "version = 2" in path.read_text()
    assert [e.signature for e in rewritten.entries] == ["R16", "no rule: examples/example 2"]
    assert rewritten.entries[0].reason == "tracked in #12; same bug, fence"


def test_an_entry_not_seen_is_stale_and_the_run_still_passes(tmp_path: Path) -> None:
    baseline = written(tmp_path, stale_commit(0, "a"), no_swap("b"))
    report = run(no_swap("c"), baseline=baseline)
    assert report.exit_code == 0
    judgement = report.judgement
    assert judgement is not None and [e.rule for e in judgement.stale] == ["R16"]
    text = text_of(report)
    assert "STALE baseline entries" in text and "\n  R16 — `cleanup_receiver` is a" in text
    # found by the machines only (a search): this run's seed may just not have reached it
    assert "(found by a search only, stateful/machines: another seed may not" in text, text
    assert "no proof of a fix" not in text  # every check decided
    unsure = CheckResult("explore", "q5", ("R16",), "inconclusive", "budget")
    assert "no proof of a fix" in text_of(run(no_swap("c"), unsure, baseline=baseline))


def test_a_waiver_accepts_every_root_cause_of_its_rule_with_its_reason() -> None:
    waived = Baseline().with_waivers([parse_waiver("r9 = our ids restart per stream")])
    report = run(id_skipped(3), baseline=waived)
    assert report.exit_code == 0
    assert "R9 is waived (our ids restart per stream)" in text_of(report)
    assert run(id_skipped(3), no_swap("a"), baseline=waived).exit_code == 1
    assert parse_waiver("R21").reason == "(no reason given)"


def test_rewriting_keeps_the_reasons_a_human_wrote(tmp_path: Path) -> None:
    path = tmp_path / "baseline.toml"
    write_baseline(run(stale_commit(0, "a"), no_swap("b")), str(path), None)
    path.write_text(path.read_text().replace('reason = ""', 'reason = "tracked in #12"', 1))
    previous = load_baseline(str(path))
    assert [e.reason for e in previous.entries] == ["tracked in #12", ""]
    rewritten = write_baseline(run(no_swap("x"), stale_commit(5, "y")), str(path), previous)
    reasons = {e.rule: e.reason for e in rewritten.entries}
    assert reasons == {"R15": "", "R16": "tracked in #12"}


def test_the_file_is_readable_toml_a_reviewer_can_follow(tmp_path: Path) -> None:
    baseline = written(tmp_path, stale_commit(0, "a"))
    text = (tmp_path / "baseline.toml").read_text()
    assert text.startswith("# chunk-adapter verify baseline")
    assert "[[accepted]]" in text and 'rule = "R16"' in text and 'reason = ""' in text
    assert baseline.entries[0].seen_by == ("stateful/machines",)
    assert "chunk 0 handed out" in baseline.entries[0].example


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("version = 2\n[[accepted]]\nrule = 'R99'\ncause = 'x'\n", "'R99' is not a contract rule"),
        ("version = 3\n", "has version 3"),
        ("version = 2\nacepted = []\n", "unknown key(s) ['acepted']"),
        ("version = 2\n[[accepted]]\nrule = ''\n", "'cause' must be a string"),
        ("version = 2\n[[accepted]]\nrule = 'R1'\ncause = 3\n", "'cause' must be a string"),
        ("version = 1\n[[waiver]]\nrule = 'R1'\nreason = ''\n", "say why in 'reason'"),
        ("version = 1\n[[accepted]\n", "not valid TOML"),
    ],
)
def test_a_bad_baseline_file_is_refused_naming_what_is_wrong(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "b.toml"
    path.write_text(content)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_baseline(str(path))


def test_bad_flags_exit_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.toml")
    assert main(["verify", "--baseline", missing]) == 2
    assert "does not exist; write one with chunk-adapter verify --write-baseline" in (
        capsys.readouterr().err
    )
    assert main(["verify", "--accept", "R0=x"]) == 2
    assert "rule 'R0' is not a contract rule" in capsys.readouterr().err
    with pytest.raises(UsageError, match="give a rule"):
        parse_waiver("=because")


def test_json_junit_and_markdown_show_accepted_findings_as_such(tmp_path: Path) -> None:
    baseline = written(tmp_path, stale_commit(0, "a"))
    report = run(PASSED, stale_commit(1, "b"), id_skipped(2), baseline=baseline)
    data = validated_json(report, tmp_path / "r.json")
    assert [(g["rule"], g["status"]) for g in data["groups"]] == [
        ("R16", "accepted"), ("R9", "new")
    ]  # fmt: skip
    assert data["baseline"]["accepted"] == 1 and data["baseline"]["new"] == 1
    assert {r["rule"]: r["verdict"] for r in data["rules"]}["R16"] == "accepted"
    assert json.loads(json.dumps(run(PASSED).to_json()))["baseline"] is None
    junit = tmp_path / "j.xml"
    write_junit(report, str(junit))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    skipped = [s.get("message") or "" for s in suite.iter("skipped")]
    assert any(m.startswith("accepted by the baseline: R16") for m in skipped), skipped
    md = to_markdown(report)
    assert "### ☑️ accepted: stateful/machines" in md and "### ❌ examples/example 4" in md


def test_judge_sorts_groups_without_a_report() -> None:
    from chunk_adapter.verify.groups import group_findings

    groups = group_findings([stale_commit(0, "a"), no_swap("b")])
    judgement = judge(groups, Baseline(waivers=[Waiver("R15", "deliberate")]))
    assert [g.rule for g in judgement.new] == ["R16"]
    assert [(g.rule, by.reason) for g, by in judgement.accepted] == [("R15", "deliberate")]


@pytest.fixture
def accepting() -> Iterator[Callable[..., None]]:
    """Install root causes as accepted in this process (as a verify worker does); undone."""

    def install(rules: Sequence[str] = ()) -> None:
        accepted.install(accepted.Accepted.of(rules))

    yield install
    accepted.install(accepted.Accepted())


def _ghost() -> Script:
    """A history whose root violation is R14: a chunk handed out that was never got."""
    s = Script()
    s.load("r")
    s.poll({"r": [c("ghost")]})
    return s


def test_the_judge_sets_aside_a_history_whose_root_cause_is_accepted(
    accepting: Callable[..., None],
) -> None:
    found = check(_ghost().h, quiescent=False)
    assert [v.rule for v in found] == ["R14"]
    accepting(["R14"])
    assert check(_ghost().h, quiescent=False) == []
    assert check(_ghost().h, quiescent=False) == []
    assert accepted.seen() == {"R14": 2} and accepted.total() == 2
    accepting(["R15"])  # another rule accepted: this one is reported
    assert [v.rule for v in check(_ghost().h, quiescent=False)] == ["R14"]
    accepting()
    assert [v.rule for v in check(_ghost().h, quiescent=False)] == ["R14"]
    assert accepted.seen() == {}


def test_a_history_is_set_aside_when_any_of_its_violations_is_accepted(
    accepting: Callable[..., None],
) -> None:
    """One defect shows through several checks, the first to fire varying: an accepted
    violation anywhere in the history sets it aside, not only as its root."""
    s = Script()
    s.load("r")
    s.poll({"r": []})  # R15: an empty list handed out (the root: it comes first)
    s.poll({"r": [c("ghost")]})  # R14: a value no get returned
    found = check(s.h, quiescent=False)
    assert [v.rule for v in found] == ["R15", "R14"]
    accepting(["R14"])
    assert check(s.h, quiescent=False) == []
    assert accepted.seen() == {"R14": 1}
    accepting(["R13"])
    assert [v.rule for v in check(s.h, quiescent=False)] == ["R15", "R14"]


def test_an_entry_set_aside_by_the_judge_is_not_stale(tmp_path: Path) -> None:
    baseline = written(tmp_path, stale_commit(0, "a"), no_swap("b"))
    r16 = baseline.entries[0].signature
    report = run(no_swap("c"), baseline=baseline)
    report.accepted_seen = {r16: 3}
    judgement = report.judgement
    assert judgement is not None and judgement.stale == []
    assert [(e.rule, n) for e, n in judgement.set_aside] == [("R16", 3)]
    text = text_of(report)
    assert "set aside by the judge" in text and "STALE" not in text
    assert "2 known root cause(s)" in text


def test_rewriting_only_adds_what_this_run_found(tmp_path: Path) -> None:
    """Not meeting an entry (another seed, a budget) is no proof its bug is gone: a
    rewrite gathers, and a human deletes what the report calls stale."""
    path = str(tmp_path / "baseline.toml")
    previous = write_baseline(run(stale_commit(0, "a"), no_swap("b")), path, None)
    again = run(no_swap("c"), id_skipped(2), baseline=previous)
    rules = [e.rule for e in write_baseline(again, path, previous).entries]
    assert rules == ["R15", "R9", "R16"]  # what this run found, then the file's others


def test_a_finding_naming_several_violations_is_accepted_by_any_of_them(tmp_path: Path) -> None:
    """A worked example reports every violation it saw, in the order it checked them; on
    another seed another comes first. An entry for any of them accepts the finding."""

    def example_2(first: str, second: str) -> CheckResult:
        parts = {
            "R4": "R4: 'v' received [['a', 'b']], expected the snapshots ['a'] then ['a', 'b']",
            "R15": "R15: q's chunks came as {'q': [1, 2]}, expected [1, 2]",
        }
        return CheckResult("examples", "example 2", (first, second), "fail",
                           f"{parts[first]}; {parts[second]}")  # fmt: skip

    baseline = written(tmp_path, example_2("R15", "R4"))
    assert [e.rule for e in baseline.entries] == ["R15"]
    report = run(example_2("R4", "R15"), baseline=baseline)
    judgement = report.judgement
    assert judgement is not None and report.exit_code == 0 and judgement.stale == []
    assert [(g.rule, by.rule) for g, by in judgement.accepted] == [("R4", "R15")]
    assert run(example_2("R4", "R15"), id_skipped(1), baseline=baseline).exit_code == 1
