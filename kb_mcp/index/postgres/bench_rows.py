"""The rows and figures the PostgreSQL vector bench stands on (``bench/pg_vectors.py``):
its database, a library's rows to hang vectors on, and the server's own sizes and
settings. SQL lives in the storage layers, so the bench asks here.

The bench's database is a library's: ``PostgresDatabase`` migrates it (the store's
schema, the keyword and vector indexes' tables) and its sources, documents and
locations are written by the store's rows functions; its chunks by one INSERT of
generated rows, with ids chosen so every ``small_share``-th is the small source's (the
rows functions hand out ids a document after another).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb_mcp.store import documents as rows
from kb_mcp.store.paths import StoredPath
from kb_mcp.store.postgres.database import PostgresDatabase

if TYPE_CHECKING:
    import psycopg

NOW = "2024-01-01T00:00:00Z"


def bench_database(url: str, name: str, fresh: bool) -> tuple[str, bool]:
    """The URL of database ``name`` on the server of ``url``, and whether it was made anew
    (with ``fresh``, or when missing); else it holds an earlier run's rows. ``name`` is
    the bench's own, never user text."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        made = fresh or exists.fetchone() is None
        if made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**params), made


def add_chunks(url: str, size: int, small_share: int) -> list[int]:
    """Into the library at ``url`` (migrated first): ``size`` chunks, ids 1.., in two
    documents, source 1's and a small source 2's (every ``small_share``-th id)."""
    database = PostgresDatabase(url, pool_size=1)
    try:
        with database.write() as conn:
            for name in ("big", "small"):
                source_id = rows.ensure_source(conn, name, "agent", NOW)
                document = rows.NewDocument(
                    name, name, None, "note", None, name, name, None, (), NOW, NOW
                )
                document_id = rows.insert_document(conn, document)
                rows.upsert_location(conn, source_id, StoredPath(name, name), document_id)
            conn.execute(  # documents 1 and 2, in the order made
                "INSERT INTO chunks(id, document_id, ordinal, start_line, end_line, text) "
                "SELECT g, CASE WHEN g % ? = 0 THEN 2 ELSE 1 END, g, 1, 1, 'passage ' || g "
                "FROM generate_series(1, ?) g",
                (small_share, size),
            )
            # the identity past the ids given, as for rows it handed out itself
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('chunks', 'id'), ? + 1, false)", (size,)
            )
    finally:
        database.close()
    return list(range(1, size + 1))


def analyze(conn: psycopg.Connection) -> None:
    """Fresh planner statistics, as autovacuum would gather them after a load."""
    conn.execute("ANALYZE")


def sizes(conn: psycopg.Connection, key: str) -> tuple[int, int]:
    """Bytes of a signature's vectors table (TOAST included) and of its HNSW index."""
    table = f"vec_{key}"
    row = conn.execute(
        "SELECT pg_table_size(%s), pg_relation_size(%s)", (table, f"{table}_hnsw")
    ).fetchone()
    return int(row[0]), int(row[1])


def settings(conn: psycopg.Connection, names: tuple[str, ...]) -> dict[str, str]:
    """The server's values of these settings."""
    found = conn.execute(
        "SELECT name, setting || COALESCE(unit, '') FROM pg_settings WHERE name = ANY(%s)",
        (list(names),),
    )
    return dict(found.fetchall())
