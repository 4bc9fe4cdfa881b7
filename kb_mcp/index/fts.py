"""The FTS5 keyword index over chunks, and its lazy migration.

The table is contentless (``content=''``) with ``contentless_delete=1``: what FTS5
indexes is the *index copy* of a chunk (``textprep.index_copy``), which differs from the
stored text, so an external-content table pointing at ``chunks.text`` would hand FTS5
the wrong tokens on delete. The rowid is ``chunks.id``; chunk rows stay the truth.

Columns: ``head`` (document title + heading path, weighted up) and ``body``
(``index/columns.py``). Its collection statistics are kept beside it in a table of our
own (``index/keyword_totals.py``), counted in the transaction that writes the rows.

Beside it, ``docs_fts`` indexes whole documents in the same representation
(``index/docs_fts.py``, issue 21); the rebuild below makes both.

Representation changes (``TEXTPREP_VERSION``, tokenizer, ``FTS_LAYOUT``) are recorded in
``meta.fts_version``. A database written by an older representation is rebuilt by the
first reader: one ``BEGIN IMMEDIATE`` transaction drops the old table, re-inserts every
chunk in batches (bounded memory) and records the new version in the same commit. An
interrupted rebuild rolls back whole: the old index and its version stay as they were,
and the next reader tries again. Nothing is rebuilt before it is needed (start-up and
the MCP handshake never wait for it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import apsw

from kb_mcp.index import bm25, docs_fts, keyword_totals, postings
from kb_mcp.index.columns import BODY_WEIGHT, HEAD_WEIGHT, index_row
from kb_mcp.index.textprep import FTS_TOKENIZER, TEXTPREP_VERSION, index_copy
from kb_mcp.store.db import Database

T = TypeVar("T")

# The layout of the index tables themselves; 2 added the fts5vocab table.
FTS_LAYOUT = 2
FTS_VERSION = f"{TEXTPREP_VERSION}|{FTS_TOKENIZER}|layout {FTS_LAYOUT}"
REBUILD_BATCH = 1_000
# Passages read per document wanted, in the first round of ``best_per_document``. SciFact
# and the golden set hold 1.2 passages per document; 4 covers them in one round, and a
# library of long documents goes deeper (×4 a round) only when it must.
PASSAGES_PER_DOCUMENT = 4


def _create_table(conn: apsw.Connection) -> None:
    conn.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(head, body, content='', "
        f"contentless_delete=1, tokenize='{FTS_TOKENIZER}')"
    )
    # Per-term document frequencies, read by the ranking features.
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab(chunks_fts, 'row')"
    )


def add_chunks(
    conn: apsw.Connection, rows: Iterable[tuple[int, str, Sequence[str], str, str | None]]
) -> None:
    """Index ``(chunk_id, title, heading_path, text, code_language)`` rows.

    Call inside ``db.write()``; ``code_language`` is None for anything but code.
    """
    add_index_rows(
        conn,
        (
            (cid, *index_row(title, path, text, language))
            for cid, title, path, text, language in rows
        ),
    )


def add_index_rows(conn: apsw.Connection, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index ``(chunk_id, head, body)`` rows made by ``index_row``. Call inside ``db.write()``.

    The collection statistics count them (``index/keyword_totals.py``) and the postings
    segment hears of them (``index/postings.py``: they are its delta)."""
    rows = list(rows)
    conn.executemany("INSERT INTO chunks_fts(rowid, head, body) VALUES (?, ?, ?)", rows)
    chunk_ids = [row[0] for row in rows]
    keyword_totals.add(conn, chunk_ids)
    postings.note_changed(conn, chunk_ids)


def remove_chunks(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    """Drop chunks from the index. Call inside ``db.write()``, before deleting the rows."""
    chunk_ids = list(chunk_ids)
    keyword_totals.remove(conn, chunk_ids)
    conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ((cid,) for cid in chunk_ids))
    postings.note_changed(conn, chunk_ids)


def optimize(conn: apsw.Connection) -> None:
    """Merge the index into one segment. Call inside ``db.write()``.

    A contentless-delete table hides a deleted row's terms from the vocabulary at once
    but keeps them in its segments until they merge; after removing text that must not
    stay (a secret a newer rule caught) this drops them from the file too. About 0.3 s on
    17,000 chunks. Nothing to do before the first rebuild has created the table.
    """
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts'"
    ).fetchone()
    if exists:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
    docs_fts.optimize(conn)


