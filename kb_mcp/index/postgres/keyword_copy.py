"""A SQLite library's keyword rows copied into the PostgreSQL keyword index.

For the comparison bench (``bench/keyword_pg.py``) and the tests that hold the two
stores' rankings side by side, until the store's own copy (issue 24's ``migrate --to``)
exists: the chunk ids and document ids as the library has them, and the keyword rows
``columns.index_row`` makes of each chunk, written through the index's own writer.
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

COPY_BATCH = 500
# Until the store's schema creates them (issue 24's schema part), the tables the keyword
# index reads beside its own: chunks (document ids) and locations (a source's documents).
STAND_INS = (
    "CREATE TABLE IF NOT EXISTS chunks (id bigint PRIMARY KEY, document_id bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS locations (source_id bigint NOT NULL, document_id bigint)",
)


def create_tables(conn: psycopg.Connection) -> None:
    """The keyword index's tables (its ``MIGRATIONS``) and the stand-ins it reads."""
    for sql in STAND_INS:
        conn.execute(sql)
    for _name, sql in keyword.MIGRATIONS:  # the passages' and the documents' tables
        conn.execute(sql)


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
    """Make the PostgreSQL index hold what the SQLite library holds now: its chunks
    removed since are removed, its new ones added (in batches of one transaction each),
    and the documents they belong to indexed again as wholes; ``(removed, added)``."""
    held = {r[0] for r in conn.execute("SELECT chunk_id FROM kw_passages")}
    now = {r[0] for r in source.execute("SELECT id FROM chunks")}
    gone, new = sorted(held - now), sorted(now - held)
    changed = {
        r[0] for r in conn.execute("SELECT document_id FROM chunks WHERE id = ANY(%s)", (gone,))
    }
    with conn.transaction():
        keyword.remove_chunks(conn, gone)
        conn.execute("DELETE FROM chunks WHERE id = ANY(%s)", (gone,))
    for at in range(0, len(new), COPY_BATCH):
        rows = chunk_rows(source, new[at : at + COPY_BATCH])
        write(conn, rows)
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


def write(conn: psycopg.Connection, rows: Sequence[tuple[int, int, str, str]]) -> None:
    """``(chunk_id, document_id, head, body)`` rows: the chunk stand-ins and the keyword
    rows, in one transaction."""
    with conn.transaction():
        with conn.cursor().copy("COPY chunks(id, document_id) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row[:2])
        keyword.add_index_rows(conn, [(cid, head, body) for cid, _doc, head, body in rows])


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
