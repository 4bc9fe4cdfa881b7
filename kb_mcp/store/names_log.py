"""Rows of ``names_log``: which documents' names and which relation rows changed.

SQL only. Triggers (migration 8) write an entry for every change, in the transaction of
the change, so the log commits and rolls back with it; ``relations/name_index.py`` reads
it to keep its in-memory copy of the library's names current.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

DOCUMENT, RELATION = 0, 1


@dataclass(frozen=True, slots=True)
class Entry:
    """One change: its place in the log, its random token, what changed (``DOCUMENT``
    or ``RELATION``) and that item's id."""

    seq: int
    token: int
    what: int
    item: int


def token_at(conn: apsw.Connection, seq: int) -> int | None:
    """The token of entry ``seq``; None when there is no such entry (pruned, never
    written, or rolled back)."""
    row = conn.execute("SELECT token FROM names_log WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else row[0]


def newest(conn: apsw.Connection) -> tuple[int, int | None]:
    """The last entry's (seq, token); (0, None) for an empty log."""
    row = conn.execute("SELECT seq, token FROM names_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, None) if row is None else (row[0], row[1])


def entries_after(conn: apsw.Connection, seq: int, limit: int) -> list[Entry]:
    """Up to ``limit`` entries after ``seq``, in order."""
    return [
        Entry(*r)
        for r in conn.execute(
            "SELECT seq, token, what, item FROM names_log WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit),
        )
    ]


def prune(conn: apsw.Connection, keep: int) -> None:
    """Drop all but the last ``keep`` entries, once the log holds twice that many (a
    reader further behind reads the library again instead of the log)."""
    # Two statements: SQLite answers a lone min() or max() from the key, not both at once.
    oldest = conn.execute("SELECT min(seq) FROM names_log").fetchone()[0]
    last = conn.execute("SELECT max(seq) FROM names_log").fetchone()[0]
    if oldest is not None and last - oldest >= 2 * keep:
        conn.execute("DELETE FROM names_log WHERE seq <= ?", (last - keep,))
