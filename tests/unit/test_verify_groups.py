"""``verify --all``: findings grouped by root cause, and the rule table's "not reached".

Two findings are one group when they name the same root rule, whatever their
messages say; each group keeps the checks that saw it and the reproducer of the
first. Every report form
(text, JSON, JUnit, Markdown) carries the groups.
"""

from __future__ import annotations

import dataclasses
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from chunk_adapter.examples import EXAMPLE_RULES
from chunk_adapter.outcome import CheckResult
from chunk_adapter.verify.groups import cause_of, group_findings, signature
from chunk_adapter.verify.junit import write_junit
from chunk_adapter.verify.markdown import to_markdown
from chunk_adapter.verify.report import VerifyReport, write_text
from chunk_adapter.verify.result import rule_checks, rule_table
from chunk_adapter.verify.stages import STAGES
from tests.unit._reports import schema_properties, validated_json

STALE = "chunk {n} handed out ({{'data': ['{rid}', {n}]}}) was fetched by a get that began before"
R16_STATEFUL = CheckResult(
    "stateful", "machines", ("R16",), "fail",
    "R16: " + STALE.format(n=0, rid="a") + " this registration's load_async: held [request 'a']",
    replay="chunk-adapter replay 'stateful:ci:steps.x' --adapter p:f",
)  # fmt: skip
R16_EXPLORE = CheckResult(
    "explore", "q5-cleanup / pct", ("R16", "R14"), "fail",
    "[violation] R16: " + STALE.format(n=3, rid="b_1") + " this registration's load_async: "
    "other particulars [request 'b_1']",
    replay="chunk-adapter replay 'explore:q5:abc' --adapter p:f",
)  # fmt: skip
R15 = CheckResult(
    "stateful", "machines", ("R15", "R14"), "fail",
    "R15: poll_ready should hand out [] for this request, handed out [{'data': 1}] [request 'c']",
    replay="chunk-adapter replay 'stateful:ci:steps.y' --adapter p:f",
)  # fmt: skip
EXAMPLES_STAGE = next(stage for stage in STAGES if stage.name == "examples")
R9_PASS = CheckResult("examples", "example 2", ("R9",), "pass", "held")
NOT_REACHED = CheckResult("explore", "q2-retry / pct", ("R9", "R10"), "skip", "not reached: x")


def report(*results: CheckResult, run_all: bool = True) -> VerifyReport:
    return VerifyReport("p:f", "ci", 0, 240.0, results=list(results), run_all=run_all)


def test_the_cause_is_the_root_rule_whatever_the_message_says() -> None:
    """One defect, seen by two checks that word it differently (and by one check with other
    particulars on another seed): one cause. Nothing is read out of the message."""
    other_words = CheckResult(
        "stress", "faults", ("R16",), "fail",
        "R16: cleanup_receiver returned while a get was in flight",
    )  # fmt: skip
    assert cause_of(R16_STATEFUL) == cause_of(R16_EXPLORE) == cause_of(other_words)
    assert cause_of(R16_STATEFUL) == ("R16", "`cleanup_receiver` is a commit fence")
    assert cause_of(R15) == ("R15", "`poll_ready` drains atomically")
    # the rule decides, not the text: a message naming R16 under a finding of R15
    assert cause_of(dataclasses.replace(R15, evidence=R16_STATEFUL.evidence))[0] == "R15"


def test_a_finding_that_names_no_rule_is_a_cause_of_its_own_check() -> None:
    raised = CheckResult("examples", "example 2", (), "fail", "the adapter raised KeyError('a')")
    elsewhere = dataclasses.replace(raised, name="example 3")
    assert cause_of(raised) == ("", "examples/example 2")
    assert signature(*cause_of(raised)) == "no rule: examples/example 2"
    assert [g.cause for g in group_findings([raised, elsewhere, raised])] == [
        "examples/example 2",
        "examples/example 3",
    ]


def test_one_bug_seen_by_two_stages_is_one_group_and_two_bugs_are_two() -> None:
    groups = group_findings([R9_PASS, R16_STATEFUL, R15, R16_EXPLORE, NOT_REACHED])
    assert [g.rule for g in groups] == ["R16", "R15"]
    stale, swap = groups
    assert stale.checks == ["stateful/machines", "explore/q5-cleanup / pct"]
    assert stale.replay == R16_STATEFUL.replay  # the first stage's reproducer first
    assert stale.replays == [R16_STATEFUL.replay, R16_EXPLORE.replay]
    assert stale.named == ["R16", "R14"]  # the consequences its findings name, after it
    assert swap.checks == ["stateful/machines"] and swap.findings == [R15]


