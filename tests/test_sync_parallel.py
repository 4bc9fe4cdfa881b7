"""A large sync reads files in worker processes; what it stores is the same as a serial one."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from kb_mcp.ingest import filework, pipeline, readahead, sync
from kb_mcp.ingest.walk import FoundFile
from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings
from kb_mcp.store.db import BULK_CACHE_KIB, Database


def make_notes(folder: Path, count: int) -> None:
    for n in range(count):
        sub = folder / f"part{n % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note{n}.md").write_text(
            f"# Note {n}\n\n## Body\n\nThe heron{n} nests by the estuary.\n", encoding="utf-8"
        )
    (folder / "tool.py").write_text("def lookup_heron(n):\n    return n\n", encoding="utf-8")
    (folder / "broken.txt").write_bytes(b"\x00\x01\x02binary" * 10)


def snapshot(library: Library) -> tuple:
    hits = library.lookup.search("heron7 estuary", top_k=5).hits
    return (
        library.catalog.overview().documents,
        library.catalog.overview().chunks,
        [(h.path, h.cite) for h in hits],
        sorted(path for report in library.folders.sync() for path, _ in report.failures),
    )


def synced_snapshot(tmp_path: Path, name: str) -> tuple:
    with Library(Settings(home=tmp_path / name)) as library:
        library.folders.add_folder(tmp_path / "notes", "notes")
        [report] = library.folders.sync("notes")
        assert (report.added, report.failed) == (31, 1)
        return snapshot(library)


def test_sync_stores_the_same_whether_files_are_read_serially_or_in_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_notes(tmp_path / "notes", 30)
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 10**9)
    serial = synced_snapshot(tmp_path, "serial")
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(readahead, "READ_AHEAD", 4)  # more files than the window: order kept
    parallel = synced_snapshot(tmp_path, "parallel")
    assert parallel == serial
    assert serial[0] == 31 and serial[2][0][0] == "part1/note7.md"
    assert serial[3] == ["broken.txt"]


def _entity_notes(folder: Path, count: int, edition: str) -> None:
    """Notes sharing entities across files (each spelled several ways), so one batch
    upserts the same entity from many documents."""
    spellings = ("BlobStore", "Blob Store", "Blobstore")
    for n in range(count):
        (folder / f"n{n:02d}.md").write_text(
            f"# Storage {edition} {n % 4}\n\nThe {spellings[n % 3]} keeps `cache_{n % 5}`; "
            f"ask @ops{n % 2} about TICKET-{n % 7} and Team Atlas.\n\n"
            f"- Team Atlas owns it\n- v1.{n % 3}.0 {edition}\n",
            encoding="utf-8",
        )


def test_sync_batched_graph_writes_equal_a_rebuild_after_adds_and_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 10: a sync writes the entities of a whole batch of files at once
    (``graph.PendingMentions``), read in worker processes; the graph it leaves, after a
    first sync and after one that replaces half the files, is the graph a rebuild makes
    document by document (counts, names, aliases, pairs)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    _entity_notes(folder, 24, "first")
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        [report] = library.folders.sync("notes")
        assert report.added == 24
        batched = library.graph.snapshot()
        blob = next(e for e in batched[0] if e[0] == "blobstore")
        assert blob[4] == 24 and len(json.loads(blob[3])) == 3  # one entity, three spellings
        library.writing.reindex(rebuild=True)
        assert library.graph.snapshot() == batched
        for n in range(0, 24, 2):  # replace half: removals and adds in one batch
            (folder / f"n{n:02d}.md").write_text(
                f"# Edited {n}\n\nOnly the Blob Store now, and `cache_{n}`.\n", encoding="utf-8"
            )
        [report] = library.folders.sync("notes")
        assert report.updated == 12
        edited = library.graph.snapshot()
        library.writing.reindex(rebuild=True)
        assert library.graph.snapshot() == edited


def _keyword_index(home: Path) -> tuple[list[tuple], int, int]:
    """The FTS index's terms with their row and occurrence counts, its rows, the chunks."""
    conn = apsw.Connection(str(home / DB_FILE), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        terms = conn.execute("SELECT term, doc, cnt FROM chunks_fts_vocab ORDER BY term").fetchall()
        (indexed,) = conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()
        (chunks,) = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
        return terms, indexed, chunks
    finally:
        conn.close()


def test_sync_batched_keyword_rows_equal_a_rebuild_after_adds_and_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 10 (ingest speed): a sync writes the FTS rows of a whole batch at once
    (``pipeline.PendingRows``), flushed before anything in the batch is removed; the
    keyword index it leaves, after a first sync and after one that replaces half the
    files (removals and adds in one batch), holds the terms a rebuild gives, one row
    per chunk, and nothing of the replaced text."""
    folder = tmp_path / "notes"
    folder.mkdir()
    _entity_notes(folder, 24, "first")
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        [report] = library.folders.sync("notes")
        assert report.added == 24
        batched = _keyword_index(home)
        first = {term: docs for term, docs, _cnt in batched[0]}["first"]
        assert batched[1] == batched[2] and first == 24
        library.writing.reindex(rebuild=True)
        assert _keyword_index(home) == batched
        for n in range(0, 24, 2):
            (folder / f"n{n:02d}.md").write_text(
                f"# Edited {n}\n\nOnly the Blob Store now, and `cache_{n}`.\n", encoding="utf-8"
            )
        [report] = library.folders.sync("notes")
        assert report.updated == 12
        edited = _keyword_index(home)
        first = {term: docs for term, docs, _cnt in edited[0]}["first"]
        assert edited[1] == edited[2] and first == 12  # the replaced text is gone
        library.writing.reindex(rebuild=True)
        assert _keyword_index(home) == edited


def test_sync_large_files_read_here_and_indexed_in_slices_store_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 10 (memory): a file over ``LARGE_FILE_BYTES`` is read in the writer process
    and its index copies and entities are made slice by slice as they are written, so a
    big file never exists several times over; what it stores (documents, chunks, search
    hits, the graph) is what the eager path, through the workers, stores."""
    make_notes(tmp_path / "notes", 30)
    _entity_notes(tmp_path / "notes", 12, "big")
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)

    def synced(name: str) -> tuple:
        with Library(Settings(home=tmp_path / name, embedder="none")) as library:
            library.folders.add_folder(tmp_path / "notes", "notes")
            library.folders.sync("notes")
            return snapshot(library), library.graph.snapshot()

    eager = synced("eager")
    monkeypatch.setattr(filework, "LARGE_FILE_BYTES", 0)  # every file is "large"
    monkeypatch.setattr(pipeline, "LARGE_SLICE_CHUNKS", 1)
    lazy = synced("lazy")
    assert lazy == eager
    assert eager[0][0] == 43 and eager[1][0]


def test_sync_batch_page_cache_is_large_for_small_files_and_default_for_a_large_one(
    tmp_path: Path,
) -> None:
    """issue 10: a batch of small files is written with ``Database.bulk_cache`` (fewer
    CPU seconds), a batch holding a large file with SQLite's default cache, so that file
    does not add ``BULK_CACHE_KIB`` of resident memory to the 250 MB bound."""
    db = Database(tmp_path / DB_FILE)
    default = db.conn.execute("PRAGMA cache_size").fetchone()[0]
    now = filework.utc_now()

    def batch(size: int) -> list:
        found = FoundFile(tmp_path / "a.md", "a.md", size, 0)
        return [(found, filework.FileWork(found, now))]

    with sync._page_cache(db, batch(100)):
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == -BULK_CACHE_KIB
    with sync._page_cache(db, batch(filework.LARGE_FILE_BYTES + 1)):
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == default
    assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == default
    db.close()
