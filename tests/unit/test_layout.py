"""The test suite's own layout: every helper module exists once in a process.

tests/ is a package, so helpers are imported by their package path
(``tests.quality.broken_stateful``); a bare ``import broken_stateful`` next to
it would load the same file a second time, with its own globals.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]


def _twice(modules: dict[str, Any]) -> dict[str, list[str]]:
    """Files under tests/ that *modules* holds under more than one name."""
    names: dict[Path, list[str]] = {}
    for name, module in list(modules.items()):
        file = getattr(module, "__file__", None)
        if file is None:
            continue
        path = Path(file).resolve()
        if TESTS in path.parents:
            names.setdefault(path, []).append(name)
    return {str(p.relative_to(TESTS)): sorted(n) for p, n in names.items() if len(n) > 1}


def test_no_file_under_tests_is_loaded_under_two_names() -> None:
    twice = _twice(dict(sys.modules))
    assert not twice, f"loaded under two names (import them by package path): {twice}"


def test_a_bare_import_next_to_the_package_path_is_caught() -> None:
    file = str(TESTS / "quality" / "broken_stateful.py")
    fake = {n: types.SimpleNamespace(__file__=file) for n in ("broken_stateful", "tests.x")}
    assert _twice(fake) == {"quality/broken_stateful.py": ["broken_stateful", "tests.x"]}


def test_the_helpers_are_loaded_by_their_package_path() -> None:
    from tests.unit import _wait

    assert _wait.__name__ == "tests.unit._wait"
    assert "_wait" not in sys.modules, "a bare 'import _wait' loaded the helper a second time"
