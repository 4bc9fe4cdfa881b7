"""Per-source counts for the library page and ``doctor``: documents, chunks and failed
files of each source, and the failed files themselves, cheap at 100k chunks (issue 12).

Trigger: the library page must answer in ≤ 100 ms of server time at 100k chunks, also
on the first request after a change (when ``LibraryState.memo`` recomputes). One query that
counted every source's chunks through ``COUNT(DISTINCT ...)`` and a correlated
``IN (...)`` cost 49 ms of CPU there (``bench web`` library, 12,500 files / 100,002
chunks, shared 2-core machine), ~100 ms of wall time under load.

How: every count is read from a small structure, never by visiting each document.
``locations`` is read once as a table (12.5k short rows: ~4 ms, where walking its
``(source_id, path)`` index and each row behind it costs more), and the few documents
held at more than one path come from the ``locations_document`` index (~1 ms), so
documents are counted exactly as ``COUNT(DISTINCT document_id)`` did. A folder's
documents are inserted together, so its document ids usually form one range that holds
nothing else; then its chunks are one range count over the ``(document_id, ordinal)``
index (~3 ms for 100k chunks), after checking that the range holds no other document
(a count over the narrow ``documents_hash`` index, ~1 ms). A source whose range holds
others' documents too (an agent source written between syncs) falls back to counting
its own documents' chunks one document at a time, which costs in proportion to that
source alone.

The SQL is the dialect SQLite and PostgreSQL share, so SQLite's plans are asked for
without its hints (``NOT INDEXED``, ``INDEXED BY``, which PostgreSQL does not parse): a
unary ``+`` on a column keeps SQLite from an index on it (SQLite's documented way; a
no-op to PostgreSQL, whose planner chooses by its statistics). The plans SQLite shows
(``EXPLAIN QUERY PLAN``) are those the hints gave.
"""

from __future__ import annotations

import apsw


def source_counts(conn: apsw.Connection) -> dict[int, tuple[int, int, int]]:
    """source id → (documents, chunks, failed files); a document held at two paths of
    one source counts once, and a document held by two sources counts in both."""
    # ``+source_id``: a table scan of the short location rows beats the (source_id, path)
    # index plus a row lookup for each entry (3.9 vs 6.4 ms of CPU at 12.5k files).
    spans = conn.execute(
        "SELECT +source_id, COUNT(document_id), COUNT(CASE WHEN state = 'failed' THEN 1 END), "
        "MIN(document_id), MAX(document_id) FROM locations GROUP BY 1"
    ).fetchall()
    repeats = repeated_paths(conn)
    counts = {}
    for source_id, held, failed, low, high in spans:
        documents = held - repeats.get(source_id, 0)
        chunks = _chunks_of(conn, source_id, documents, low, high) if documents else 0
        counts[source_id] = (documents, chunks, failed or 0)
    return counts


def repeated_paths(conn: apsw.Connection) -> dict[int, int]:
    """source id → paths holding a document another path of that source holds too (what
    ``COUNT(document_id)`` counts more than ``COUNT(DISTINCT document_id)``)."""
    return dict(
        conn.execute(
            "SELECT source_id, CAST(SUM(n - 1) AS BIGINT) FROM ("
            "  SELECT source_id, COUNT(*) AS n FROM locations WHERE document_id IN ("
            "    SELECT document_id FROM locations "
            "    WHERE document_id IS NOT NULL GROUP BY document_id HAVING COUNT(*) > 1) "
            "  GROUP BY source_id, document_id HAVING COUNT(*) > 1) AS repeats "
            "GROUP BY source_id"
        ).fetchall()
    )


def _chunks_of(conn: apsw.Connection, source_id: int, documents: int, low: int, high: int) -> int:
    """Chunks of the source's ``documents`` documents, whose ids lie in [low, high]."""
    # ``+id``: through a narrow index (SQLite takes a covering one), not the table's id
    # range, whose rows carry the text (8.4 vs 0.8 ms at 12.5k).
    in_range = conn.execute(
        "SELECT COUNT(*) FROM documents WHERE +id BETWEEN ? AND ?", (low, high)
    ).fetchone()[0]
    if in_range == documents:  # the range holds this source's documents and no other
        return conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE document_id BETWEEN ? AND ?", (low, high)
        ).fetchone()[0]
    return conn.execute(
        "SELECT CAST(COALESCE(SUM((SELECT COUNT(*) FROM chunks c WHERE c.document_id = h.id)), "
        "0) AS BIGINT) "
        "FROM (SELECT DISTINCT document_id AS id FROM locations "
        "      WHERE source_id = ? AND document_id IS NOT NULL) h",
        (source_id,),
    ).fetchone()[0]


def failed_files(conn: apsw.Connection, limit: int) -> list[tuple[str, str, str]]:
    """(source name, path, reason) of failed folder files, source by source (id order),
    path order, at most ``limit``: one scan of the location rows (0.7 ms of CPU at 12.5k
    files, where reading each source's rows through its index cost 8.6 ms; SQLite scans
    them for the ``state`` filter unasked)."""
    return conn.execute(
        "SELECT s.name, l.path, COALESCE(l.reason, '') FROM locations AS l "
        "JOIN sources s ON s.id = l.source_id WHERE l.state = 'failed' "
        "ORDER BY l.source_id, l.path LIMIT ?",
        (limit,),
    ).fetchall()
