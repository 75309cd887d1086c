"""Every Python block of README.md and docs/*.md runs, so the docs stay true.

The blocks of one file run in order, in one namespace, in a fresh interpreter
(as a reader would paste them). A reader's own adapter is played by the
reference one: ``MyAdapter`` is ``ChunkAdapter``, ``make`` its factory, and a
``mypkg`` package holds them. A block that cannot run here says why in a ``<!-- no-run: reason -->``
line just above it; there is none today.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- no-run: [^>]+-->\n)?```python\n(.*?)```", re.S)
PRELUDE = (
    "from chunk_adapter import ChunkAdapter as MyAdapter\n"
    "from chunk_adapter.factory import reference_factory as make\n"
)
MYPKG = {
    "mypkg/__init__.py": "from chunk_adapter.factory import reference_factory as make\n",
    "mypkg/vendored.py": "",
    "mypkg/adapter.py": "from chunk_adapter.adapter import ChunkAdapter as Adapter\n",
    "mypkg/mymod.py": "from chunk_adapter.factory import reference_factory as my_factory\n",
}


def blocks(path: Path) -> list[str]:
    return [code for skip, code in BLOCK.findall(path.read_text()) if not skip]


SLOW_DOCS = {"explorer.md"}
"""Docs whose blocks run long explorations (~40 s): -m slow, so CI stays under 15 minutes."""


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, id=p.name, marks=pytest.mark.slow if p.name in SLOW_DOCS else ())
        for p in DOCS
        if blocks(p)
    ],
)
def test_the_python_blocks_run(path: Path, tmp_path: Path) -> None:
    for name, text in MYPKG.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    script = PRELUDE + "\n".join(blocks(path))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"{path.name}'s code blocks failed:\n{proc.stdout}{proc.stderr}"
    if path.name == "README.md":  # the first example prints what it received
        assert "req-1 {'data': {'tokens': [3]}, 'finished': True}" in proc.stdout, proc.stdout
