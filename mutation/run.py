"""The mutation run: cosmic-ray on the reference adapter, ``chunk-adapter verify`` as the test.

``tox -e mutation`` runs this. It

1. makes ``--jobs`` copies (shards) of ``src/`` and ``mutation/`` under ``--out``,
   so cosmic-ray's in-place mutations never touch the checkout and the
   shards run side by side;
2. runs verify once on an unmutated copy (the baseline must pass, exit 0);
3. in each shard: ``cosmic-ray init``, marks every mutant outside this
   shard's part of the sample SKIPPED (``select_mutants.py``), ``cosmic-ray exec``;
4. reads every shard's session back and writes ``report.md`` and
   ``report.json`` under ``--out``: the counts, the score, and every mutant
   verify did not kill, with its diff and the command that re-runs it.

Exit status: 0 the run finished (whatever the score; ``--fail-under`` makes a
low score exit 1); 2 a usage error or a failing baseline.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import toml  # type: ignore  # cosmic-ray's dependency; no stubs
from cosmic_ray.work_db import WorkDB, use_db  # type: ignore  # untyped
from cosmic_ray.work_item import WorkerOutcome, WorkResult  # type: ignore  # untyped

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from select_mutants import Mutant, select  # noqa: E402
from verify_mutant import OUTCOMES, parse_outcome  # noqa: E402

ROOT = HERE.parent
SKIP_OUTPUT = "not in this shard's sample (mutation/select_mutants.py)"


def load_settings(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = toml.loads(path.read_text(encoding="utf-8"))["cosmic-ray"]
    return config


def _copy_tree(out: Path, name: str) -> Path:
    shard = out / name
    if shard.exists():
        shutil.rmtree(shard)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.sqlite")
    shutil.copytree(ROOT / "src", shard / "src", ignore=ignore)
    shutil.copytree(HERE, shard / "mutation", ignore=ignore)
    return shard


def _mutants(session: Path) -> list[tuple[str, Mutant]]:

    found = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            (spec,) = item.mutations
            found.append(
                (
                    item.job_id,
                    Mutant(
                        module=str(spec.module_path),
                        operator=spec.operator_name,
                        occurrence=spec.occurrence,
                        line=spec.start_pos[0],
                        col=spec.start_pos[1],
                        definition=spec.definition_name,
                    ),
                )
            )
    return found


def _skip_all_but(session: Path, keep: set[str]) -> int:

    skipped = [job for job, m in _mutants(session) if m.key not in keep]
    with use_db(str(session), WorkDB.Mode.open) as db:
        db.set_multiple_results(
            skipped, WorkResult(output=SKIP_OUTPUT, worker_outcome=WorkerOutcome.SKIPPED)
        )
    return len(skipped)


def _cosmic_ray(*args: str, cwd: Path, log: Path | None = None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cosmic_ray.cli", *args]
    out = log.open("wb") if log is not None else subprocess.DEVNULL
    return subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def collect(
    sessions: list[Path], equivalent: dict[str, str], outside: dict[str, str]
) -> list[dict[str, Any]]:
    """Every tested mutant of *sessions*, with its outcome.

    A mutant verify did not kill is ``equivalent`` or ``outside-contract`` when the
    config lists it there (with the reason, docs/quality.md).
    """

    rows: list[dict[str, Any]] = []
    for session in sessions:
        with use_db(str(session), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    continue
                (spec,) = item.mutations
                m = Mutant(
                    str(spec.module_path),
                    spec.operator_name,
                    spec.occurrence,
                    spec.start_pos[0],
                    spec.start_pos[1],
                    spec.definition_name,
                )
                outcome, why = parse_outcome(result.output)
                if outcome != "killed" and m.key in equivalent:
                    outcome, why = "equivalent", equivalent[m.key]
                elif outcome != "killed" and m.key in outside:
                    outcome, why = "outside-contract", outside[m.key]
                rows.append(
                    {
                        "key": m.key,
                        "definition": m.definition,
                        "outcome": outcome,
                        "why": why,
                        "diff": result.diff or "",
                    }
                )
    rows.sort(key=lambda r: r["key"])
    return rows


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per outcome and two scores.

    ``score``: killed / mutants that break R1-R23 (tested - incompetent -
    equivalent - outside-contract). ``strict_score``: killed / (tested -
    incompetent - equivalent), counting outside-contract mutants as survivors.
    """
    counts = {o: 0 for o in (*OUTCOMES, "equivalent", "outside-contract")}
    for row in rows:
        counts[row["outcome"]] += 1
    strict = len(rows) - counts["incompetent"] - counts["equivalent"]
    judged = strict - counts["outside-contract"]
    return {
        "tested": len(rows),
        **counts,
        "score": counts["killed"] / judged if judged else None,
        "strict_score": counts["killed"] / strict if strict else None,
    }


