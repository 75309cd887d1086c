"""Calibrate the simulate engine's judges: correct adapters must pass every world.

Runs the ``ci`` sample of generated worlds (its ``sim_worlds``, derandomized) on correct
adapters — the reference one by default, or any of tests/quality/correct — at many seeds,
each seed another sample, and prints every world one of them fails, with its replay
command. A correct adapter failing a world is a judge error (or a bug in that adapter): in
verify it shows as exit 3 ("the reference adapter fails it too") or, when the reference passes
the world on its calibration schedules, as a false exit 1. Worlds run on the engine
directly (no shrinking budget, no confirmation), with the options the stage would pass.

    python benchmarks/judge_calibration.py --seeds 450-470 [--jobs 2]
    python benchmarks/judge_calibration.py --adapter tests.quality.correct.due_heap:make \\
        --seeds 0-9
    python benchmarks/judge_calibration.py --long-haul 100 --seeds 0-4   # long-haul only

Exit 1 if any world failed. 3 judge errors in 21 seeds of the reference (450-470) were
found and fixed this way (R17 owed to a registration past the chunk: docs/quality.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))


def seeds_of(text: str) -> list[int]:
    """``"450-470"`` or ``"0,3,7"``."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


def one(spec: str, seed: int, long_haul: int = 0) -> str:
    """One sample: the ci sample at *seed* (and its long-haul worlds), or, with
    *long_haul*, one world of it and that many long-haul worlds."""
    from chunk_adapter.explore.engine.reproduce import SIM
    from chunk_adapter.explore.engine.simulate import simulate
    from chunk_adapter.explore.scenarios.codec import encode
    from chunk_adapter.explore.stages.simulate import _options
    from chunk_adapter.factory import load_factory
    from chunk_adapter.profiles import current_profile

    factory = load_factory(spec)
    worlds = 1 if long_haul else current_profile("ci").sim_worlds
    extra = {"long_haul_share": long_haul} if long_haul else {}
    start = time.monotonic()
    sim = simulate(
        factory,
        examples=worlds,
        deadline=start + 900,
        seed=seed,
        options=_options(factory),
        **extra,  # type: ignore[arg-type]
    )
    line = (
        f"{spec} seed={seed}: {sim.worlds} worlds and {sim.long_haul} long-haul, skipped "
        f"{dict(sim.skipped)}, {time.monotonic() - start:.0f} s"
    )
    if sim.stopped is not None:
        line += f"\n  STOPPED: {sim.stopped.failures[0].message[:300]}"
    if sim.found is not None:
        failure = sim.found.execution.failures[0]
        command = SIM.command(
            encode(sim.found.world), sim.found.execution.schedule, adapter_spec=spec
        )
        line += f"\n  FAILED [{failure.kind}] {failure.message}\n  {command}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--adapter", action="append", default=[], help="a correct adapter's spec (repeatable; "
        "default: the reference adapter)",
    )  # fmt: skip
    parser.add_argument("--seeds", default="0-9", help="e.g. 450-470 or 0,3,7 (0-9)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--long-haul", type=int, default=0, metavar="N",
        help="only N long-haul worlds per sample (and one world of the main sample)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    specs = args.adapter or ["chunk_adapter:ChunkAdapter"]
    runs = [(spec, seed) for spec in specs for seed in seeds_of(args.seeds)]
    failed = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        chosen = [(spec, seed, args.long_haul) for spec, seed in runs]
        for line in pool.map(one, *zip(*chosen, strict=True)):
            print(line, flush=True)
            failed += "\n  FAILED" in line
    print(f"\n{failed} of {len(runs)} samples had a world a correct adapter fails")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
