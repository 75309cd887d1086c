"""One seed, one sample: the worlds and programs drawn do not move with the source code.

Hypothesis mixes constants found in the source of the local modules loaded into about
one draw in twenty; ``profiles.seed_only_draws`` (around the ``simulate`` stage's worlds
and the state machines) takes them out, so an edit that adds a literal to the adapter
under test no longer changes what verify draws at a seed.
"""

from __future__ import annotations

import importlib
import random
import threading
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from chunk_adapter.explore.scenarios.worlds import worlds
from chunk_adapter.profiles import seed_only_draws

providers: Any = pytest.importorskip("hypothesis.internal.conjecture.providers")


def draws(strategy: Any, count: int, stable: bool) -> list[str]:
    seen: list[str] = []

    def keep(value: Any) -> bool:
        seen.append(repr(value))
        return False

    chosen = settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate])
    with seed_only_draws() if stable else nullcontext(), suppress(NoSuchExample):
        find(strategy, keep, settings=chosen, random=random.Random(0))
    return seen


def import_literals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A local module full of new integer literals, imported (as an adapter module is)."""
    numbers = ", ".join(str(40_000 + 37 * i) for i in range(300))
    (tmp_path / f"{name}.py").write_text(f"VALUES = [{numbers}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(name)


@pytest.mark.skipif(
    not hasattr(providers, "_get_local_constants"),
    reason="this Hypothesis draws no local constants",
)
def test_without_it_a_new_local_module_moves_the_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the hazard itself, so the test below can fail: plain draws pick the new literals up
    before = draws(st.integers(0, 2**16), 400, stable=False)
    import_literals(tmp_path, monkeypatch, "literals_for_the_plain_draws")
    after = draws(st.integers(0, 2**16), 400, stable=False)
    assert before != after
    assert any(40_000 <= int(v) < 40_000 + 37 * 300 and (int(v) - 40_000) % 37 == 0 for v in after)


def test_the_worlds_drawn_at_a_seed_do_not_move_with_a_new_local_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    numbers_before = draws(st.integers(0, 2**16), 400, stable=True)
    worlds_before = draws(worlds(), 30, stable=True)
    import_literals(tmp_path, monkeypatch, "literals_for_the_stable_draws")
    assert draws(st.integers(0, 2**16), 400, stable=True) == numbers_before
    assert draws(worlds(), 30, stable=True) == worlds_before


def test_the_hook_is_put_back() -> None:
    hook = getattr(providers, "_get_local_constants", None)
    with seed_only_draws():
        pass
    assert getattr(providers, "_get_local_constants", None) is hook


def test_contexts_overlap_without_waiting_and_the_last_one_puts_the_hook_back() -> None:
    # a machine abandoned on a timeout may still be inside one while the next one starts
    hook = getattr(providers, "_get_local_constants", None)
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with seed_only_draws():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    assert entered.wait(10)
    with seed_only_draws():  # does not wait for the other thread's context to close
        inside = getattr(providers, "_get_local_constants", None)
    if hook is not None:
        assert inside is not hook
        assert getattr(providers, "_get_local_constants", None) is not hook  # other inside
    release.set()
    thread.join(10)
    assert getattr(providers, "_get_local_constants", None) is hook