def write_report(out: Path, summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    s = summary

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f} %"

    lines = [
        "# Mutation run",
        "",
        f"- command: `{s['command']}`",
        f"- mutants generated by cosmic-ray: {s['generated']}; out of scope: {s['out_of_scope']};"
        f" sites in scope: {s['sites']}; sampled and run: {s['tested']} (seed {s['seed']})",
        f"- killed {s['killed']}, survived {s['survived']}, undecided {s['undecided']},"
        f" incompetent {s['incompetent']}, equivalent {s['equivalent']},"
        f" outside the contract {s['outside-contract']}",
        f"- score (killed / competent mutants that break R1-R23): {pct(s['score'])};"
        f" strict (outside-contract ones counted as survivors): {pct(s['strict_score'])}",
        f"- minutes: {s['minutes']:.1f} on {s['jobs']} shard(s)",
        "",
        "| mutant | in | outcome | why |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| `{row['key']}` | {row['definition']} | {row['outcome']} | {row['why']} |")
    lines += ["", "## Mutants not killed", ""]
    for row in rows:
        if row["outcome"] == "killed":
            continue
        lines += [
            f"### `{row['key']}` — {row['outcome']}",
            "",
            f"re-run: `python mutation/run.py --only '{row['key']}'`",
            "",
            "```diff",
            row["diff"].strip(),
            "```",
            "",
        ]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(
        json.dumps({"summary": summary, "mutants": rows}, indent=1), encoding="utf-8"
    )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=HERE / "cosmic-ray.toml")
    parser.add_argument("--out", type=Path, default=ROOT / ".mutation")
    parser.add_argument("--jobs", type=int, help="parallel shards (config: jobs)")
    parser.add_argument("--sample", type=int, help="sites to test (config: sample)")
    parser.add_argument("--all", action="store_true", help="test every site in scope")
    parser.add_argument("--seed", type=int, help="seed of the sample (config: seed)")
    parser.add_argument(
        "--only", action="append", default=[], metavar="KEY", help="test just this mutant"
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--dry-run", action="store_true", help="print the sample and stop")
    parser.add_argument(
        "--fail-under", type=float, help="exit 1 when the score (0..1) is below this"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-read the finished run under --out and rewrite its report with the judgments "
        "now in the config (after judging survivors)",
    )
    args = parser.parse_args(argv)
    config = load_settings(args.config)
    ours = config.get("filters", {}).get("chunk-adapter", {})
    if args.report_only:
        recorded = args.out.resolve() / "run.json"
        if not recorded.exists():
            parser.error(f"--report-only: no finished run under {args.out} ({recorded} missing)")
        return _report(args.out.resolve(), json.loads(recorded.read_text()), ours, args.fail_under)
    jobs = args.jobs or int(ours.get("jobs", 1))
    seed = args.seed if args.seed is not None else int(ours.get("seed", 0))
    sample = None if args.all or args.only else (args.sample or ours.get("sample"))
    if jobs < 1:
        parser.error(f"--jobs must be >= 1, got {jobs}")
    started = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    shard_config = out / "cosmic-ray.toml"
    shutil.copy(args.config, shard_config)

    probe = _copy_tree(out, "shard-0")
    subprocess.run(
        [sys.executable, "-m", "cosmic_ray.cli", "init", str(shard_config), "session.sqlite"],
        cwd=probe,
        check=True,
    )
    mutants = [m for _, m in _mutants(probe / "session.sqlite")]
    selection = select(
        mutants,
        exclude_definitions=ours.get("exclude-definitions", ()),
        sample=sample,
        seed=seed,
        root=probe,
    )
    chosen = list(selection.chosen)
    if args.only:
        known = {m.key: m for m in mutants}
        missing = [k for k in args.only if k not in known]
        if missing:
            parser.error(f"--only: no such mutant {missing}; keys are printed by --dry-run")
        chosen = [known[k] for k in args.only]
    jobs = max(1, min(jobs, len(chosen)))
    print(
        f"cosmic-ray generated {selection.generated} mutants; {selection.out_of_scope} out of "
        f"scope; {selection.sites} sites in scope; testing {len(chosen)} (seed {seed}) "
        f"on {jobs} shard(s)",
        flush=True,
    )
    if args.dry_run:
        for m in chosen:
            print(f"  {m.key}  ({m.definition})")
        return 0

    if not args.no_baseline:
        base = _copy_tree(out, "baseline")
        command = shlex.split(config["test-command"])
        command[0] = sys.executable if command[0] == "python" else command[0]
        done = subprocess.run(command, cwd=base, capture_output=True, text=True, check=False)
        outcome, why = parse_outcome(done.stdout)
        if outcome != "survived":
            print(done.stdout[-4000:])
            print(
                f"baseline: verify on the UNMUTATED adapter gave {outcome} ({why}); a mutation "
                "run means nothing until it passes. Fix that first.",
                file=sys.stderr,
            )
            return 2
        print("baseline: verify passes on the unmutated adapter", flush=True)

    procs, sessions = [], []
    for i in range(jobs):
        shard = probe if i == 0 else _copy_tree(out, f"shard-{i}")
        session = shard / "session.sqlite"
        if i > 0:
            subprocess.run(
                [sys.executable, "-m", "cosmic_ray.cli", "init", str(shard_config), session.name],
                cwd=shard,
                check=True,
            )
        _skip_all_but(session, {m.key for m in chosen[i::jobs]})
        sessions.append(session)
        env_note = out / f"shard-{i}.log"
        procs.append(_cosmic_ray("exec", str(shard_config), session.name, cwd=shard, log=env_note))
    for proc in procs:
        proc.wait()

    run = {
        "command": "python mutation/run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "generated": selection.generated,
        "out_of_scope": selection.out_of_scope,
        "sites": selection.sites,
        "seed": seed,
        "jobs": jobs,
        "minutes": (time.monotonic() - started) / 60,
        "sessions": [str(s) for s in sessions],
    }
    (out / "run.json").write_text(json.dumps(run, indent=1), encoding="utf-8")
    return _report(out, run, ours, args.fail_under)


def _report(out: Path, run: dict[str, Any], ours: dict[str, Any], fail_under: float | None) -> int:
    sessions = [Path(s) for s in run["sessions"]]
    rows = collect(
        sessions, dict(ours.get("equivalent", {})), dict(ours.get("outside-contract", {}))
    )
    summary = {k: v for k, v in run.items() if k != "sessions"} | score(rows)
    print(write_report(out, summary, rows))
    print(f"report: {out / 'report.md'}")
    if fail_under is not None and (summary["score"] or 0.0) < fail_under:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
