"""The keyword index of a library's engine: the one place its writers and its reader are chosen.

A library on SQLite keeps its keyword index in FTS5 (``index/fts.py`` for passages,
``index/docs_fts.py`` for whole documents); one on PostgreSQL in tables of its own
(``index/postgres/keyword.py``, the same bm25 scores). The ingestion pipeline writes
through these four functions with whatever connection its ``db.write()`` gave it, and
``LibraryState`` reads through ``reader(db)``, so no caller asks which engine it runs on.

The engine is what the connection (or database) says it is: a PostgreSQL connection
(``store/postgres/connection.PgConnection``) and database carry ``engine =
"postgresql"``; apsw's connection carries nothing, and SQLite is the default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kb_mcp.index import docs_fts, fts

if TYPE_CHECKING:
    from kb_mcp.store.db import Database

POSTGRESQL = "postgresql"


def on_postgres(conn_or_db: Any) -> bool:
    """Whether a connection or database is the PostgreSQL store's."""
    return getattr(conn_or_db, "engine", None) == POSTGRESQL


def add_index_rows(conn: Any, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index ``(chunk_id, head, body)`` passage rows (``columns.index_row``), inside the
    caller's write, after the chunk rows are stored."""
    if on_postgres(conn):
        from kb_mcp.index.postgres import keyword

        with conn.pinned() as pg:
            keyword.add_index_rows(pg, rows, keyword.PASSAGES)
    else:
        fts.add_index_rows(conn, rows)


def remove_chunks(conn: Any, chunk_ids: Iterable[int]) -> None:
    """Drop passages from the keyword index, inside the caller's write."""
    if on_postgres(conn):
        from kb_mcp.index.postgres import keyword

        with conn.pinned() as pg:
            keyword.remove_chunks(pg, list(chunk_ids), keyword.PASSAGES)
    else:
        fts.remove_chunks(conn, chunk_ids)


def add_documents(conn: Any, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index ``(document_id, head, body)`` whole-document rows, inside the caller's write."""
    if on_postgres(conn):
        from kb_mcp.index.postgres import keyword

        with conn.pinned() as pg:
            keyword.add_index_rows(pg, rows, keyword.DOCUMENTS)
    else:
        docs_fts.add_documents(conn, rows)


def remove_documents(conn: Any, document_ids: Iterable[int]) -> None:
    """Drop whole documents from the keyword index, inside the caller's write."""
    if on_postgres(conn):
        from kb_mcp.index.postgres import keyword

        with conn.pinned() as pg:
            keyword.remove_chunks(pg, list(document_ids), keyword.DOCUMENTS)
    else:
        docs_fts.remove_documents(conn, document_ids)


def reset(conn: Any) -> None:
    """Empty both keyword indexes inside the caller's write, which writes them again (a
    rebuild of a library on PostgreSQL, from its stored text). On SQLite a rebuild
    deletes the rows the FTS5 tables index and lets ``FtsIndex.ensure_current`` remake
    them, so this is PostgreSQL's alone."""
    if not on_postgres(conn):
        raise RuntimeError("keyword_store.reset is for a PostgreSQL library")  # a bug
    from kb_mcp.index.postgres import keyword

    with conn.pinned() as pg:
        keyword.reset(pg, keyword.PASSAGES)
        keyword.reset(pg, keyword.DOCUMENTS)


def reader(db: Database) -> Any:
    """The index a library's searches read: ``FtsIndex`` on SQLite; on PostgreSQL
    ``PostgresKeywordIndex`` (the same methods), each of its calls on one pooled
    connection (``_Pinned``)."""
    if not on_postgres(db):
        return fts.FtsIndex(db)
    from kb_mcp.index.postgres.keyword_reader import PostgresKeywordIndex

    def current() -> Any:
        pinned = db.conn.pinned_connection
        if pinned is None:  # a bug: every call of the index runs inside ``_Pinned``
            raise RuntimeError("the keyword index read outside a pinned connection")
        return pinned

    index = PostgresKeywordIndex(current, stamp=db.change_stamp, connect=db.connect)
    return _Pinned(db, index)


class _Pinned:
    """``PostgresKeywordIndex`` with each method call run on one connection of the pool.

    Why: the index reads through a psycopg connection it is handed per call, while the
    engine lends its pooled connections a block at a time (``PgConnection.pinned``); a
    call inside a block already (a search's deadline, a write) uses that block's."""

    def __init__(self, db: Database, index: Any) -> None:
        self._db = db
        self._index = index

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._index, name)
        if not callable(found):
            return found

        def pinned(*args: Any, **kwargs: Any) -> Any:
            with self._db.conn.pinned():
                return found(*args, **kwargs)

        return pinned


def optimize(conn: Any) -> None:
    """Inside a write that removed text which must not survive (``ingest/reredact.py``):
    SQLite's FTS5 merges its segments so no removed term stays in one. On PostgreSQL a
    removed passage's delta rows are gone already and its packed lists are rewritten by
    ``purge_removed`` after the commit (a merge runs on connections of its own)."""
    if not on_postgres(conn):
        fts.optimize(conn)


def purge_removed(db: Database) -> None:
    """After such a write committed: on PostgreSQL, merge both keyword indexes, so the
    next generation's packed lists hold no removed passage's terms (the engine's
    ``compact`` then rewrites the tables' files); on SQLite ``optimize`` did it."""
    if not on_postgres(db):
        return
    from kb_mcp.index.postgres import keyword, keyword_merge

    for tables in (keyword.PASSAGES, keyword.DOCUMENTS):
        keyword_merge.merge(db.connect, tables=tables)  # type: ignore[attr-defined]
