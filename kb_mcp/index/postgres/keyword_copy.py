"""A SQLite library's rows and keyword rows copied into a PostgreSQL library.

For the comparison bench (``bench/keyword_pg.py``) and the tests that hold the two
stores' rankings side by side, until the store's own copy (issue 24's ``migrate --to``)
exists. The target is a library's database (migrated by ``PostgresDatabase``: the
store's schema and the keyword index's tables), so the copy writes what a library
holds: the store's rows the keyword index reads (``chunks`` for document ids,
``locations`` for a source's documents) and the rows those reference, with their ids
as the library has them, and the keyword rows ``columns.index_row`` makes of each
chunk, written through the index's own writer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import apsw
import psycopg

from kb_mcp.index import docs_fts
from kb_mcp.index.columns import index_row
from kb_mcp.index.postgres import keyword
from kb_mcp.store.postgres.database import PostgresDatabase

COPY_BATCH = 500
# The store's tables a copy writes, each after those it references: the keyword index
# reads chunks and locations.
STORE_TABLES = ("sources", "documents", "locations", "chunks")
# Per table, the columns holding ids of these tables, and those that must be unique
# (``copy_rows``'s ``shift`` moves the first and marks the second, so a library can be
# copied again beside itself).
_ID_COLUMNS = {
    "sources": ("id",),
    "documents": ("id",),
    "locations": ("id", "source_id", "document_id"),
    "chunks": ("id", "document_id"),
}
_UNIQUE_TEXT = {"sources": ("name",), "documents": ("doc_key",), "locations": ("path_key",)}


def _columns(source: apsw.Connection, table: str) -> list[str]:
    """The table's columns as the SQLite library has them; the PostgreSQL schema has the
    same (``store/postgres/schema.py``)."""
    return [row[1] for row in source.execute(f"PRAGMA table_info({table})")]


def copy_rows(
    source: apsw.Connection,
    conn: psycopg.Connection,
    table: str,
    ids: Sequence[int] | None = None,
    shift: int = 0,
) -> None:
    """COPY the library's rows of ``table`` (or those with ``ids``) into the same table,
    ids kept; with ``shift``, every id moved by it and each unique text marked with it
    (copy ``k`` of a library beside the others)."""
    _copy(source, conn, table, table, ids, shift)
    _advance_identity(conn, table)


def copy_store(source: apsw.Connection, conn: psycopg.Connection) -> None:
    """Make the PostgreSQL library's store rows (``STORE_TABLES``) those the SQLite
    library holds now, ids kept, in one transaction: rows whose id is gone deleted (with
    the store's cascades), the others written as they are now. A chunk's keyword rows
    must be removed before its row goes (``keyword.remove_chunks``)."""
    with conn.transaction():
        for table in reversed(STORE_TABLES):
            now = [r[0] for r in source.execute(f"SELECT id FROM {table}")]
            conn.execute(f"DELETE FROM {table} WHERE NOT id = ANY(%s)", (now,))
        for table in STORE_TABLES:
            columns = _columns(source, table)
            conn.execute(f"CREATE TEMP TABLE copied (LIKE {table}) ON COMMIT DROP")
            _copy(source, conn, table, "copied")
            names = ", ".join(columns)
            changes = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c != "id")
            conn.execute(  # rows as they are already are not written again
                f"INSERT INTO {table}({names}) SELECT {names} FROM copied "
                f"ON CONFLICT (id) DO UPDATE SET {changes} "
                f"WHERE ({table}.*) IS DISTINCT FROM (EXCLUDED.*)"
            )
            conn.execute("DROP TABLE copied")
            _advance_identity(conn, table)


def _copy(
    source: apsw.Connection,
    conn: psycopg.Connection,
    table: str,
    into: str,
    ids: Sequence[int] | None = None,
    shift: int = 0,
) -> None:
    """COPY the rows of ``table`` (or those with ``ids``, moved by ``shift``) into the
    table ``into``."""
    columns = _columns(source, table)
    select = ", ".join(
        f"{c} + {int(shift)}"
        if shift and c in _ID_COLUMNS[table]
        else f"{c} || '#{int(shift)}'"
        if shift and c in _UNIQUE_TEXT.get(table, ())
        else c
        for c in columns
    )
    where = ""
    if ids is not None:
        where = f"WHERE id IN ({','.join(str(int(i)) for i in ids)})"
    found = source.execute(f"SELECT {select} FROM {table} {where} ORDER BY id")
    with conn.cursor().copy(f"COPY {into}({', '.join(columns)}) FROM STDIN") as copy:
        for row in found:
            copy.write_row(row)


def _advance_identity(conn: psycopg.Connection, table: str) -> None:
    """The table's identity past the ids a copy wrote, so rows the store inserts later
    get fresh ones (an identity does not move for ids given explicitly)."""
    conn.execute(
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
        f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
    )


def create_library(url: str) -> None:
    """Migrate the database at ``url`` as a library's (``PostgresDatabase`` does on
    open): the store's tables, the keyword index's and the vectors'."""
    PostgresDatabase(url, pool_size=1).close()