def stored_version(conn: apsw.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'fts_version'").fetchone()
    return row[0] if row else None


def _all_chunk_rows(
    conn: apsw.Connection,
) -> Iterable[tuple[int, str, list[str], str, str | None]]:
    cursor = conn.execute(
        "SELECT c.id, d.title, c.heading_path, c.text, "
        "CASE WHEN d.kind = 'code' THEN d.language END FROM chunks c "
        "JOIN documents d ON d.id = c.document_id ORDER BY c.id"
    )
    for cid, title, path_json, text, language in cursor:
        yield cid, title, json.loads(path_json), text, language


def rebuild(db: Database) -> int:
    """Drop and refill the index from the chunk rows in one transaction, the documents'
    table (``index/docs_fts.py``) with it; return chunk count."""
    count = 0
    with db.write() as conn:
        conn.execute("DROP TABLE IF EXISTS chunks_fts_vocab")
        conn.execute("DROP TABLE IF EXISTS chunks_fts")
        conn.execute(f"DROP TABLE IF EXISTS {docs_fts.TABLE}")
        postings.forget(conn)
        keyword_totals.reset(conn)
        _create_table(conn)
        batch: list[tuple[int, str, list[str], str, str | None]] = []
        for row in _all_chunk_rows(db.conn):
            batch.append(row)
            if len(batch) >= REBUILD_BATCH:
                add_chunks(conn, batch)
                count += len(batch)
                batch.clear()
        add_chunks(conn, batch)
        count += len(batch)
        docs_fts.create_table(conn)
        docs_fts.fill(conn)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_version', ?)", (FTS_VERSION,)
        )
    return count


