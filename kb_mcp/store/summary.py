"""What a library holds, read cheaply for the server's instructions (issue 12).

The server answers ``initialize`` before it opens the library (``server/lifecycle.py``),
and its instructions say what the library holds, so this read must cost milliseconds at any
size: a read-only connection (nothing created, no migration, no write lock), per-source
document counts from ``locations`` and two ``COUNT(*)`` over small indexes. Measured on
copies of bench libraries (medians, shared 2-core machine at load 14): 6.7 ms of CPU
(30 ms wall) for 10,000 files / 11,520 chunks, 2.2 ms wall for 100,000 chunks. Any failure
(no library yet, a database from a newer version, a locked or damaged file) is None: the
instructions then say less, and the tools report the problem properly when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import apsw

from kb_mcp.store.counts import repeated_paths

BUSY_TIMEOUT_MS = 200  # a summary is not worth waiting for; the instructions say less


@dataclass(frozen=True, slots=True)
class SourceSummary:
    name: str
    kind: str
    documents: int


@dataclass(frozen=True, slots=True)
class LibrarySummary:
    sources: tuple[SourceSummary, ...]
    documents: int
    chunks: int
    vector_signatures: int  # embedding signatures with stored vectors (any embedder)


def library_summary(db_path: Path) -> LibrarySummary | None:
    """The summary of the library database at ``db_path``, None when it cannot be read."""
    if not db_path.is_file():
        return None
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        # A library from before migration 4 has no signatures table (nor is it migrated
        # here); asked of SQLite's catalog, the one SQLite-only read of the summary.
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        return summarize(conn, signatures="embedding_signatures" in tables)
    except apsw.Error:
        return None
    finally:
        conn.close()


def summarize(conn: apsw.Connection, *, signatures: bool = True) -> LibrarySummary:
    """The summary read through ``conn`` (either engine); ``signatures``: whether the
    schema has the embedding signatures table to count."""
    # Paths holding a document, less the repeats ``counts.repeated_paths`` finds (one
    # identical file at two paths of one folder), not COUNT(DISTINCT ...): that sorts in
    # a temp b-tree (37-80 ms more on the 10k-file library).
    held = dict(
        conn.execute(
            "SELECT source_id, COUNT(document_id) FROM locations GROUP BY source_id"
        ).fetchall()
    )
    repeats = repeated_paths(conn)
    sources = tuple(
        SourceSummary(name, kind, held.get(source_id, 0) - repeats.get(source_id, 0))
        for source_id, name, kind in conn.execute("SELECT id, name, kind FROM sources ORDER BY id")
    )
    documents = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    held_signatures = 0
    if signatures:
        held_signatures = conn.execute("SELECT COUNT(*) FROM embedding_signatures").fetchone()[0]
    return LibrarySummary(sources, documents, chunks, held_signatures)
