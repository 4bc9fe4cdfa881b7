"""The keyword index's collection statistics, kept in a table of our own (issue 23).

Trigger: the postings segment (``index/postings.py``) scores FTS5's bm25 itself, and
bm25 needs the collection's passage count and token total (the average passage length).
It read them from FTS5's averages record (``chunks_fts_data``, id 1) with a varint
decoder of its own: a private, undocumented format, which a SQLite upgrade could change
without a word. Outcome: ``kw_totals`` holds the same figures — passages, and tokens per
column — added to and taken from in the transaction that writes or deletes the FTS rows
(``index/fts.py`` calls ``add`` and ``remove``, and nothing else writes them), so the
segment's scores stay FTS5's to the last bit, read through nothing private.

A row's sizes come from FTS5's documented auxiliary-function API (``xColumnSize``,
registered once per connection as ``kb_column_size``): the count FTS5 itself gave each
column of the row, so the totals are FTS5's by construction (``problem`` checks them
against its own for ``kb-mcp doctor``). Removal reads them before the row is deleted; a
row that is not in the index counts nothing, as FTS5 counts it.
The collection's figures are the sums of its rows', which is also how a library from
before this table is filled (``backfill``, one pass over the index).

These figures, with the passage lengths and per-term postings the segment keeps, are
all the keyword leg needs to rank outside FTS5: a second store (issue 24) keeps them the
same way.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence

import apsw

# Rows whose sizes are read in one statement (each id is a bound parameter).
SIZES_BATCH = 500
# The auxiliary function that hands back a row's column size (FTS5's ``xColumnSize``).
SIZE_FUNCTION = "kb_column_size"

# The one that hands back the collection's figures as FTS5 holds them (``xRowCount``,
# ``xColumnTotalSize``), for ``problem`` alone: the segment never reads them from FTS5.
TOTALS_FUNCTION = "kb_fts5_totals"

_registered: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()


def _with_functions(conn: apsw.Connection) -> apsw.Connection:
    """``conn`` with both functions registered (once: FTS5 keeps every registration)."""
    if conn not in _registered:
        conn.register_fts5_function(SIZE_FUNCTION, _column_size)
        conn.register_fts5_function(TOTALS_FUNCTION, _fts5_totals)
        _registered.add(conn)
    return conn


def _column_size(api: apsw.FTS5ExtensionApi, column: int) -> int:
    return api.column_size(column)


def _fts5_totals(api: apsw.FTS5ExtensionApi) -> str:
    return f"{api.row_count} {api.column_total_size(0)} {api.column_total_size(1)}"


def _exists(conn: apsw.Connection) -> bool:
    """Whether the table is there: a migration older than it writes FTS rows too, and the
    migration that makes it fills it from what they left."""
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kw_totals'"
        ).fetchone()
        is not None
    )


def _sizes(conn: apsw.Connection, chunk_ids: Sequence[int]) -> tuple[int, int, int]:
    """``(rows, head tokens, body tokens)`` of those of ``chunk_ids`` the index holds."""
    _with_functions(conn)
    rows = head = body = 0
    for at in range(0, len(chunk_ids), SIZES_BATCH):
        part = chunk_ids[at : at + SIZES_BATCH]
        marks = ",".join("?" * len(part))
        for h, b in conn.execute(
            f"SELECT {SIZE_FUNCTION}(chunks_fts, 0), {SIZE_FUNCTION}(chunks_fts, 1) "
            f"FROM chunks_fts WHERE rowid IN ({marks})",
            part,
        ):
            rows += 1
            head += h
            body += b
    return rows, head, body


def _shift(conn: apsw.Connection, sign: int, sizes: tuple[int, int, int]) -> None:
    rows, head, body = sizes
    if rows:
        conn.execute(
            "UPDATE kw_totals SET passages = passages + ?, head_tokens = head_tokens + ?, "
            "body_tokens = body_tokens + ?",
            (sign * rows, sign * head, sign * body),
        )


def add(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    """Count rows just inserted into the index. Call inside the ``db.write()`` that
    inserted them, after the insert."""
    if _exists(conn):
        _shift(conn, +1, _sizes(conn, list(chunk_ids)))


def remove(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    """Uncount rows about to leave the index. Call inside the ``db.write()`` that deletes
    them, before the delete."""
    if _exists(conn):
        _shift(conn, -1, _sizes(conn, list(chunk_ids)))


def reset(conn: apsw.Connection) -> None:
    """Zero the totals: the index is being made again from nothing (``fts.rebuild``)."""
    if _exists(conn):
        conn.execute("UPDATE kw_totals SET passages = 0, head_tokens = 0, body_tokens = 0")


def read(conn: apsw.Connection) -> tuple[int, int]:
    """``(passages, tokens)``: what bm25 reads as the row count and, over the passages,
    the average length (every column's tokens)."""
    row = conn.execute(
        "SELECT passages, head_tokens + body_tokens FROM kw_totals WHERE id = 1"
    ).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def _all_sizes(conn: apsw.Connection) -> Iterator[tuple[int, int]]:
    """Every indexed row's ``(head, body)`` token counts, in rowid order."""
    _with_functions(conn)
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts'"
    ).fetchone()
    if exists is not None:
        yield from conn.execute(
            f"SELECT {SIZE_FUNCTION}(chunks_fts, 0), {SIZE_FUNCTION}(chunks_fts, 1) FROM chunks_fts"
        )


def backfill(conn: apsw.Connection) -> tuple[int, int, int]:
    """Set the totals from the rows the index holds (a library from before the table):
    one pass over FTS5's per-row sizes; ``(passages, head tokens, body tokens)``.
    Inside the transaction that made the table."""
    rows = head = body = 0
    for h, b in _all_sizes(conn):
        rows += 1
        head += h
        body += b
    conn.execute(
        "INSERT OR REPLACE INTO kw_totals(id, passages, head_tokens, body_tokens) "
        "VALUES (1, ?, ?, ?)",
        (rows, head, body),
    )
    return rows, head, body


def problem(conn: apsw.Connection) -> str | None:
    """How the stored totals differ from FTS5's own figures (its documented
    ``xRowCount`` and ``xColumnTotalSize``), or None when they agree: ``kb-mcp doctor``'s
    check that the segment scores with the figures FTS5's bm25 would."""
    _with_functions(conn)
    row = conn.execute(f"SELECT {TOTALS_FUNCTION}(chunks_fts) FROM chunks_fts LIMIT 1").fetchone()
    own = tuple(int(n) for n in row[0].split()) if row else (0, 0, 0)
    stored = conn.execute("SELECT passages, head_tokens, body_tokens FROM kw_totals").fetchone()
    if stored is not None and tuple(stored) == own:
        return None
    return f"keyword statistics {stored} differ from the index's {own}"
