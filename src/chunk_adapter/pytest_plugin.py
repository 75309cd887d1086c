"""The pytest plugin (entry point ``pytest11``): ``--chunk-adapter`` and the conformance suite.

``pytest --chunk-adapter pkg.mod:factory`` makes the ``adapter_factory``
fixture build that adapter, and the report header shows the flags in effect,
ready to paste back. ``pytest --chunk-adapter pkg.mod:factory --pyargs
chunk_adapter.conformance`` runs the conformance suite (one test per verify
check) against it; its node ids read ``chunk_adapter.conformance::test_check[ID]``
whatever the directory pytest runs in, so one pasted back after ``--pyargs``
runs that check alone, and a failed check's short summary line is its root
rule and cause (``R16: ...``). Every option starts with ``--chunk-``; ``--adapter`` is still
accepted, with a deprecation warning. Hypothesis's ``--hypothesis-seed`` becomes
the suite's seed when ``--chunk-seed`` is not given (the machines run in
worker processes, where Hypothesis's own option cannot reach).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .factory import REFERENCE, AdapterFactory, load_factory
from .profiles import DEFAULT, ENV

if TYPE_CHECKING:
    from .verify.baseline import Baseline

__all__ = [
    "ADAPTER_HELP",
    "EXIT_INCONCLUSIVE",
    "PROFILE_HELP",
    "SEED_HELP",
    "SUITE",
    "baseline_of",
    "chunk_profile_of",
    "mark_inconclusive",
    "reliability_flag",
]

ADAPTER_HELP = (
    "adapter factory to verify, as package.module:factory "
    f"(default: the reference adapter, {REFERENCE}; ini: chunk_adapter)"
)
PROFILE_HELP = "verification profile: quick, ci or hunt (default: env CHUNK_ADAPTER_PROFILE or ci)"
SEED_HELP = "seed of every random choice in the conformance suite (default: 0)"
MAX_SECONDS_HELP = "budget of each conformance stage in seconds (default: from the profile)"
BASELINE_HELP = (
    "accept the root causes a `chunk-adapter verify --write-baseline` file lists: a check "
    "failing on one of them is reported xfailed (accepted), not failed"
)
ACCEPT_HELP = "waive a whole rule, as RULE=REASON (repeatable): its failures are xfailed"
RELIABILITY_HELP = (
    "also judge R25, R30 and R31, the reference adapter's reliability rules, for an adapter "
    "that claims them (verify --reliability)"
)
EXIT_INCONCLUSIVE = 3
"""The exit status of a run whose only problem is a conformance check that could not decide."""
_INCONCLUSIVE = pytest.StashKey[bool]()
SUITE = "chunk_adapter.conformance"
"""The conformance suite's module, and the file part of its tests' node ids."""
_SUITE_FILE = Path(__file__).resolve().with_name("conformance.py")


def mark_inconclusive(config: pytest.Config) -> None:
    """Record that a conformance check was inconclusive (the run then exits 3, not 0)."""
    config.stash[_INCONCLUSIVE] = True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and session.config.stash.get(_INCONCLUSIVE, False):
        session.exitstatus = EXIT_INCONCLUSIVE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chunk-adapter")
    group.addoption("--chunk-adapter", "--adapter", dest="chunk_adapter", default=None,
                    help=ADAPTER_HELP)  # fmt: skip
    group.addoption("--chunk-profile", default=None, help=PROFILE_HELP)
    group.addoption("--chunk-seed", type=int, default=None, help=SEED_HELP)
    group.addoption("--chunk-max-seconds", type=float, default=None, help=MAX_SECONDS_HELP)
    group.addoption("--chunk-baseline", default=None, metavar="FILE", help=BASELINE_HELP)
    group.addoption("--chunk-accept", action="append", default=[], metavar="RULE=REASON",
                    help=ACCEPT_HELP)  # fmt: skip
    group.addoption("--chunk-reliability", action="store_true", help=RELIABILITY_HELP)
    parser.addini("chunk_adapter", ADAPTER_HELP)
    parser.addini("chunk_profile", PROFILE_HELP)


def pytest_configure(config: pytest.Config) -> None:
    args = [str(a) for a in config.invocation_params.args]
    if any(a == "--adapter" or a.startswith("--adapter=") for a in args):
        config.issue_config_time_warning(
            pytest.PytestDeprecationWarning(
                "--adapter is deprecated; use --chunk-adapter (same value), which cannot "
                "clash with another plugin's option"
            ),
            stacklevel=2,
        )
    _check_baseline(config)
    seed = config.getoption("hypothesis_seed", default=None)
    if seed is not None and config.getoption("--chunk-seed") is None:
        # The suite's machines run in worker processes, where Hypothesis's own option
        # cannot reach: carry it over as the suite's seed, and say so in the header.
        config.option.chunk_seed = int(seed)


def _check_baseline(config: pytest.Config) -> None:
    """A bad --chunk-baseline file or --chunk-accept is a usage error before anything runs."""
    if config.getoption("--chunk-baseline", None) or config.getoption("--chunk-accept", None):
        from .errors import InvalidValue

        try:
            baseline_of(config)
        except InvalidValue as exc:
            raise pytest.UsageError(str(exc)) from None


def baseline_of(config: pytest.Config) -> Baseline | None:
    """What the conformance suite accepts: ``--chunk-baseline``'s file plus the waivers."""
    from .verify.baseline import Baseline, load_baseline, parse_waiver

    path = config.getoption("--chunk-baseline", None)
    accepts = config.getoption("--chunk-accept", None) or []
    if path is None and not accepts:
        return None
    known = load_baseline(str(path)) if path is not None else Baseline()
    return known.with_waivers(parse_waiver(str(text)) for text in accepts)


