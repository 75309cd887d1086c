"""Long-haul worlds (``explore.scenarios.long_haul``): more of one thing than a small world.

Long streams (ids past 10 and 100) handed out by one big poll, and outages of gets or
puts lasting seconds: the ``simulate`` stage runs a few after its main sample. Bugs
that only show past a size or a duration are found there and nowhere in the small
worlds; the reference adapter passes them; the main sample is the one it was.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.adapter import ChunkAdapter  # noqa: E402
from chunk_adapter.explore.engine.simulate import simulate  # noqa: E402
from chunk_adapter.explore.scenarios.long_haul import LENGTHS, long_world  # noqa: E402
from chunk_adapter.factory import reference_factory  # noqa: E402
from chunk_adapter.rules import R11, R14, R23  # noqa: E402


class FinalGivesUpAfterASecond(ChunkAdapter):
    """BUG (R11): a final whose puts keep failing is given up after 1 s (the reference's
    ``final_put_timeout``, on by default here): an outage of puts longer than that loses
    the stream's end, although the store comes back."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        kwargs.setdefault("final_put_timeout", 1.0)
        super().__init__(connector, **kwargs)


class HandsOutSixteen(ChunkAdapter):
    """BUG (R14): ``poll_ready`` hands out at most 16 chunks of a request per call and
    drops the rest (a batch limit): a scheduler that polls after every few chunks never
    sees it."""

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        return {rid: values[:16] for rid, values in super().poll_ready().items()}


def run(factory: Any, small: int, long_haul: int, seed: int = 0) -> Any:
    return simulate(
        factory,
        examples=small,
        deadline=time.monotonic() + 240,
        seed=seed,
        long_haul_share=long_haul / small,
        shrink_seconds=10,
    )


def test_a_long_world_is_drawn_whole_from_its_seed() -> None:
    assert long_world(7) == long_world(7)
    worlds = [long_world(seed) for seed in range(40)]
    assert len({str(w.ops) for w in worlds}) == 40
    for w in worlds:
        saves = {op.request_id: 0 for op in w.ops if op.kind == "save"}
        for op in w.ops:
            if op.kind == "save":
                saves[op.request_id] += 1
        # every stream is long: its ids cross 10; and ends with a final
        assert min(saves.values()) >= min(LENGTHS) + 1
        assert all(any(op.kind == "load" and op.request_id == r for op in w.ops) for r in saves)
    assert sum(any(op.kind == "outage" for op in w.ops) for w in worlds) >= 20
    assert any(not any(op.kind == "poll" for op in w.ops) for w in worlds)  # one big poll


@pytest.mark.rule("R23")
def test_the_reference_adapter_passes_long_haul_worlds() -> None:
    sim = run(reference_factory, small=1, long_haul=30)
    assert sim.first is None, sim.first and sim.first.execution.failures[0].message
    assert sim.long_haul >= 30 and not sim.long_haul_cut


@pytest.mark.rule("R11")
@pytest.mark.parametrize(
    ("cls", "rules"),
    [
        (FinalGivesUpAfterASecond, {R11, R23}),
        pytest.param(HandsOutSixteen, {R14, R23}, marks=pytest.mark.slow),
    ],
)
def test_a_bug_past_a_size_or_a_duration_is_found_by_the_long_haul_worlds_only(
    cls: type[ChunkAdapter], rules: set[str]
) -> None:
    def factory(connector: Any, **kwargs: Any) -> ChunkAdapter:
        return cls(connector, **kwargs)

    small = run(factory, small=150, long_haul=0)  # the quick profile's sample, alone
    assert small.first is None, small.first and small.first.execution.failures[0].message
    sim = run(factory, small=150, long_haul=30)
    assert sim.found is not None, "no long-haul world found it"
    # the main sample ran whole (a world too long for the step budget is skipped, never
    # judged), and found nothing
    assert sim.worlds + sum(sim.skipped.values()) == 150
    assert sim.found.world.name == "long world"
    assert sim.found.execution.failures[0].rules[0] in rules, sim.found.execution.failures[0]