def chunk_rows(conn: apsw.Connection, chunk_ids: Sequence[int] | None = None) -> list[tuple]:
    """``(chunk_id, document_id, head, body)`` of the library's chunks (or of
    ``chunk_ids``), the rows the store writes to its keyword index."""
    where = ""
    if chunk_ids is not None:
        where = f"WHERE c.id IN ({','.join(str(int(c)) for c in chunk_ids)})"
    rows = conn.execute(
        "SELECT c.id, c.document_id, d.title, c.heading_path, c.text, "
        "CASE WHEN d.kind = 'code' THEN d.language END FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id {where} ORDER BY c.id"
    ).fetchall()
    return [
        (cid, doc, *index_row(title, json.loads(path), text, language))
        for cid, doc, title, path, text, language in rows
    ]


def mirror(source: apsw.Connection, conn: psycopg.Connection) -> tuple[int, int]:
    """Make the PostgreSQL library hold what the SQLite library holds now: its store
    rows (``copy_store``), with the keyword rows of its chunks removed since removed
    first, then its new chunks indexed (in batches of one transaction each), and the
    documents they belong to indexed again as wholes; ``(removed, added)``."""
    held = {r[0] for r in conn.execute("SELECT chunk_id FROM kw_passages")}
    now = {r[0] for r in source.execute("SELECT id FROM chunks")}
    gone, new = sorted(held - now), sorted(now - held)
    changed = {
        r[0] for r in conn.execute("SELECT document_id FROM chunks WHERE id = ANY(%s)", (gone,))
    }
    with conn.transaction():
        keyword.remove_chunks(conn, gone)
        copy_store(source, conn)
    for at in range(0, len(new), COPY_BATCH):
        rows = chunk_rows(source, new[at : at + COPY_BATCH])
        with conn.transaction():
            keyword.add_index_rows(conn, [(cid, head, body) for cid, _doc, head, body in rows])
        changed.update(row[1] for row in rows)
    _mirror_documents(source, conn, changed)
    return len(gone), len(new)


def _mirror_documents(source: apsw.Connection, conn: psycopg.Connection, changed: set[int]) -> None:
    """The whole-document rows (``docs_fts.document_rows``) of the ``changed`` documents
    and of those not indexed yet written, those of documents gone removed."""
    held = {r[0] for r in conn.execute("SELECT chunk_id FROM kwdoc_passages")}
    now = {r[0] for r in source.execute("SELECT id FROM documents")}
    changed = changed | (now - held)  # and those never indexed
    rows = [row for row in docs_fts.document_rows(source) if row[0] in changed]
    gone = sorted(held - now)
    with conn.transaction():
        keyword.remove_chunks(conn, gone, keyword.DOCUMENTS)
    for at in range(0, len(rows), COPY_BATCH):
        with conn.transaction():
            keyword.add_index_rows(conn, rows[at : at + COPY_BATCH], keyword.DOCUMENTS)


def write_copy(
    source: apsw.Connection,
    conn: psycopg.Connection,
    rows: Sequence[tuple[int, int, str, str]],
    shift: int,
) -> None:
    """Copy ``shift`` of the library's chunks of these ``(chunk_id, document_id, head,
    body)`` rows (``chunk_rows``): their chunk rows and keyword rows, ids moved by
    ``shift``, in one transaction; the copy's sources, documents and locations first
    when the rows start it (its first chunk)."""
    first = source.execute("SELECT MIN(id) FROM chunks").fetchone()[0]
    with conn.transaction():
        if rows and rows[0][0] == first:
            for table in STORE_TABLES[:-1]:
                copy_rows(source, conn, table, shift=shift)
        copy_rows(source, conn, "chunks", [row[0] for row in rows], shift)
        keyword.add_index_rows(conn, [(cid + shift, head, body) for cid, _doc, head, body in rows])


def scratch_database(server_url: str) -> str:
    """A new database on the server, for a bench's tables of its own; its URL."""
    name = f"kb_keyword_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return psycopg.conninfo.make_conninfo(server_url, dbname=name)


def has_tables(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT to_regclass('kw_passages')").fetchone()[0] is not None


def passages(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT COUNT(*) FROM kw_passages").fetchone()[0]


def table_sizes(conn: psycopg.Connection) -> dict[str, int]:
    """Bytes on disk of each keyword table, its indexes and TOAST included."""
    tables = ("kw_parts", "kw_segment", "kw_recent", "kw_passages")
    return {
        t: conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0] for t in tables
    }
