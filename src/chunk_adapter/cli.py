"""The ``chunk-adapter`` command line: ``demo``, ``verify``, ``replay``, ``bench``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._version import __version__
from .bench.run import CONNECTORS
from .errors import InvalidValue
from .factory import REFERENCE

if TYPE_CHECKING:
    from .verify.baseline import Baseline

__all__ = ["main"]

ADAPTER_HELP = (
    "the adapter factory, as package.module:factory, called as "
    "factory(connector, *, stage_id, src_stage_id=None, build_payload=None, **options) "
    "(options: the adapter settings it accepts by name, e.g. put_tries; the checks pass "
    "only those its signature names, or any when it takes **options) "
    f"(default: the reference adapter, {REFERENCE})"
)


def _parser() -> argparse.ArgumentParser:
    from .profiles import DEFAULT, PROFILES
    from .verify.stages import stage_names

    parser = argparse.ArgumentParser(
        prog="chunk-adapter",
        description="The reference ChunkAdapter and the suite that verifies any adapter.",
    )
    parser.add_argument("--version", action="version", version=f"chunk-adapter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "demo", help="run the contract's worked examples 2 and 3 live and print what moved"
    )
    check = commands.add_parser(
        "verify",
        help="verify an adapter against the contract "
        "(exit 0 pass, 1 confirmed violation, 2 usage, 3 inconclusive)",
        description="Exit status: 0 the adapter kept the contract as far as the budget explored; "
        "1 a contract violation, confirmed by re-running its reproducer; 2 a usage error (the "
        "adapter cannot be imported or built); 3 inconclusive: no violation confirmed, but some "
        "check could not decide (the report says what to do).",
    )
    check.add_argument("--adapter", default=REFERENCE, help=ADAPTER_HELP)
    check.add_argument(
        "--profile",
        default=DEFAULT,
        choices=sorted(PROFILES),
        help="quick: pre-commit; ci: a reproducible gate (default); hunt: long regression hunt",
    )
    check.add_argument(
        "--max-seconds", type=float, default=None, help="total budget (default: the profile's)"
    )
    check.add_argument("--seed", type=int, default=0, help="seed of every random choice (0)")
    check.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="stages run at once, each in its own process (default: half the cores, 1 to 4); "
        "the verdict is the one running them one at a time gives",
    )
    check.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="hunt only: this is machine I of N searching together; each runs a different "
        "seed (printed in the report) and failures meet in the example database "
        "($CHUNK_ADAPTER_HYPOTHESIS_DB)",
    )
    check.add_argument(
        "--stage", action="append", choices=stage_names(), help="run only this stage (repeatable)"
    )
    check.add_argument(
        "--keep-going", action="store_true", help="run every stage even after a violation"
    )
    check.add_argument(
        "--all",
        dest="run_all",
        action="store_true",
        help="run every check of every stage to the budget even after violations, and group "
        "the findings by root cause, each with its reproducer (implies --keep-going)",
    )
    check.add_argument(
        "--reliability",
        action="store_true",
        help="also judge R25 (a put no retry can fix is not retried), R30 (no silent thread "
        "death) and R31 (no head-of-line blocking), the reference adapter's rules, in the "
        "simulate stage's generated worlds: for an adapter that claims them (an adapter "
        "written to R1-R24 need not keep them)",
    )
    check.add_argument(
        "--substitute",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module or package (dotted name) whose threads the explorer must also control, "
        "beyond the factory's module and the adapter class's modules (repeatable)",
    )
    check.add_argument(
        "--runtime",
        choices=("auto", "greenlet", "thread"),
        default=None,
        help="what carries the explorer's tasks: greenlets on one thread (fast), real "
        "threads, or auto (greenlets unless the adapter needs real threads; the default). "
        "Failures are confirmed on real threads either way",
    )
    check.add_argument(
        "--baseline",
        metavar="FILE",
        help="accept the root causes listed in FILE (written by --write-baseline): they are "
        "reported as accepted, exit 1 only for a root cause FILE does not list; entries not "
        "seen are reported stale. Implies --all",
    )
    check.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="write every root cause found to FILE (TOML; fill in each reason and commit it), "
        "then judge this run against it. Reasons already in FILE are kept. Implies --all",
    )
    check.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="RULE=REASON",
        help="waive a whole rule, a deliberate departure from the contract: its root causes "
        "are accepted (repeatable; e.g. --accept 'R21=our ids are ints')",
    )
    check.add_argument("--junit-xml", metavar="FILE", help="also write a JUnit XML report")
    check.add_argument(
        "-q", "--quiet", action="count", default=0, help="no progress on stderr, only the report"
    )
    check.add_argument(
        "-v", "--verbose", action="count", default=0, help="also show each check as it starts"
    )
    check.add_argument("--json", metavar="FILE", help="also write a JSON report")
    check.add_argument(
        "--report-md",
        metavar="FILE",
        help="also write a Markdown summary (appended to $GITHUB_STEP_SUMMARY when that is set)",
    )
    again = commands.add_parser("replay", help="re-run a counterexample that verify reported")
    again.add_argument(
        "string",
        help="the replay string, KIND:...: explore:SCENARIO:SCHEDULE, "
        "stateful:PROFILE:steps.DATA, stateful:PROFILE:BLOB or stress:SCENARIO:SEED",
    )
    again.add_argument(
        "--adapter",
        default=REFERENCE,
        help="the adapter to replay the counterexample against (the one verify reported on, "
        "or its fixed version), as package.module:factory",
    )
    again.add_argument(
        "--substitute",
        action="append",
        default=[],
        metavar="MODULE",
        help="as verify's --substitute: more modules whose threads the explorer controls",
    )
    bench = commands.add_parser(
        "bench", help="benchmark an adapter per connector, polling vs event-driven"
    )
    bench.add_argument("--adapter", default=REFERENCE, help=ADAPTER_HELP)
    bench.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="folder for bench.json (and bench.png); default: a new temporary folder, printed",
    )
    bench.add_argument(
        "--connector",
        action="append",
        choices=list(CONNECTORS),
        help="connector to bench: memory, shm or redis (repeatable; default: memory and shm, "
        "and redis when a redis-server is found)",
    )
    bench.add_argument("--quick", action="store_true", help="smaller sizes (about 20 s)")
    bench.add_argument(
        "--churn",
        action="store_true",
        help="instead: reuse request ids for --seconds (300) per connector, sampling RSS and "
        "the store every 10 s; exit 1 if anything grows",
    )
    bench.add_argument("--seconds", type=float, default=300.0, help="length of the --churn run")
    return parser


def _shard(text: str, profile: str) -> tuple[int, int] | str:
    """``I/N`` as numbers, or what is wrong with it."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        return f"--shard takes I/N with 1 <= I <= N (e.g. 2/4), got {text!r}"
    if profile != "hunt":
        return (
            f"--shard splits the hunt profile's random search across machines; profile "
            f"{profile!r} is derandomized (every machine would run the same): use "
            "--profile hunt, or --jobs for the cores of one machine"
        )
    return int(index), int(count)


