"""The stateful machines find every broken adapter in broken_stateful.py, naming the rule.

Each broken adapter breaks one rule by overriding one method. The machine runs
under the default (dev) profile's example budget; the search phase alone is
enough to prove the bug is found, so most cases skip shrinking (slow for
liveness bugs, whose every failing replay waits out a bound). One case (under
``-m slow``: its shrinking takes 10-72 s) runs the full profile and checks the
report a user gets: shrunk steps, the rule, the command that reproduces it, and
Hypothesis's @reproduce_failure blob.

Rerun one broken adapter by hand with, e.g.:
    CHUNK_ADAPTER_PROFILE=dev python -m pytest tests/stateful \
        --adapter tests.quality.broken_stateful:missing_token_check
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from chunk_adapter import ChunkAdapter
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.oracles import ContractViolation
from chunk_adapter.profiles import hypothesis_settings
from chunk_adapter.stateful import make_machine
from tests.quality import broken_stateful

LIVENESS = 2.0  # seconds; only broken adapters run here, so a bound that runs out is a finding


def command(name: str) -> str:
    return (
        "CHUNK_ADAPTER_PROFILE=dev python -m pytest tests/stateful "
        f"--adapter tests.quality.broken_stateful:{name}"
    )


def run(name: str, *, shrink: bool) -> ContractViolation:
    return found_by_machines(getattr(broken_stateful, name), command(name), shrink=shrink)


def found_by_machines(
    factory: Any, reproduce: str = "", *, shrink: bool = False
) -> ContractViolation:
    """What the machines find on *factory* (quick profile, searched without a database;
    shrunk when asked): it must fail."""
    machine = make_machine(factory, liveness_timeout=LIVENESS, reproduce=reproduce)
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    with pytest.raises(ContractViolation) as info:
        run_state_machine_as_test(
            machine, settings=settings(hypothesis_settings("quick"), phases=phases, database=None)
        )
    return info.value


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="chunk_adapter")
    yield


CASES = [
    pytest.param(name, marks=pytest.mark.rule(*sorted(rules)))
    for name, rules in sorted(broken_stateful.EXPECTED.items())
]


@pytest.mark.parametrize("name", CASES)
def test_machine_finds_broken_adapter(name: str) -> None:
    """Each seeded bug is found in the dev profile and reported under its rule."""
    found = run(name, shrink=False)
    expected = broken_stateful.EXPECTED[name]
    assert expected & set(found.rules), (
        f"{name}: expected a violation of {sorted(expected)}, got {found.rules}:\n{found}"
    )


@pytest.mark.slow  # 10-72 s: its shrinking may wait out the liveness bound, or not
@pytest.mark.rule("R15")
def test_failure_report_shows_shrunk_steps_rule_and_reproduction() -> None:
    """What a user sees: the minimal steps as code, the rule, the command, the blob."""
    found = run("poll_no_swap", shrink=True)
    text = str(found) + "\n" + "\n".join(getattr(found, "__notes__", []))
    assert found.rules == ["R15"]
    assert "R15: " in text
    assert f"reproduce: {command('poll_no_swap')}" in text
    assert "state = Conformance_poll_no_swap()" in text
    assert text.count("poll_ready()") >= 2, "the two polls that hand the chunk out twice"
    assert "@reproduce_failure(" in text
    steps = [line for line in text.splitlines() if line.startswith("state.")]
    assert len(steps) <= 6, f"expected a short shrunk example, got {steps}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", CASES)
def test_machine_finds_and_shrinks_broken_adapter(name: str) -> None:
    """The full dev profile, shrinking included, still names the expected rule."""
    found = run(name, shrink=True)
    assert broken_stateful.EXPECTED[name] & set(found.rules), str(found)


@pytest.mark.rule("R22")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_dies_is_named_r22_first() -> None:
    """An adapter whose SAVE thread dies of a put or build error: the machines name R22
    (the thread's uncaught exception, seen through ``threading.excepthook``) before what
    its death leaves undone; they named R23 ("a chunk saved after this step was not put")."""
    from tests.quality import broken_stress

    found = found_by_machines(broken_stress.save_dies_on_put_error)
    assert found.rules[:1] == ["R22"], found


class _CleanupWaitsForGet(ChunkAdapter):
    """BUG (R3): ``cleanup_receiver`` waits (up to 1 s) for a get in flight to end, "so no
    commit can follow" — a scheduler call waiting for the adapter's work."""

    def __init__(self, connector: Any, **options: Any) -> None:
        # idle: set while no get runs; cleared and set again by the RECV thread's gets,
        # waited on by cleanup_receiver (the bug).
        self.idle = threading.Event()
        self.idle.set()
        super().__init__(_Watched(connector, self.idle), **options)

    def cleanup_receiver(self, request_id: str) -> None:
        self.idle.wait(1.0)
        super().cleanup_receiver(request_id)


class _Watched(ConnectorWrapper):
    def __init__(self, inner: Any, idle: threading.Event) -> None:
        super().__init__(inner)
        self.idle = idle

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        self.idle.clear()
        try:
            return self.inner.get(key)  # type: ignore[no-any-return]
        finally:
            self.idle.set()


@pytest.mark.rule("R3")
def test_a_scheduler_call_that_waits_for_held_work_is_r3() -> None:
    """A call made while a gate holds the adapter's get, that returns only when its own
    timeout runs out, waited for that get: R3 (the machines timed no call but stop())."""
    found = found_by_machines(_CleanupWaitsForGet)
    assert found.rules[:1] == ["R3"], found