def _spec(config: pytest.Config) -> str:
    spec = config.getoption("chunk_adapter") or config.getini("chunk_adapter") or REFERENCE
    return str(spec)


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """The suite's node ids start ``chunk_adapter.conformance::``, wherever it is installed.

    pytest names a file by its path under the rootdir, and an installed package is
    outside it (the ids read ``::test_check[...]``, which cannot be pasted back).
    """
    if module_path.resolve() != _SUITE_FILE:
        return None
    return pytest.Module.from_parent(parent, path=module_path, nodeid=SUITE)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed check's one-line message (short summary, JUnit) is ``R16: the cause``; a
    skipped one is reported at its node id (not at a line of pytest's or the suite's code)."""
    report = yield
    if item.nodeid.startswith(f"{SUITE}::"):
        headline = getattr(call.excinfo.value, "headline", None) if call.excinfo else None
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.failed and isinstance(headline, str) and crash is not None:
            crash.message = headline
        if report.skipped and isinstance(report.longrepr, tuple):
            # No line number: the terminal then prints "nodeid: reason", one line per check.
            report.longrepr = (item.nodeid, None, report.longrepr[2])  # type: ignore[assignment]
    return report


def chunk_profile_of(config: pytest.Config) -> str:
    """The profile in effect: ``--chunk-profile``, the ini, ``CHUNK_ADAPTER_PROFILE``, ``ci``."""
    return str(
        config.getoption("--chunk-profile")
        or config.getini("chunk_profile")
        or os.environ.get(ENV, "").strip()
        or DEFAULT
    )


def _seed(config: pytest.Config) -> int:
    seed = config.getoption("--chunk-seed")
    return int(seed) if seed is not None else 0


def reliability_flag(config: pytest.Config) -> str:
    """`` --chunk-reliability`` when given (to paste back), else ``""``."""
    return " --chunk-reliability" if config.getoption("--chunk-reliability") else ""


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"chunk-adapter: --chunk-adapter {_spec(config)} --chunk-profile "
        f"{chunk_profile_of(config)} --chunk-seed {_seed(config)}{reliability_flag(config)}"
    )


@pytest.fixture(scope="session")
def adapter_spec(pytestconfig: pytest.Config) -> str:
    """The ``pkg.mod:factory`` string of the adapter under test."""
    return _spec(pytestconfig)


@pytest.fixture(scope="session")
def adapter_factory(adapter_spec: str, pytestconfig: pytest.Config) -> AdapterFactory:
    """The factory named by ``--adapter`` (the reference adapter by default).

    The directory pytest was started in is importable, as with ``python -m
    pytest``, so ``--adapter tests.quality.broken:factory`` works from a checkout.
    """
    here = str(pytestconfig.invocation_params.dir)
    if here not in sys.path:
        sys.path.insert(0, here)
    return load_factory(adapter_spec)


@pytest.fixture(scope="session")
def chunk_profile(pytestconfig: pytest.Config) -> str:
    return chunk_profile_of(pytestconfig)


@pytest.fixture(scope="session")
def chunk_max_seconds(pytestconfig: pytest.Config) -> float | None:
    value = pytestconfig.getoption("--chunk-max-seconds")
    return None if value is None else float(value)


@pytest.fixture(scope="session")
def chunk_seed(pytestconfig: pytest.Config) -> int:
    return _seed(pytestconfig)
