"""The FTS5 keyword index over whole documents (``docs_fts``), beside the passages' one.

Trigger (issue 21): the keyword leg ranks passages and keeps each document's best, so a
document whose question words are spread over several passages ranks by the one passage
holding the most of them. On independent held-out sets one plain FTS5 row per file beat
it: multi-hop questions with every needed document in the top results 0.50 against
0.17, paraphrase questions over real files MRR 0.78 against 0.49. Whole-document term
statistics carry a signal that the best single passage loses.

Outcome: one row per document, rowid = ``documents.id``. ``head`` is the title (and a
code file's language, as a passage's head has it); ``body`` the document's passages'
index copies joined, the very text ``chunks_fts`` holds (``columns.index_row``), so one
MATCH expression addresses both tables alike (CJK boundaries, camelCase parts). A
passage opens with its heading, so headings are in the body. Contentless with
``contentless_delete=1``, as ``chunks_fts`` (``index/fts.py`` says why).

The rows are written, replaced and deleted in the transactions that write the
document's passages (``ingest/pipeline.py``); ``fts.rebuild`` rebuilds both tables,
and migration 12 fills this one in a library built before it (``fill``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

import apsw

from kb_mcp.index.textprep import FTS_TOKENIZER, index_copy

TABLE = "docs_fts"
# A document's body holds at most this many characters of its passages' index copies:
# a large file (``ingest/large.py``, up to hundreds of MB) is never one string, and its
# whole-document row would be. bm25's length normalisation ranks a body this long below
# any shorter match anyway; the passages' table still holds every word of it.
BODY_CHARS = 4 * 1024 * 1024
FILL_BATCH = 1_000  # documents per statement batch when filling from the chunk rows


def create_table(conn: apsw.Connection) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE {TABLE} USING fts5(head, body, content='', "
        f"contentless_delete=1, tokenize='{FTS_TOKENIZER}')"
    )


def exists(conn: apsw.Connection) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
    )


class DocumentBody:
    """A document's ``body``, gathered from its passages' index copies as they are made
    (a large file's slice by slice), up to ``BODY_CHARS``."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._size = 0

    @property
    def full(self) -> bool:
        return self._size >= BODY_CHARS

    def add(self, bodies: Iterable[str]) -> None:
        for body in bodies:
            if self.full:
                return
            self._parts.append(body)
            self._size += len(body) + 1

    def text(self) -> str:
        return "\n".join(self._parts)


def head_copy(title: str, language: str | None) -> str:
    """The ``head`` a document is indexed with: the index copy of its title, and of its
    language for code (a passage's head without its headings: ``columns.head_text``)."""
    return index_copy(f"{title} / {language}" if language else title)


def add_documents(conn: apsw.Connection, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index ``(document_id, head, body)`` rows. Call inside ``db.write()``."""
    conn.executemany(f"INSERT INTO {TABLE}(rowid, head, body) VALUES (?, ?, ?)", rows)


def remove_documents(conn: apsw.Connection, document_ids: Iterable[int]) -> None:
    """Drop documents from the index. Call inside ``db.write()``; a document that has no
    row (never indexed) is no error."""
    conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", ((i,) for i in document_ids))


def fill(conn: apsw.Connection) -> int:
    """Index every document from its chunk rows (the table is empty); documents indexed.

    One pass over the chunks in document order, ``FILL_BATCH`` documents a statement
    batch, so memory holds a batch, never the library. Call inside ``db.write()``.
    """
    rows = _rows_from_chunks(conn)
    count = 0
    while batch := list(islice(rows, FILL_BATCH)):
        add_documents(conn, batch)
        count += len(batch)
    return count


def document_rows(conn: apsw.Connection) -> Iterator[tuple[int, str, str]]:
    """``(document_id, head, body)`` of every document, as ``fill`` indexes them (another
    store's keyword index takes the same rows)."""
    return _rows_from_chunks(conn)


def _rows_from_chunks(conn: apsw.Connection) -> Iterator[tuple[int, str, str]]:
    """``(document_id, head, body)`` of every document, from its chunk rows (a document
    without any, an empty text, is indexed by its title, as ingestion does)."""
    cursor = conn.execute(
        "SELECT d.id, d.title, CASE WHEN d.kind = 'code' THEN d.language END, c.text "
        "FROM documents d LEFT JOIN chunks c ON c.document_id = d.id ORDER BY d.id, c.ordinal"
    )
    current: tuple[int, str, str | None] | None = None
    body = DocumentBody()
    for document_id, title, language, text in cursor:
        if current is not None and current[0] != document_id:
            yield current[0], head_copy(current[1], current[2]), body.text()
            body = DocumentBody()
        current = (document_id, title, language)
        if text is not None and not body.full:
            body.add([index_copy(text)])
    if current is not None:
        yield current[0], head_copy(current[1], current[2]), body.text()


def optimize(conn: apsw.Connection) -> None:
    """Merge the index into one segment (``fts.optimize`` says when and why)."""
    if exists(conn):
        conn.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('optimize')")


def integrity_check(conn: apsw.Connection) -> None:
    """FTS5's own consistency check; raises ``apsw.Error`` when it fails."""
    if exists(conn):
        conn.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('integrity-check')")


def best_documents(
    conn: apsw.Connection,
    expression: str,
    documents: int,
    head_weight: float,
    body_weight: float,
    source_id: int | None = None,
) -> list[tuple[int, float]]:
    """``(document_id, -bm25)`` of the best ``documents`` documents for ``expression``,
    best first (ties by id, scores compared at 9 decimals as the passages' ranking does);
    with ``source_id``, only documents that source holds.

    The source is checked per match (``EXISTS``): as ``rowid IN (SELECT ...)`` SQLite
    hands FTS5 one rowid at a time and the MATCH runs once per document of the source.
    On a synthetic 10k-document index, a source of 5k: 2.3 ms a query against 1.6 s."""
    scope, params = "", [head_weight, body_weight, expression]
    if source_id is not None:
        scope = (
            " AND EXISTS (SELECT 1 FROM locations l WHERE l.document_id = f.rowid"
            " AND l.source_id = ?)"
        )
        params.append(source_id)
    rows = conn.execute(
        f"SELECT f.rowid, bm25({TABLE}, ?, ?) AS r FROM {TABLE} f WHERE {TABLE} MATCH ?{scope} "
        "ORDER BY round(r, 9), f.rowid LIMIT ?",
        (*params, documents),
    ).fetchall()
    return [(document_id, -r) for document_id, r in rows]


def best_passages(
    conn: apsw.Connection,
    expression: str,
    document_ids: Sequence[int],
    head_weight: float,
    body_weight: float,
) -> dict[int, int]:
    """Document id → its best-bm25 passage for ``expression`` (lowest chunk id on a tie),
    for those of ``document_ids`` with a matching passage: one query for all of them, the
    document filter inside it, so bm25 is computed only for their passages.

    The MATCH leads and each match is looked up in ``chunks``: on a synthetic index of
    100k passages in 10k documents, 16 ms a query (ranking the full OR: 39 ms). Written
    as ``rowid IN (SELECT id FROM chunks WHERE document_id IN ...)`` the MATCH ran once
    per rowid: 1.5 s."""
    if not document_ids:
        return {}
    marks = ",".join("?" * len(document_ids))
    rows = conn.execute(
        "SELECT c.document_id, f.rowid, bm25(chunks_fts, ?, ?) AS r FROM chunks_fts f "
        f"JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ? AND c.document_id IN ({marks}) "
        "ORDER BY round(r, 9), f.rowid",
        (head_weight, body_weight, expression, *document_ids),
    ).fetchall()
    best: dict[int, int] = {}
    for document_id, chunk_id, _r in rows:
        best.setdefault(document_id, chunk_id)
    return best
