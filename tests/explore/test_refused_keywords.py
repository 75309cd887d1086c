"""An option a ``**options`` factory refuses is left out of every build, and what the
explorer's oracles assume follows what the adapter was built with (R9, R10).

``tests.explore.shapes.strict_options.make_forwarding`` hands every keyword to a
constructor that declares the contract's three only. Scenario q2 asks for
``put_tries=2``: the adapter never gets it, so the oracles must not judge its
retries as if it had (they judge with the adapter's own count, unknown here).
"""

from __future__ import annotations

import pytest

from chunk_adapter.explore import RandomStrategy, explore
from chunk_adapter.explore.engine.execution import Execution
from chunk_adapter.explore.scenarios.library import scenario
from chunk_adapter.factory import LoadedFactory, load_factory, takes_keyword

SPEC = "tests.explore.shapes.strict_options:make_forwarding"


@pytest.mark.rule("R9", "R10")
def test_a_refused_put_tries_is_not_what_the_oracles_assume() -> None:
    factory = load_factory(SPEC)
    assert isinstance(factory, LoadedFactory)
    seen: list[int | None] = []

    def checker(execution: Execution) -> list[str]:
        seen.append(execution.put_tries)
        return []

    q2 = scenario("pipeline/q2-id-advances-on-put")
    assert q2.options == {"put_tries": 2}
    report = explore(
        q2, RandomStrategy(seed=0, executions=3), factory=factory, checker=checker,
        substitute="auto",
    )  # fmt: skip
    assert report.ok, report.describe_failure()
    assert "put_tries" in factory.rejected and not takes_keyword(factory, "put_tries")
    assert seen == [None, None, None], seen  # not 2: the adapter was never given it
