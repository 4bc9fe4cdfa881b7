"""The PostgreSQL store's keyword index: FTS5's bm25 over postings held in tables (issue 24).

PostgreSQL's own ranking was measured and rejected (``ts_rank`` over an OR: 440–500 ms
p50 at 100k passages, SciFact nDCG@10 0.58 against 0.687) and no BM25 extension is
installable, so PostgreSQL holds the postings and the collection statistics and the
server scores them itself, with the SQLite store's formula and terms (``index/bm25.py``,
``index/postgres/tokens.py``): the same scores, the same top 10.

**Layout: an LSM of packed parts and a row delta, chosen on evidence.** A question's
common word is the hard case: its list is read whole for every question naming it. At
100k passages (a 3M-row postings table, ``/tmp`` micro-bench, median of 7), reading a
50,000-posting list took 31–54 ms as one row per (term, passage) under a b-tree
(``array_agg``, binary or text fetch) and 2.2 ms as packed ``bytea`` parts of 10,000
passages (the SQLite segment's format); 10,000 postings: 7–11 ms against 0.7 ms. At 1M
passages a common word holds ten times as many, so rows cannot meet a 50 ms p95 and
packed parts can. Loading rows ran at about 75k a second: a passage's ~100 terms cost a
write of 100 rows, fine for what an agent or a sync writes, not for a whole library.
So, as in the SQLite store (``index/postings.py``):

- ``kw_parts(gen, term, part, ids, head, body)``: a *generation* (segment) of packed
  lists, ``ids`` positions into the generation's passage arrays (uint32, ascending),
  ``head`` / ``body`` the term's count per column (uint16), one row per
  ``PART_PASSAGES``. Written only by a merge (``keyword_merge.py``), never changed after.
- ``kw_segment``: the live generation and its passage arrays (chunk ids ascending,
  document ids, token counts, and each passage's ``seq``, the version it was read at).
- ``kw_recent(term, chunk_id, head, body)``: the delta, one row per (term, passage) for
  passages written since the last merge: what every writer writes, in its own
  transaction, so an add is searchable the moment it commits, from any server.
- ``kw_passages(chunk_id, document_id, head_tokens, body_tokens, seq, merged)``: every
  indexed passage: its sizes (bm25's passage length), a fresh ``seq`` per write, and
  whether a generation holds it (``merged``; the delta's rows are read only while not).
- ``kw_dead(chunk_id, dseq)``: tombstones: a removed (or rewritten) passage's id with a
  fresh ``dseq``; a segment passage whose id is here is skipped.
- ``kw_totals(slot, passages, head_tokens, body_tokens)``: the collection statistics,
  summed over 16 slots. Many writers: one counter row would make every writing
  transaction of every server queue on its row lock until the one before commits; a
  writer adds to the slot of its backend (``pg_backend_pid() % 16``), so writers rarely
  meet, and a reader sums 16 rows.

Writers never lock anything but their own rows: ``add_index_rows`` and ``remove_chunks``
keep passages, delta, tombstones and totals in the caller's transaction. A merge builds
the next generation from one snapshot and switches to it in a short transaction whose
statements check each passage's identity (``seq`` / ``dseq``), so a write that lands
meanwhile is neither lost nor shown twice (``keyword_merge.py`` says how). Chunk ids are
identity values, never reused, which is what lets a tombstone name a passage by its id.

A reader (``keyword_reader.py``) reads the live generation, the tombstones, the totals
and its terms' lists and delta rows in one statement, so a merge landing mid-search
cannot mix generations. The whole documents' index (``docs_fts`` in the SQLite store)
is the same tables under the prefix ``kwdoc_`` (``KeywordTables``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg

from kb_mcp.index.postgres import tokens

# Slots of the collection statistics (see the docstring: writers spread over them).
TOTALS_SLOTS = 16


@dataclass(frozen=True, slots=True)
class KeywordTables:
    """One keyword index's tables: the passages' (``kw_*``), or the whole documents'
    (``kwdoc_*``, the SQLite store's ``docs_fts``: ``index/docs_fts.py``), the same
    layout under another prefix. In the documents' tables an entry's ``chunk_id`` is
    its document id, and each document is its own group."""

    prefix: str
    lock_id: int  # a merge's advisory lock, with ``keyword_merge.MERGE_LOCK``
    groups: str | None  # SQL: (entry id, document id) of entries ``= ANY(%s)``; None: itself

    def sql(self, text: str) -> str:
        """``text`` (written for the passages' tables) for these tables."""
        return text if self.prefix == "kw" else text.replace("kw_", f"{self.prefix}_")


PASSAGES = KeywordTables("kw", 1, "SELECT id, document_id FROM chunks WHERE id = ANY(%s)")
DOCUMENTS = KeywordTables("kwdoc", 2, None)

_TABLES = """CREATE SEQUENCE kw_seq;
CREATE TABLE kw_passages (
    chunk_id    bigint PRIMARY KEY,
    document_id bigint NOT NULL,
    head_tokens integer NOT NULL,
    body_tokens integer NOT NULL,
    seq         bigint NOT NULL,
    merged      boolean NOT NULL DEFAULT false
);
CREATE INDEX kw_passages_recent ON kw_passages (chunk_id) WHERE NOT merged;
CREATE TABLE kw_recent (
    term     text COLLATE "C" NOT NULL,
    chunk_id bigint NOT NULL,
    head     integer NOT NULL,
    body     integer NOT NULL,
    PRIMARY KEY (term, chunk_id)
);
CREATE INDEX kw_recent_chunk ON kw_recent (chunk_id);
CREATE TABLE kw_dead (
    chunk_id bigint PRIMARY KEY,
    dseq     bigint NOT NULL
);
CREATE TABLE kw_totals (
    slot        smallint PRIMARY KEY,
    passages    bigint NOT NULL,
    head_tokens bigint NOT NULL,
    body_tokens bigint NOT NULL
);
CREATE TABLE kw_segment (
    id         smallint PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL,
    chunk_ids  bytea NOT NULL,
    doc_ids    bytea NOT NULL,
    lengths    bytea NOT NULL,
    seqs       bytea NOT NULL
);
CREATE TABLE kw_parts (
    gen  bigint NOT NULL,
    term text COLLATE "C" NOT NULL,
    part integer NOT NULL,
    ids  bytea NOT NULL,
    head bytea NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (gen, term, part)
);
-- Packed arrays are read whole and barely compress: stored uncompressed, a read is a copy.
ALTER TABLE kw_parts ALTER COLUMN ids SET STORAGE EXTERNAL,
    ALTER COLUMN head SET STORAGE EXTERNAL, ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE kw_segment ALTER COLUMN chunk_ids SET STORAGE EXTERNAL,
    ALTER COLUMN doc_ids SET STORAGE EXTERNAL, ALTER COLUMN lengths SET STORAGE EXTERNAL,
    ALTER COLUMN seqs SET STORAGE EXTERNAL;
"""

MIGRATIONS: list[tuple[str, str]] = [
    ("keyword index: passages, packed postings and a row delta, statistics", _TABLES),
    ("keyword index of whole documents, the same tables", DOCUMENTS.sql(_TABLES)),
]


def add_index_rows(
    conn: psycopg.Connection,
    rows: Iterable[tuple[int, str, str]],
    tables: KeywordTables = PASSAGES,
) -> None:
    """Index ``(chunk_id, head, body)`` rows made by ``columns.index_row`` (the rows
    ``index/fts.add_index_rows`` takes), inside the caller's transaction, after the chunk
    rows are written (their document ids are read from ``chunks``). A chunk already
    indexed is replaced."""
    rows = list(rows)
    if not rows:
        return
    chunk_ids = [row[0] for row in rows]
    remove_chunks(conn, chunk_ids, tables)
    if tables.groups is None:
        documents = {cid: cid for cid in chunk_ids}
    else:
        documents = dict(conn.execute(tables.groups, (chunk_ids,)).fetchall())
    missing = [cid for cid in chunk_ids if cid not in documents]
    if missing:
        raise ValueError(f"keyword rows for chunks that do not exist: {missing[:5]}")  # a bug
    passages = [tokens.passage(head, body) for _cid, head, body in rows]
    conn.execute(
        tables.sql(
            "INSERT INTO kw_passages(chunk_id, document_id, head_tokens, body_tokens, seq) "
            "SELECT c, d, h, b, nextval('kw_seq') FROM unnest(%s::bigint[], %s::bigint[], "
            "%s::int[], %s::int[]) AS r(c, d, h, b)"
        ),
        (
            chunk_ids,
            [documents[cid] for cid in chunk_ids],
            [p.head_tokens for p in passages],
            [p.body_tokens for p in passages],
        ),
    )
    with conn.cursor().copy(
        tables.sql("COPY kw_recent(term, chunk_id, head, body) FROM STDIN")
    ) as copy:
        copy.write("".join(_delta_lines(chunk_ids, passages)))
    _shift_totals(
        conn,
        tables,
        len(passages),
        sum(p.head_tokens for p in passages),
        sum(p.body_tokens for p in passages),
    )


# COPY's text format: a backslash, tab or line break inside a value is written escaped.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _delta_lines(
    chunk_ids: Sequence[int], passages: Sequence[tokens.PassageTerms]
) -> Iterable[str]:
    """The delta's rows as COPY text, one line per (term, passage): written as one
    string, not a row at a time (``write_row`` was 40% of an add's CPU)."""
    for cid, p in zip(chunk_ids, passages, strict=True):
        head, body = p.head, p.body
        for term in head.keys() | body.keys():
            text = term if term.isalnum() else term.translate(_COPY_ESCAPES)
            yield f"{text}\t{cid}\t{head.get(term, 0)}\t{body.get(term, 0)}\n"


def remove_chunks(
    conn: psycopg.Connection, chunk_ids: Sequence[int], tables: KeywordTables = PASSAGES
) -> None:
    """Drop chunks from the index (those it does not hold count nothing), inside the
    caller's transaction. A tombstone hides a merged copy from readers until the next
    merge leaves it out."""
    removed = conn.execute(
        tables.sql(
            "DELETE FROM kw_passages WHERE chunk_id = ANY(%s) "
            "RETURNING chunk_id, head_tokens, body_tokens"
        ),
        (list(chunk_ids),),
    ).fetchall()
    if not removed:
        return
    ids = [row[0] for row in removed]
    conn.execute(tables.sql("DELETE FROM kw_recent WHERE chunk_id = ANY(%s)"), (ids,))
    conn.execute(
        tables.sql(
            "INSERT INTO kw_dead(chunk_id, dseq) "
            "SELECT c, nextval('kw_seq') FROM unnest(%s::bigint[]) AS c "
            "ON CONFLICT (chunk_id) DO UPDATE SET dseq = excluded.dseq"
        ),
        (ids,),
    )
    _shift_totals(
        conn,
        tables,
        -len(removed),
        -sum(row[1] for row in removed),
        -sum(row[2] for row in removed),
    )


def _shift_totals(
    conn: psycopg.Connection, tables: KeywordTables, passages: int, head: int, body: int
) -> None:
    """Add to this backend's slot of the statistics (``TOTALS_SLOTS``)."""
    conn.execute(
        tables.sql(
            "INSERT INTO kw_totals(slot, passages, head_tokens, body_tokens) "
            f"VALUES (pg_backend_pid() %% {TOTALS_SLOTS}, %s, %s, %s) "
            "ON CONFLICT (slot) DO UPDATE SET passages = kw_totals.passages + excluded.passages, "
            "head_tokens = kw_totals.head_tokens + excluded.head_tokens, "
            "body_tokens = kw_totals.body_tokens + excluded.body_tokens"
        ),
        (passages, head, body),
    )


def read_totals(conn: psycopg.Connection, tables: KeywordTables = PASSAGES) -> tuple[int, int, int]:
    """``(passages, head tokens, body tokens)``: bm25's row count and, over the passages,
    its average length."""
    row = conn.execute(
        tables.sql(
            "SELECT COALESCE(SUM(passages), 0), COALESCE(SUM(head_tokens), 0), "
            "COALESCE(SUM(body_tokens), 0) FROM kw_totals"
        )
    ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def totals_problem(conn: psycopg.Connection, tables: KeywordTables = PASSAGES) -> str | None:
    """How the kept statistics differ from the sums over the passages, or None (doctor)."""
    kept = read_totals(conn, tables)
    row = conn.execute(
        tables.sql(
            "SELECT COUNT(*), COALESCE(SUM(head_tokens), 0), COALESCE(SUM(body_tokens), 0) "
            "FROM kw_passages"
        )
    ).fetchone()
    counted = (int(row[0]), int(row[1]), int(row[2]))
    return None if kept == counted else f"keyword statistics {kept} differ from {counted}"


def reset(conn: psycopg.Connection, tables: KeywordTables = PASSAGES) -> None:
    """Empty the index (it is being made again from the chunk rows), inside a write."""
    conn.execute(
        tables.sql("TRUNCATE kw_passages, kw_recent, kw_dead, kw_totals, kw_segment, kw_parts")
    )
