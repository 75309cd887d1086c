"""The verify report as Markdown: for ``$GITHUB_STEP_SUMMARY`` and merge-request comments."""

from __future__ import annotations

from .report import VerifyReport
from .result import rule_checks

__all__ = ["to_markdown", "write_markdown"]

_ICON = {
    "FAIL": "❌ FAIL",
    "accepted": "☑️ accepted",
    "inconclusive": "⚠️ inconclusive",
    "not reached": "⏭️ not reached",
    "passed partly": "◐ passed partly",
    "pass": "✅ pass",
}
_HEADLINE = {
    "pass": "✅ **PASS** — the adapter kept the contract as far as this budget explored",
    "violation": "❌ **VIOLATION** — a confirmed contract violation (exit 1)",
    "inconclusive": "⚠️ **INCONCLUSIVE** — no violation confirmed, but some checks could not "
    "decide (exit 3)",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: VerifyReport) -> str:
    """The verdict, the rule table, each finding with its reproducer, what could not decide."""
    lines = [
        f"## chunk-adapter verify `{report.adapter_spec}`",
        "",
        _HEADLINE[report.verdict],
        "",
        f"profile `{report.profile}`, seed {report.seed}, {report.seconds:.1f} s of "
        f"{report.max_seconds:g} s, stages: {', '.join(report.stages_run) or 'none'}",
        "",
        "| rule | verdict | checks |",
        "|---|---|---|",
    ]
    for rule, verdict, checks in rule_checks(
        report.results, report.planned, report.accepted_results
    ):
        shown = ", ".join(checks[:3]) + (f" (+{len(checks) - 3})" if len(checks) > 3 else "")
        lines.append(f"| {rule} | {_ICON.get(verdict, verdict)} | {_cell(shown)} |")
    judgement = report.judgement
    pairs = report.first_of_groups()
    if pairs:
        lines += ["", f"**Root causes: {len(pairs)}**" + ("" if report.run_all else
                  " (run with `--all` to see every one)")]  # fmt: skip
    for index, (group, result) in enumerate(pairs, 1):
        by = report.baseline.accepts(group) if report.baseline else None
        if by is not None:
            lines += [
                "",
                f"### ☑️ accepted: {result.stage}/{result.name} "
                f"({', '.join(result.rules) or 'no rule'})",
                "",
                _cell(result.evidence),
                "",
                f"Root cause {index} of {len(pairs)}: {group.rule or 'no rule'} — "
                f"{_cell(group.cause)}; accepted: {_cell(by.reason or 'no reason given yet')}",
            ]
            continue
        lines += [
            "",
            f"### ❌ {result.stage}/{result.name} ({', '.join(result.rules) or 'no rule'})",
            "",
            _cell(result.evidence),
            "",
            f"Root cause {index} of {len(pairs)}: {group.rule or 'no rule'} — {_cell(group.cause)}",
        ]
        if len(group.checks) > 1:
            lines += ["", f"Also seen by: {_cell(', '.join(group.checks[1:]))}"]
        if result.confirmation:
            lines += ["", f"Confirmed: {result.confirmation}"]
        if result.replay:
            lines += ["", "Reproduce with:", "", "```sh", result.replay, "```"]
        if result.detail:
            lines += ["", "<details><summary>counterexample</summary>", "", "```"]
            lines += result.detail.rstrip().splitlines()[:200]
            lines += ["```", "", "</details>"]
    if judgement is not None and judgement.stale:
        lines += ["", "**Stale baseline entries** (not seen in this run; delete once fixed):", ""]
        lines += [f"- {_cell(entry.title)}" for entry in judgement.stale]
    for result in report.inconclusive:
        lines += [
            "",
            f"### ⚠️ {result.stage}/{result.name}: inconclusive",
            "",
            _cell(result.evidence),
        ]
        if result.coverage:
            lines += ["", f"Coverage: {result.coverage}"]
    return "\n".join(lines) + "\n"


def write_markdown(report: VerifyReport, path: str, *, append: bool = False) -> None:
    with open(path, "a" if append else "w", encoding="utf-8") as out:
        out.write(to_markdown(report))