def _baseline(args: argparse.Namespace) -> Baseline | None:
    """The baseline the run is judged against: --baseline's file (or the one
    --write-baseline rewrites, for its reasons), plus the --accept waivers."""
    from .verify.baseline import Baseline, load_baseline, parse_waiver

    waivers = [parse_waiver(text) for text in args.accept]
    if args.baseline is not None:
        known = load_baseline(args.baseline)
    elif args.write_baseline is not None:
        if os.path.exists(args.write_baseline):  # keep the reasons written there
            known = load_baseline(args.write_baseline)
        else:
            known = Baseline(path=args.write_baseline)
    elif waivers:
        known = Baseline()
    else:
        return None
    return known.with_waivers(waivers)


def _verify(args: argparse.Namespace) -> int:
    from .verify.junit import write_junit
    from .verify.markdown import write_markdown
    from .verify.progress import Progress
    from .verify.report import write_json, write_text
    from .verify.runner import verify

    if args.max_seconds is not None and args.max_seconds <= 0:
        print(f"chunk-adapter verify: --max-seconds must be > 0, got {args.max_seconds}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.jobs is not None and args.jobs < 1:
        print(f"chunk-adapter verify: --jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    seed = args.seed
    if args.shard is not None:
        shard = _shard(args.shard, args.profile)
        if isinstance(shard, str):
            print(f"chunk-adapter verify: {shard}", file=sys.stderr)
            return 2
        from .verify.runner import shard_seed

        seed = shard_seed(args.seed, shard)
    try:
        known = _baseline(args)
    except InvalidValue as exc:
        print(f"chunk-adapter verify: {exc}", file=sys.stderr)
        return 2
    if args.runtime is not None:  # read where the explorer's runs are set up, in every worker
        from .explore.runtime.carriers import RUNTIME_ENV

        os.environ[RUNTIME_ENV] = args.runtime
    try:
        report = verify(
            args.adapter,
            profile=args.profile,
            max_seconds=args.max_seconds,
            seed=seed,
            stages=args.stage,
            jobs=args.jobs,
            keep_going=args.keep_going,
            progress=Progress(sys.stderr, verbosity=args.verbose - args.quiet),
            substitute=args.substitute,
            run_all=args.run_all,
            baseline=known,
            reliability=args.reliability,
        )
    except InvalidValue as exc:
        print(f"chunk-adapter verify: {exc}", file=sys.stderr)
        return 2
    if args.write_baseline:
        from .verify.baseline import write_baseline

        report.baseline = write_baseline(report, args.write_baseline, known)
        print(f"chunk-adapter verify: wrote {len(report.baseline.entries)} root cause(s) to "
              f"{args.write_baseline}; fill in each reason", file=sys.stderr)  # fmt: skip
    write_text(report, sys.stdout)
    if args.json:
        write_json(report, args.json)
    if args.junit_xml:
        write_junit(report, args.junit_xml)
    if args.report_md:
        write_markdown(report, args.report_md)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        write_markdown(report, summary, append=True)
    return report.exit_code


def _bench(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from .bench import CONNECTORS, run_bench, unavailable
    from .connectors.redis_server import RedisServerError

    for name in args.connector or ():
        why = unavailable(name)
        if why is not None:
            print(f"chunk-adapter bench: cannot bench --connector {name}: {why}", file=sys.stderr)
            return 2
    names = args.connector or [name for name in CONNECTORS if unavailable(name) is None]
    for name in sorted(set(CONNECTORS) - set(names)) if not args.connector else ():
        print(f"chunk-adapter bench: not benching {name}: {unavailable(name)}", file=sys.stderr)
    if args.churn:
        from .bench.churn import run_churn

        results = [run_churn(name, args.seconds, min(10.0, args.seconds / 3)) for name in names]
        return 0 if all(r["flat"] is not False for r in results) else 1
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chunk-adapter-bench-"))
    sys.path.insert(0, os.getcwd())  # as verify: the current project's adapter is importable
    try:
        run_bench(out, names, args.quick, sys.stdout, args.adapter)
    except InvalidValue as exc:
        print(f"chunk-adapter bench: {exc}", file=sys.stderr)
        return 2
    except RedisServerError as exc:
        print(f"chunk-adapter bench: redis-server did not start: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(sys.stdout)
    if args.command == "verify":
        return _verify(args)
    if args.command == "replay":
        from .verify.replay import replay_string

        sys.path.insert(0, os.getcwd())
        if args.substitute:  # read by the explorer's replay, as verify's workers pass it
            os.environ["CHUNK_ADAPTER_SUBSTITUTE"] = ",".join(args.substitute)
        try:
            return replay_string(args.string, args.adapter, sys.stdout)
        except InvalidValue as exc:
            print(f"chunk-adapter replay: {exc}", file=sys.stderr)
            return 2
    if args.command == "bench":
        return _bench(args)
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
