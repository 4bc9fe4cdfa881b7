"""``python -m kb_mcp.bench.ingest_cpu`` (issue 10, ingest speed): a sync's CPU, writer and
readers apart, and cProfile of both."""

from __future__ import annotations

import pstats
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
