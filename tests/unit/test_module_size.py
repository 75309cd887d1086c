"""House style: small modules with one job. A module of src/ over 400 lines says why
in its docstring ("Over 400 lines, and one module because ..."), so a reader knows the
length was a choice and a reviewer sees when the reason stops holding."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "chunk_adapter"
LIMIT = 400
REASON = "Over 400 lines, and one module because"


def long_without_reason(root: Path) -> list[str]:
    """Modules under *root* longer than :data:`LIMIT` lines whose docstring gives no reason."""
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= LIMIT:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if REASON not in " ".join(doc.split()):
            out.append(f"{path.relative_to(root)} ({text.count(chr(10))} lines)")
    return out


def test_every_long_module_says_why_it_is_one_module() -> None:
    missing = long_without_reason(SRC)
    assert not missing, f"split these, or say why not in the docstring ({REASON!r}): {missing}"


def test_a_long_module_without_a_reason_is_named(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text('"""Short."""\n')
    (tmp_path / "long.py").write_text('"""Long, no reason."""\n' + "x = 1\n" * LIMIT)
    (tmp_path / "kept.py").write_text(f'"""Long.\n\n{REASON} it is."""\n' + "x = 1\n" * LIMIT)
    assert long_without_reason(tmp_path) == [f"long.py ({LIMIT + 1} lines)"]