class FtsIndex:
    """Keeps one library's index current; readers call ``ensure_current()`` first."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._local = threading.local()  # tokenizers belong to a connection, so per thread
        self._current = False
        self.postings = postings.Postings(db)

    def ensure_current(self) -> bool:
        """Rebuild the index if it was written by another representation; True if it did.

        Lock-guarded so concurrent first readers wait for one rebuild instead of each
        starting their own; after that it is one boolean check.
        """
        if self._current:
            return False
        with self._lock:
            if self._current:
                return False
            rebuilt = False
            if stored_version(self.db.conn) != FTS_VERSION:
                rebuild(self.db)
                rebuilt = True
            self._current = True
            return rebuilt

    def _tokenizer(self) -> apsw.FTS5Tokenizer:
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            name, *args = FTS_TOKENIZER.split()
            tokenizer = self._local.tokenizer = self.db.conn.fts5_tokenizer(name, args)
        return tokenizer

    def integrity_problem(self) -> str | None:
        """FTS5's own consistency check of the index (passages and documents) and of
        its collection statistics (``index/keyword_totals.py``), or None when both pass."""
        try:
            self.db.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
            docs_fts.integrity_check(self.db.conn)
            wrong = keyword_totals.problem(self.db.conn)
        except apsw.Error as exc:
            wrong = f"damaged ({exc})"
        return None if wrong is None else f"keyword index {wrong}; run `kb-mcp reindex --rebuild`"

    def invalidate(self) -> None:
        """Forget the stored version (call inside ``db.write()``): the next reader rebuilds."""
        self.db.conn.execute("DELETE FROM meta WHERE key = 'fts_version'")
        self._current = False

    def tokens(self, text: str) -> list[str]:
        """The terms FTS5 stores for ``text``: index copy, then the table's own tokenizer."""
        tokenizer = self._tokenizer()
        return tokenizer(
            index_copy(text).encode("utf-8"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )

    def query_tokens(self, unit: str) -> list[str]:
        """The tokens FTS5 makes of ``unit`` quoted in a MATCH (no index copy: a query
        phrase has had it already); one token means its df is a vocabulary row."""
        return self._tokenizer()(
            unit.encode("utf-8"),
            apsw.FTS5_TOKENIZE_QUERY,
            None,
            include_offsets=False,
            include_colocated=False,
        )

    def _stats(self) -> _StatsCache:
        """This thread's statistics cache, emptied whenever the database may have changed.

        Trigger: every search counted ``chunks`` (a full scan: ~2 ms at 100k chunks) and
        read each term's df from the vocabulary table, which walks the term's whole
        doclist, so a common word cost its postings twice per search. Outcome: both are
        kept until the data changes. ``PRAGMA data_version`` moves when another
        connection commits, ``total_changes`` when this one writes; both are per
        connection, and so is this cache. The pragma, not ``Connection.data_version()``:
        the file-control value is only refreshed when a read transaction starts, and a
        search answered from this cache starts none, so a commit by the server's sync
        thread stayed invisible to every later search on this thread.
        """
        conn = self.db.conn
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        stamp = (id(conn), version, conn.total_changes())
        cache = getattr(self._local, "stats", None)
        if cache is None or cache.stamp != stamp:
            cache = self._local.stats = _StatsCache(stamp)
        return cache

    def per_version(self, name: str, build: Callable[[], T]) -> T:
        """``build()``, kept under ``name`` until the database changes (the statistics
        cache's stamp): for what the search derives from the data and would otherwise
        read again per search (``search/rank.py``)."""
        derived = self._stats().derived
        if name not in derived:
            derived[name] = build()
        return derived[name]  # type: ignore[return-value]

    def refresh_segment(
        self, min_chunks: int | None = None, delta_min: int = postings.DELTA_MIN
    ) -> int | None:
        """Build the postings segment when it is due (``postings.refresh_due``); the
        passages it holds, or None when none was built. A write: call after a sync."""
        self.ensure_current()
        return postings.refresh(self.db, min_chunks, delta_min)

    def segment_best_per_document(
        self, units: Sequence[str], documents: int
    ) -> list[tuple[int, float]] | None:
        """``best_per_document`` of the OR of ``units`` from the postings segment, or None
        when there is none or a unit is a phrase it does not key (``postings``)."""
        keys = self._segment_keys(units)
        if keys is None:
            return None
        return self.postings.best_per_document(
            self._stats().stamp, self._tokenizer(), keys, documents
        )

    def segment_best_passages(
        self, units: Sequence[str], document_ids: Sequence[int]
    ) -> dict[int, int] | None:
        """``best_passage_of`` the OR of ``units`` from the postings segment, or None when
        there is none or a unit is a phrase it does not key (``postings``)."""
        keys = self._segment_keys(units)
        if keys is None:
            return None
        return self.postings.best_passages(
            self._stats().stamp, self._tokenizer(), keys, document_ids
        )

    def _segment_keys(self, units: Sequence[str]) -> list[str] | None:
        """The postings keys of ``units``, or None when one is a phrase the segment does
        not key."""
        keys = []
        for unit in units:
            key = bm25.segment_key(self.query_tokens(unit))
            if key is None:
                return None
            keys.append(key)
        return keys

    def doc_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many chunks hold each term (terms absent from the index are absent here).

        From the postings segment when there is one (FTS5's vocabulary walks a term's
        whole doclist to count it)."""
        cache = self._stats()
        found = self.postings.doc_frequencies(cache.stamp, self._tokenizer(), terms)
        if found is not None:
            return found
        unique = sorted(set(terms))
        missing = [t for t in unique if t not in cache.df]
        if missing:
            marks = ",".join("?" * len(missing))
            found = dict(
                self.db.conn.execute(
                    f"SELECT term, doc FROM chunks_fts_vocab WHERE term IN ({marks})", missing
                ).fetchall()
            )
            cache.df.update((t, found.get(t, 0)) for t in missing)
        return {t: cache.df[t] for t in unique if cache.df[t]}

    def chunk_count(self) -> int:
        cache = self._stats()
        if cache.chunks is None:
            cache.chunks = self.db.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return cache.chunks

    def is_current(self) -> bool:
        """Whether the stored index uses this version's representation (no rebuild due)."""
        return self._current or stored_version(self.db.conn) == FTS_VERSION

    def best_per_document(
        self,
        expression: str,
        documents: int,
        source_id: int | None = None,
        essential: str | None = None,
        rest: str | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, score)`` of the best passage of each of the first ``documents``
        documents, best first; score is ``-bm25`` (higher is better).

        Trigger: the keyword leg used to fetch a fixed number of passages and keep one per
        document, so a few documents with dozens of matching passages ate the budget and
        a search returned fewer documents than asked (issue 7 item 12). Outcome: passages
        are read in one total order (bm25, then chunk id) and the read goes deeper (×4)
        until ``documents`` distinct documents are found or the matches run out, so a
        document's place never depends on how many were asked for.

        With ``source_id`` only chunks of documents that source holds are ranked (the
        filter runs inside the query, so a narrow scope still gets its documents).

        With ``essential`` and ``rest`` (an OR of some of ``expression``'s phrases, and an
        OR of all the others) only passages that match ``essential`` are ranked, each by
        its exact bm25 over the whole ``expression`` (``search/keyword.py`` says when
        that is the same answer). Not with ``source_id``.
        """
        depth = documents * PASSAGES_PER_DOCUMENT
        while True:
            if essential is None or rest is None:
                ranked = self._ranked_passages(expression, depth, source_id)
            else:
                ranked = self._ranked_essential(essential, rest, depth)
            best: dict[int, tuple[int, float]] = {}
            for chunk_id, document_id, score in ranked:
                if document_id not in best:
                    best[document_id] = (chunk_id, score)
                    if len(best) == documents:
                        break
            if len(best) == documents or len(ranked) < depth:
                return list(best.values())
            depth *= 4

    def best_documents(
        self, expression: str, documents: int, source_id: int | None = None
    ) -> list[tuple[int, float]]:
        """``(document_id, score)`` of the first ``documents`` documents ranked as wholes
        (``index/docs_fts.py``), best first; score is ``-bm25`` with the passages' column
        weights. With ``source_id`` only documents that source holds."""
        return docs_fts.best_documents(
            self.db.conn, expression, documents, HEAD_WEIGHT, BODY_WEIGHT, source_id
        )

    def best_passage_of(self, expression: str, document_ids: Sequence[int]) -> dict[int, int]:
        """Document id → chunk id of its best-bm25 passage for ``expression``, for those
        of ``document_ids`` with a matching passage (one query for all of them)."""
        return docs_fts.best_passages(
            self.db.conn, expression, document_ids, HEAD_WEIGHT, BODY_WEIGHT
        )

    def _ranked_passages(
        self, expression: str, limit: int, source_id: int | None
    ) -> list[tuple[int, int, float]]:
        """``(chunk_id, document_id, -bm25)`` of the best ``limit`` passages, in total order."""
        if source_id is None:
            sql = (
                "SELECT f.rowid, c.document_id, f.r FROM (SELECT rowid, "
                "bm25(chunks_fts, ?, ?) AS r FROM chunks_fts WHERE chunks_fts MATCH ? "
                "ORDER BY round(r, 9), rowid LIMIT ?) f JOIN chunks c ON c.id = f.rowid "
                "ORDER BY round(f.r, 9), f.rowid"
            )
            params: tuple = (HEAD_WEIGHT, BODY_WEIGHT, expression)
        else:
            sql = (
                "SELECT f.rowid, c.document_id, bm25(chunks_fts, ?, ?) AS r FROM chunks_fts f "
                "JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ? AND c.document_id IN "
                "(SELECT document_id FROM locations WHERE source_id = ?) "
                "ORDER BY round(r, 9), f.rowid LIMIT ?"
            )
            params = (HEAD_WEIGHT, BODY_WEIGHT, expression, source_id)
        rows = self.db.conn.execute(sql, (*params, limit)).fetchall()
        return [(cid, doc, -r) for cid, doc, r in rows]

    def _ranked_essential(
        self, essential: str, rest: str, limit: int
    ) -> list[tuple[int, int, float]]:
        """``_ranked_passages`` over the passages matching ``essential`` only, each scored
        by bm25 over ``essential`` and ``rest`` together (the whole query).

        FTS5 scores every posting of an OR, so the words in most passages cost the most
        and say the least. ``(E) AND (R)`` visits only the passages of ``E`` that hold a
        word of ``R`` (the other words' doclists are skipped through, not scored), and
        ``(E) NOT (R)`` those that hold none; each phrase of the query is in each
        expression once, and a phrase of ``R`` under ``NOT`` adds nothing to a passage
        that lacks it, so both give bm25 over the whole query, and every passage is
        scored once. (The first version scored ``(E) AND (Q)`` and subtracted bm25 over
        ``E`` alone: every passage twice, and a join of both; at 100k chunks this one is
        about twice as fast, see the README.) Each phrase's idf comes from its own
        doclist, whatever the expression. Scores are compared at 9 decimals, as in
        ``_ranked_passages``, so both order ties the same way.
        """
        sql = (
            "SELECT f.id, c.document_id, f.r FROM (SELECT id, r FROM ("
            "SELECT id, r FROM (SELECT rowid AS id, bm25(chunks_fts, ?1, ?2) AS r "
            "FROM chunks_fts WHERE chunks_fts MATCH ?3 ORDER BY round(r, 9), rowid LIMIT ?5) "
            "UNION ALL "
            "SELECT id, r FROM (SELECT rowid AS id, bm25(chunks_fts, ?1, ?2) AS r "
            "FROM chunks_fts WHERE chunks_fts MATCH ?4 ORDER BY round(r, 9), rowid LIMIT ?5)"
            ") ORDER BY round(r, 9), id LIMIT ?5) f "
            "JOIN chunks c ON c.id = f.id ORDER BY round(f.r, 9), f.id"
        )
        both, without = f"({essential}) AND ({rest})", f"({essential}) NOT ({rest})"
        params = (HEAD_WEIGHT, BODY_WEIGHT, both, without, limit)
        rows = self.db.conn.execute(sql, params).fetchall()
        return [(cid, doc, -r) for cid, doc, r in rows]


@dataclass(slots=True)
class _StatsCache:
    """Index statistics valid while ``stamp`` (connection, data version, changes) holds."""

    stamp: tuple[int, int, int]
    df: dict[str, int] = field(default_factory=dict)
    chunks: int | None = None
    derived: dict[str, object] = field(default_factory=dict)  # ``FtsIndex.per_version``
