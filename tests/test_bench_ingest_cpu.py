"""``python -m kb_mcp.bench.ingest_cpu`` (issue 10, ingest speed): a sync's CPU, writer and
readers apart, and cProfile of both."""

from __future__ import annotations

import pstats
import subprocess
import sys
from pathlib import Path

import pytest

from kb_mcp.bench import ingest_cpu
from kb_mcp.ingest import filework, readahead


def _notes(folder: Path, count: int) -> None:
    folder.mkdir()
    for n in range(count):
        (folder / f"note{n}.md").write_text(
            f"# Note {n}\n\nThe heron{n} nests by the estuary with Team Atlas.\n", encoding="utf-8"
        )


def test_ingest_cpu_profiles_the_writer_and_the_reader_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 10: the bench's split (writer CPU, reader CPU, MB) comes with a profile of
    each side, the readers' made in the spawned workers it handed ``_read_file_profiled``
    to; and the real reading function is back afterwards."""
    _notes(tmp_path / "notes", 6)
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)  # a reader pool for 6 files
    megabytes, writer_s, readers_s = ingest_cpu.measure(tmp_path / "notes", tmp_path / "prof")
    assert 0 < megabytes < 0.01 and writer_s > 0 and readers_s > 0
    writer = pstats.Stats(str(tmp_path / "prof" / "writer.prof"))
    readers = pstats.Stats(str(tmp_path / "prof" / "readers.prof"))
    in_writer = {name for _file, _line, name in writer.stats}  # type: ignore[attr-defined]
    in_readers = {name for _file, _line, name in readers.stats}  # type: ignore[attr-defined]
    assert "sync_folder" in in_writer and "read_file" not in in_writer
    assert "read_file" in in_readers
    assert filework.read_file is ingest_cpu._READ_FILE


def _bench_ingest(folder: Path, child_env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kb_mcp", "bench", "ingest", str(folder)]
    return subprocess.run(command, env=child_env, capture_output=True, text=True, check=False)


def test_bench_ingest_sets_kb_mcp_beside_a_naive_table_over_the_same_files(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 22: ``kb-mcp bench ingest FOLDER`` reports both phases and the ratios to a
    naive FTS5 table built in the same run from the files the sync reads."""
    _notes(tmp_path / "notes", 4)
    (tmp_path / "notes" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))  # not read
    assert [f.rel for f in _naive_files(tmp_path / "notes")] == [f"note{n}.md" for n in range(4)]
    result = _bench_ingest(tmp_path / "notes", child_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("0.0 MB; keyword phase: writer CPU ")
    assert lines[1].startswith("keyword-searchable after ")
    assert "then linking (entities, relations, near-duplicates)" in lines[1]
    assert lines[2].startswith("naive FTS5 table over the same files: ")
    assert "x its wall time and " in lines[2] and lines[2].endswith("x its CPU")
    missing = _bench_ingest(tmp_path / "absent", child_env)
    assert missing.returncode != 0 and "no folder at" in missing.stderr


def _naive_files(folder: Path):
    from kb_mcp.ingest.sources import FolderSource
    from kb_mcp.ingest.sync import walk_source

    source = FolderSource("corpus", str(folder.resolve()), gitignore=True)
    return sorted(walk_source(source, max_files=100).files, key=lambda f: f.rel)
