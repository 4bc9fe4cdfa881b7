"""The ``meta`` table: small named values a library records about its own rows.

Versions of derived data live here (``fts_version``, ``redact_rules_version``) so that a
lazy migration can tell whether it is due, and resume markers so that an interrupted one
can go on where it stopped.
"""

from __future__ import annotations

import apsw


def get(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def put(conn: apsw.Connection, key: str, value: str) -> None:
    """Set ``key`` (call inside ``db.write()``)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def delete(conn: apsw.Connection, key: str) -> None:
    """Forget ``key`` (call inside ``db.write()``)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))