def test_the_same_rule_seen_through_another_check_is_the_same_group() -> None:
    """Issue 29: a defect was split by message text (R16 x4, R6 x3, R23 x3 on a port of
    vllm-omni's adapter). Two wordings of one rule are one root cause."""
    other = CheckResult("stress", "faults", ("R16",), "fail", "R16: cleanup_receiver returned "
                        "while a get was in flight")  # fmt: skip
    (group,) = group_findings([R16_STATEFUL, other])
    assert group.checks == ["stateful/machines", "stress/faults"]
    assert group.evidence == R16_STATEFUL.evidence  # the first finding's words are shown


def test_the_rule_table_says_not_reached_and_pass_only_when_every_check_ran() -> None:
    table = {rule: verdict for rule, verdict, _ in rule_table([R9_PASS, NOT_REACHED, R15])}
    # passed in examples, but explore never got to it: never "not reached" when a check
    # of the rule ran and passed
    assert table["R9"] == "passed partly"
    assert table["R10"] == "not reached"
    assert table["R15"] == "FAIL"
    assert table["R1"] == "not checked"
    assert {r: v for r, v, _ in rule_table([R9_PASS])}["R9"] == "pass"
    # a failing check stopped at what it found: its other planned rules were not reached
    planned = {"stateful/machines": ["R4", "R15", "R23"]}
    table = {rule: (verdict, checks) for rule, verdict, checks in rule_checks([R15], planned)}
    assert table["R23"] == ("not reached", ["stateful/machines"])
    assert table["R15"] == ("FAIL", ["stateful/machines"])
    assert table["R1"] == ("not checked", [])


def test_the_examples_stage_plans_each_example_with_the_rules_it_checks() -> None:
    """An example that failed on one rule leaves its other rules "not reached", not "not
    checked — no check in the stages run" (issue 29: R1 after example 2 failed on R4)."""
    planned = dict(EXAMPLES_STAGE.planned("ci"))
    assert planned["example 2"] == EXAMPLE_RULES["example_2"]
    assert {"R1", "R4"} <= set(planned["example 2"])
    failed = CheckResult("examples", "example 2", ("R4",), "fail", "R4: 'v' received ...")
    table = dict(
        (rule, verdict)
        for rule, verdict, _ in rule_checks(
            [failed], {f"examples/{name}": rules for name, rules in planned.items()}
        )
    )
    assert table["R4"] == "FAIL"
    assert table["R1"] == "not reached"


def test_text_prints_each_root_cause_once_with_the_checks_that_saw_it() -> None:
    out = io.StringIO()
    write_text(report(R16_STATEFUL, R15, R16_EXPLORE), out)
    text = out.getvalue()
    assert text.count("\nVIOLATION in ") == 2, text
    assert "root cause 1 of 2: R16" in text and "root cause 2 of 2: R15" in text
    assert "also seen by: explore/q5-cleanup / pct" in text
    assert "3 confirmed contract violation(s), 2 root cause(s) (exit 1)" in text
    assert "--all runs every check" not in text  # it did
    out = io.StringIO()
    write_text(report(R15, run_all=False), out)
    assert "--all runs every check" in out.getvalue()


def test_json_junit_and_markdown_carry_the_groups(tmp_path: Path) -> None:
    r = report(R9_PASS, R16_STATEFUL, R15, R16_EXPLORE, NOT_REACHED)
    data = validated_json(r, tmp_path / "r.json")
    assert data["all"] is True
    assert {"all", "groups"} <= set(data) <= schema_properties()
    assert [(g["rule"], g["checks"]) for g in data["groups"]] == [
        ("R16", ["stateful/machines", "explore/q5-cleanup / pct"]),
        ("R15", ["stateful/machines"]),
    ]
    assert data["groups"][0]["replay"] == R16_STATEFUL.replay
    junit = tmp_path / "j.xml"
    write_junit(r, str(junit))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") or "" for p in suite.iter("property")}
    assert props["root_causes"] == "2" and props["all"] == "true"
    assert props["root_cause.1"].startswith("R16: `cleanup_receiver` is a commit fence")
    assert "reproduce with: " + str(R15.replay) in props["root_cause.2"]
    failures = [f.text or "" for f in suite.iter("failure")]
    assert sum(t.startswith("root cause 1 of 2: R16") for t in failures) == 2, failures
    md = to_markdown(r)
    assert "**Root causes: 2**" in md and "Root cause 2 of 2: R15" in md
    assert "Also seen by: explore/q5-cleanup / pct" in md
    assert "| R10 | ⏭️ not reached |" in md
