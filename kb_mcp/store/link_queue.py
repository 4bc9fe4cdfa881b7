"""The linking phase's queue (``link_queue``, migration 13): documents stored since their
entities, relations and near-duplicates were last recorded (``ingest/links.py``).

An entry is written in the transaction that stores (or rewrites) its document and deleted
in the one that records what it links to; its id is never reused, so an entry names one
version of its document, and a document removed takes its entry with it (cascade).
"""

from __future__ import annotations

import apsw


def enqueue(conn: apsw.Connection, document_id: int) -> None:
    """Queue ``document_id``, as a new entry if it was queued already (a result computed
    for the old entry is then not written). Call in the transaction that stores it."""
    # What SQLite's INSERT OR REPLACE did, said in SQL both engines share: the old entry
    # goes and a new one takes the next id.
    conn.execute("DELETE FROM link_queue WHERE document_id = ?", (document_id,))
    conn.execute("INSERT INTO link_queue(document_id) VALUES (?)", (document_id,))


def enqueue_new(conn: apsw.Connection, document_id: int) -> None:
    """Queue a document inserted in this transaction: no entry can name it yet (a removed
    document's entry went with it, by cascade), so ``enqueue``'s delete is left out, a
    statement per stored file fewer (a round trip on PostgreSQL)."""
    conn.execute("INSERT INTO link_queue(document_id) VALUES (?)", (document_id,))


def is_queued(conn: apsw.Connection, document_id: int) -> bool:
    return (
        conn.execute("SELECT 1 FROM link_queue WHERE document_id = ?", (document_id,)).fetchone()
        is not None
    )


def pending_count(conn: apsw.Connection) -> int:
    """Documents whose entities, relations and near-duplicates are not recorded yet."""
    return conn.execute("SELECT COUNT(*) FROM link_queue").fetchone()[0]


def entries_after(conn: apsw.Connection, after: int, limit: int) -> list[tuple[int, int, int]]:
    """``(entry, document_id, chunks)`` of the next queued documents, in entry order."""
    return conn.execute(
        "SELECT q.id, q.document_id, "
        "(SELECT COUNT(*) FROM chunks c WHERE c.document_id = q.document_id) "
        "FROM link_queue q WHERE q.id > ? ORDER BY q.id LIMIT ?",
        (after, limit),
    ).fetchall()


def live_entries(conn: apsw.Connection, entries: list[int]) -> set[int]:
    """Those of ``entries`` still queued."""
    if not entries:
        return set()
    marks = ",".join("?" * len(entries))
    return {r[0] for r in conn.execute(f"SELECT id FROM link_queue WHERE id IN ({marks})", entries)}


def done(conn: apsw.Connection, entry: int) -> None:
    conn.execute("DELETE FROM link_queue WHERE id = ?", (entry,))
