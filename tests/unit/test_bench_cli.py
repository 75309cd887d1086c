"""``chunk-adapter bench``: a user's adapter, a clean error without redis-server, and
results only where the user says (or a fresh temporary folder, printed).

The sizes are cut down (``_sizes`` patched): these tests check where the
numbers come from and where they go, not the numbers.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from chunk_adapter.bench import run as bench_run
from chunk_adapter.cli import main

USER_ADAPTER = """
from chunk_adapter.adapter import ChunkAdapter

BUILT = []

def make(connector, *, stage_id, src_stage_id=None, build_payload=None):
    # No **options: a bench that passed the reference adapter's options would break here.
    BUILT.append(stage_id)
    return ChunkAdapter(connector, stage_id=stage_id, src_stage_id=src_stage_id,
                        build_payload=build_payload)
"""


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {"latency": 20, "save": 50, "chunks": 40, "idle_requests": 5}
    monkeypatch.setattr(bench_run, "_sizes", lambda quick: sizes)


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project folder, the current directory, holding ``user_bench_adapter.py``."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "user_bench_adapter.py").write_text(textwrap.dedent(USER_ADAPTER))
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    sys.modules.pop("user_bench_adapter", None)
    return project


def test_bench_measures_the_users_adapter_into_the_folder_given(
    small: None, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = user_dir.parent / "results"
    code = main(["bench", "--quick", "--connector", "memory", "--adapter",
                 "user_bench_adapter:make", "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr()
    import user_bench_adapter  # type: ignore[import-not-found]

    assert 0 in user_bench_adapter.BUILT and 1 in user_bench_adapter.BUILT  # both sides built
    results = json.loads((out / "bench.json").read_text())
    assert results["adapter"] == "user_bench_adapter:make"
    assert results["connectors"]["memory"]["polling.chunks_per_s.10"] > 0
    assert str(out / "bench.json") in capsys.readouterr().out
    assert sorted(p.name for p in user_dir.iterdir()) == ["user_bench_adapter.py"]


def test_bench_without_out_writes_to_a_printed_temporary_folder_not_the_cwd(
    small: None, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--quick", "--connector", "memory"]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("results: "))
    written = Path(line.removeprefix("results: "))
    assert written.name == "bench.json" and written.is_file(), printed
    assert user_dir not in written.parents, written
    assert not (user_dir / "benchmarks").exists()
    assert json.loads(written.read_text())["adapter"] == "chunk_adapter.adapter:ChunkAdapter"


def test_bench_redis_without_redis_server_is_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on it
    assert main(["bench", "--connector", "redis", "--out", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "apt-get install redis-server" in lines[0], captured.err
    monkeypatch.setenv("REDIS_SERVER", str(tmp_path / "no-such-redis-server"))
    assert main(["bench", "--connector", "redis"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "REDIS_SERVER=" in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_bench_with_an_adapter_that_cannot_be_imported_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--connector", "memory", "--adapter", "no_such_module_xyz:make"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chunk-adapter bench: cannot import module 'no_such_module_xyz'"), err
