"""The read side of the PostgreSQL keyword index: ``FtsIndex``'s search methods, same scores.

A search reads in ONE statement (one snapshot, one round trip; ``_read``): the live
generation's number (its passage arrays are read once per generation and kept), the
statistics, the tombstones, its terms' delta rows and those of its terms' packed lists
not kept yet (kept decoded per generation, ``index/term_lists.py``). It scores them with
``index/bm25.py`` phrase by phrase in query order, as FTS5's C code sums them, and picks
the best passage per document with ``index/topk.py`` in FTS5's order (``round(-bm25,
9)``, then chunk id): the SQLite store's functions, so both stores rank alike.

Nothing is cached across searches but what a generation fixes (its arrays and lists):
every search sees every commit of every server, with no invalidation to get wrong.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import psycopg

from kb_mcp.index import maxscore, term_lists, topk
from kb_mcp.index.bm25 import bm25_idf, length_norm, segment_key, term_score
from kb_mcp.index.columns import BODY_WEIGHT, HEAD_WEIGHT
from kb_mcp.index.postgres import keyword, keyword_merge, tokens

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")

# Passages sorted per document wanted before the full sort (``postings.PRESELECT``).
PRESELECT = 8
# One quoted unit of an OR expression made by ``search/query.or_expression``.
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def units_of(expression: str) -> list[str]:
    """The quoted units of an FTS5 expression ``"a" OR "b"`` (``query.or_expression``)."""
    return [m.group(1).replace('""', '"') for m in _QUOTED.finditer(expression)]


@dataclass(slots=True)
class _Segment:
    """One generation's passage arrays, read once per generation."""

    gen: int
    chunk_ids: np.ndarray  # ascending
    doc_ids: np.ndarray
    lengths: np.ndarray  # float64: bm25 reads them as such
    by_document: maxscore.ByDocument  # each document's passages (the citations' lookup)
    _norm: tuple[float, np.ndarray] | None = None

    def norm(self, avgdl: float) -> np.ndarray:
        """``bm25.length_norm`` of every passage, kept while ``avgdl`` holds (a write
        moves it; at 1M passages it is a pass over 8 MB per search otherwise)."""
        kept = self._norm
        if kept is None or kept[0] != avgdl:
            kept = self._norm = (avgdl, length_norm(self.lengths, avgdl))
        return kept[1]


class PostgresKeywordIndex:
    """``FtsIndex``'s search surface over the PostgreSQL keyword tables.

    ``connection`` returns this thread's psycopg connection; a search's reads are one
    statement, so it reads one snapshot in autocommit or inside a transaction alike.
    ``stamp`` returns a value that changes whenever the database does (the engine's
    ``change_stamp``): what ``per_version`` builds is kept while it holds. ``connect``
    opens a new autocommit connection, for ``refresh_segment``'s merges.
    """

    def __init__(
        self,
        connection: Callable[[], psycopg.Connection],
        tables: keyword.KeywordTables = keyword.PASSAGES,
        stamp: Callable[[], object] | None = None,
        connect: Callable[[], psycopg.Connection] | None = None,
    ) -> None:
        self.connection = connection
        self.connect = connect
        self.tables = tables
        self.stamp = stamp
        self._derived: tuple[object, dict[str, object]] = (None, {})
        # The whole documents' index beside the passages' (``best_documents``).
        self._documents = (
            PostgresKeywordIndex(connection, keyword.DOCUMENTS)
            if tables == keyword.PASSAGES
            else None
        )
        self._kept = term_lists.TermLists()
        self._segment_lock = threading.Lock()
        self._segment_cache: _Segment | None = None

    # -- FtsIndex's surface ------------------------------------------------------------

    def ensure_current(self) -> bool:
        """The index is written with its rows: there is never a rebuild due."""
        return False

    def is_current(self) -> bool:
        return True

    def invalidate(self) -> None:
        """Nothing to forget: there is no stored representation version to rebuild from."""

    def integrity_problem(self) -> str | None:
        """How the kept statistics differ from the indexed rows (passages' or documents'
        index), or None (``kb-mcp doctor``)."""
        conn = self.connection()
        for tables in (keyword.PASSAGES, keyword.DOCUMENTS):
            problem = keyword.totals_problem(conn, tables)
            if problem is not None:
                return f"keyword index {problem}"
        return None

    def refresh_segment(
        self, min_chunks: int | None = None, delta_min: int = keyword_merge.DELTA_MIN
    ) -> int | None:
        """Merge each index's delta when due (``keyword_merge.merge_due``); the passages
        the passages' new generation holds, or None when it was not merged. Needs the
        ``connect`` this index was made with (a merge opens two connections of its own).
        ``min_chunks`` is the SQLite segment's threshold: here every library has one."""
        if self.connect is None:
            raise ValueError("refresh_segment needs an index made with connect")  # a bug
        merged = None
        for tables in (keyword.PASSAGES, keyword.DOCUMENTS):
            if keyword_merge.merge_due(self.connection(), delta_min, tables):
                count = keyword_merge.merge(self.connect, tables=tables)
                merged = count if tables == keyword.PASSAGES else merged
        return merged

    def tokens(self, text: str) -> list[str]:
        return tokens.text_tokens(text)

    def query_tokens(self, unit: str) -> list[str]:
        return tokens.query_tokens(unit)

    def chunk_count(self) -> int:
        """The passages indexed (the statistics' row count: one per chunk)."""
        return keyword.read_totals(self.connection(), self.tables)[0]

    def per_version(self, name: str, build: Callable[[], T]) -> T:
        """``build()``, kept under ``name`` while ``stamp()`` is unchanged (without a
        ``stamp``, built every time)."""
        if self.stamp is None:
            return build()
        stamp = self.stamp()
        held, derived = self._derived
        if held != stamp:
            derived = {}
            self._derived = (stamp, derived)
        if name not in derived:
            derived[name] = build()
        return derived[name]  # type: ignore[return-value]

    def doc_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many passages hold each term (terms held by none are absent)."""
        unique = sorted(set(terms))
        if not unique:
            return {}
        found = self._read(self.connection(), unique)
        return {t: found.df(t) for t in unique if found.df(t)}

    def segment_best_per_document(
        self, units: Sequence[str], documents: int
    ) -> list[tuple[int, float]] | None:
        """``best_per_document`` of the OR of ``units``; None when a unit is a phrase the
        postings do not key (``bm25.segment_key``)."""
        keys = self._keys(units)
        return None if keys is None else self._best_per_document(keys, documents)

    def segment_best_passages(
        self, units: Sequence[str], document_ids: Sequence[int]
    ) -> dict[int, int] | None:
        """``best_passage_of`` the OR of ``units``; None for a phrase not keyed."""
        keys = self._keys(units)
        return None if keys is None else self._best_passages(keys, document_ids)

    def best_per_document(
        self,
        expression: str,
        documents: int,
        source_id: int | None = None,
        essential: str | None = None,
        rest: str | None = None,
    ) -> list[tuple[int, float]]:
        """``FtsIndex.best_per_document``: ``(chunk_id, -bm25)`` of the best passage of
        each of the first ``documents`` documents. With ``essential`` only passages
        matching one of its phrases are ranked (each by its bm25 over the whole
        expression); with ``source_id`` only documents that source holds."""
        keys = self._required_keys(units_of(expression))
        only = None if essential is None else self._required_keys(units_of(essential))
        return self._best_per_document(keys, documents, source_id, only)

    def best_documents(
        self, expression: str, documents: int, source_id: int | None = None
    ) -> list[tuple[int, float]]:
        """``(document_id, -bm25)`` of the first ``documents`` documents ranked as wholes
        (``index/docs_fts.py``), from the documents' tables; with ``source_id`` only
        documents that source holds."""
        if self._documents is None:
            raise ValueError("best_documents is asked of the passages' index")  # a bug
        return self._documents.best_per_document(expression, documents, source_id)

    def best_passage_of(self, expression: str, document_ids: Sequence[int]) -> dict[int, int]:
        """Document id → chunk id of its best passage for ``expression``."""
        return self._best_passages(self._required_keys(units_of(expression)), document_ids)

    # -- scoring -----------------------------------------------------------------------

    def _keys(self, units: Sequence[str]) -> list[str] | None:
        """Each unit's postings key (a unit with no token matches nothing, as in FTS5),
        or None when one is a phrase the postings do not key."""
        keys = []
        for unit in units:
            unit_tokens = tokens.query_tokens(unit)
            if not unit_tokens:
                continue
            key = segment_key(unit_tokens)
            if key is None:
                return None
            keys.append(key)
        return keys

    def _required_keys(self, units: Sequence[str]) -> list[str]:
        """The keys of the units the postings key; a phrase they do not key is left out.

        Such a phrase is a Latin word FTS5 splits in two (21 code points, vowel signs of
        scripts its tables do not know, as in ``abᦰcd``): FTS5 matches the two tokens
        side by side, which needs positions the postings do not keep. Left out, it adds
        to no passage's score, which is what FTS5 gives when nothing holds the phrase;
        a search must never fail on what a user typed."""
        keys = []
        for unit in units:
            key = self._keys([unit])
            keys.extend(key or ())
        return keys

    def _best_per_document(
        self,
        keys: Sequence[str],
        documents: int,
        source_id: int | None = None,
        essential: Sequence[str] | None = None,
    ) -> list[tuple[int, float]]:
        """The top ``documents`` by MaxScore (``index/maxscore.py``): only the passages
        that can reach the top are scored, with the same scores as the full scoring."""
        import numpy as np

        scoring = self._scoring(keys, source_id)
        if scoring is None:
            return []
        found, terms, recent_scores, allowed = scoring
        segment = found.segment
        recent_at = np.flatnonzero(recent_scores)
        recent_keep = found.holding_recent(essential, recent_at) if essential is not None else None

        def select(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
            keep = found.alive(at)
            if essential is not None:
                keep &= found.holding(essential, at)
            at, values = at[keep], values[keep]
            chunk_ids = np.concatenate(
                [segment.chunk_ids[at] if segment else at, found.recent_ids[recent_at]]
            )
            doc_ids = np.concatenate(
                [segment.doc_ids[at] if segment else at, found.recent_docs[recent_at]]
            )
            scores = np.concatenate([values, recent_scores[recent_at]])
            if recent_keep is not None:
                keep = np.concatenate([np.ones(len(at), dtype=bool), recent_keep])
                chunk_ids, doc_ids, scores = chunk_ids[keep], doc_ids[keep], scores[keep]
            if allowed is not None:
                inside = np.isin(doc_ids, allowed)
                chunk_ids, doc_ids, scores = chunk_ids[inside], doc_ids[inside], scores[inside]
            return topk.best_per_document(chunk_ids, doc_ids, scores, documents, PRESELECT)

        return maxscore.top_documents(terms, found.norm, documents, select)

    def _best_passages(self, keys: Sequence[str], document_ids: Sequence[int]) -> dict[int, int]:
        """Document id → chunk id of each document's best passage: only the documents'
        own passages are scored (``maxscore.document_scores``, the full scoring's bits;
        scoring every match cost 32 / 102 ms CPU p50 / p95 at 1M passages), with the
        delta's matching passages beside them."""
        import numpy as np

        scoring = self._scoring(keys)
        if scoring is None or not document_ids:
            return {}
        found, terms, recent_scores, _allowed = scoring
        segment = found.segment
        at = np.zeros(0, dtype=np.int64)
        values = np.zeros(0, dtype=np.float64)
        if segment is not None:
            at, values = maxscore.document_scores(
                terms, found.norm, segment.by_document, document_ids, found.dead
            )
        recent_at = np.flatnonzero(recent_scores)
        chunk_ids = np.concatenate(
            [segment.chunk_ids[at] if segment else at, found.recent_ids[recent_at]]
        )
        doc_ids = np.concatenate(
            [segment.doc_ids[at] if segment else at, found.recent_docs[recent_at]]
        )
        scores = np.concatenate([values, recent_scores[recent_at]])
        return topk.best_passage_of(chunk_ids, doc_ids, scores, document_ids)

    def _scoring(
        self, keys: Sequence[str], source_id: int | None = None
    ) -> tuple[_Found, list[maxscore.TermList], np.ndarray, np.ndarray | None] | None:
        """A search's reads and what scoring needs: each key's generation list with its
        idf (query order), the delta passages' bm25 (all of them: the delta is small),
        and the documents ``source_id`` holds (None: any); None when the index is
        empty or there is no key."""
        import numpy as np

        if not keys:
            return None
        conn = self.connection()
        found = self._read(conn, keys)
        allowed = None
        if source_id is not None:
            allowed = np.array(
                [
                    r[0]
                    for r in conn.execute(
                        "SELECT document_id FROM locations WHERE source_id = %s "
                        "AND document_id IS NOT NULL",
                        (source_id,),
                    )
                ],
                dtype=np.int64,
            )
        if found.rows == 0:
            return None
        terms = []
        recent_scores = np.zeros(len(found.recent_ids), dtype=np.float64)
        for key in keys:  # query order: FTS5 sums its phrases in this order
            idf = bm25_idf(found.df(key), found.rows)
            if key in found.lists:
                terms.append(maxscore.TermList(idf, *found.lists[key]))
            if key in found.recent:
                at, freq = found.recent[key]
                recent_scores[at] += term_score(idf, freq, found.recent_norm[at])
        return found, terms, recent_scores, allowed

    # -- reads -------------------------------------------------------------------------

    def _segment(self, conn: psycopg.Connection, gen: int) -> _Segment | None:
        """Generation ``gen``'s arrays (read again only when a merge made a new one), or
        None when a newer merge has replaced it meanwhile."""
        import numpy as np

        cached = self._segment_cache
        if cached is not None and cached.gen == gen:
            return cached
        with self._segment_lock:
            row = conn.execute(
                self.tables.sql(
                    "SELECT chunk_ids, doc_ids, lengths FROM kw_segment WHERE generation = %s"
                ),
                (gen,),
            ).fetchone()
            if row is None:
                return None
            doc_ids = np.frombuffer(row[1], dtype="<i8")
            segment = _Segment(
                gen,
                np.frombuffer(row[0], dtype="<i8"),
                doc_ids,
                np.frombuffer(row[2], dtype="<u4").astype(np.float64),
                maxscore.ByDocument(doc_ids),
            )
            self._segment_cache = segment
        return segment

    def _read(self, conn: psycopg.Connection, keys: Sequence[str]) -> _Found:
        """What scoring ``keys`` needs, read in ONE statement (one snapshot, one round
        trip: a search of eight statements spent most of its time waiting on them): the
        generation, the statistics, the tombstones, the keys' delta rows, and the keys'
        packed lists not kept yet, for the generation last seen (read again for the
        right one when a merge has switched meanwhile)."""
        unique = sorted(set(keys))
        while True:
            cached = self._segment_cache
            guess = cached.gen if cached is not None else -1
            missing = self._kept.missing(guess, unique)
            row = conn.execute(self.tables.sql(_READ), (unique, guess, missing)).fetchone()
            gen = row[0]
            if gen is None:
                return _Found(row, None, {})
            if gen != guess:
                self._segment(conn, gen)  # then read the lists of that generation
                continue
            parts = _decode_parts(row[11:15])
            fetched = set(missing)

            def read(
                wanted: list[str], fetched: set[str] = fetched, parts: term_lists.Lists = parts
            ) -> term_lists.Lists:
                if not fetched.issuperset(wanted):
                    raise _Evicted  # dropped from the cache since: read again
                return parts

            try:
                lists = self._kept.lists(gen, unique, read)
            except _Evicted:
                continue
            return _Found(row, cached, lists)


class _Evicted(Exception):
    """A list kept when the statement was sent was evicted before it was used."""


# One snapshot's reads for a search (see ``_read``); parameters: the keys (sorted), the
# generation last seen, and the keys whose lists are not kept for it.
_READ = """
SELECT s.generation, t.passages, t.head_tokens, t.body_tokens, d.ids,
       r.terms, r.chunk_ids, r.heads, r.bodies, r.docs, r.lengths,
       p.terms, p.ids, p.heads, p.bodies
FROM (SELECT 1) AS one
LEFT JOIN kw_segment s ON true
CROSS JOIN (SELECT COALESCE(SUM(passages), 0) AS passages,
                   COALESCE(SUM(head_tokens), 0) AS head_tokens,
                   COALESCE(SUM(body_tokens), 0) AS body_tokens FROM kw_totals) t
CROSS JOIN (SELECT array_agg(chunk_id) AS ids FROM kw_dead) d
CROSS JOIN (SELECT array_agg(r.term) AS terms, array_agg(r.chunk_id) AS chunk_ids,
                   array_agg(r.head) AS heads, array_agg(r.body) AS bodies,
                   array_agg(p.document_id) AS docs,
                   array_agg(p.head_tokens + p.body_tokens) AS lengths
            FROM kw_recent r JOIN kw_passages p ON p.chunk_id = r.chunk_id
            WHERE r.term = ANY(%s) AND NOT p.merged) r
CROSS JOIN (SELECT array_agg(term ORDER BY term, part) AS terms,
                   array_agg(ids ORDER BY term, part) AS ids,
                   array_agg(head ORDER BY term, part) AS heads,
                   array_agg(body ORDER BY term, part) AS bodies
            FROM kw_parts WHERE gen = %s AND term = ANY(%s)) p
"""


def _decode_parts(columns: Sequence[list | None]) -> term_lists.Lists:
    """Each key's ``(positions, weighted frequency)`` from its parts' rows (in order)."""
    import numpy as np

    terms, ids, heads, bodies = columns
    parts: dict[str, list[tuple[bytes, bytes, bytes]]] = {}
    for term, i, h, b in zip(terms or (), ids or (), heads or (), bodies or (), strict=True):
        parts.setdefault(term, []).append((i, h, b))
    found = {}
    for term, rows in parts.items():
        i, h, b = (b"".join(column) for column in zip(*rows, strict=True))
        freq = HEAD_WEIGHT * np.frombuffer(h, dtype="<u2") + BODY_WEIGHT * (
            np.frombuffer(b, dtype="<u2")
        )
        found[term] = (np.frombuffer(i, dtype="<u4"), freq)
    return found


class _Found:
    """One snapshot's statistics, generation lists and delta rows for a search's keys."""

    def __init__(self, row: tuple, segment: _Segment | None, lists: term_lists.Lists) -> None:
        import numpy as np

        rows, head_tokens, body_tokens = int(row[1]), int(row[2]), int(row[3])
        avgdl = (head_tokens + body_tokens) / rows if rows else 1.0
        self.rows = rows
        self.segment = segment
        self.lists = lists
        self.norm = segment.norm(avgdl) if segment is not None else np.zeros(0)
        self.dead = np.zeros(0, dtype=np.int64)
        if segment is not None and row[4]:
            gone = np.array(row[4], dtype=np.int64)
            where = np.searchsorted(segment.chunk_ids, gone)
            inside = where < len(segment.chunk_ids)
            self.dead = where[inside][segment.chunk_ids[where[inside]] == gone[inside]]
        self._live: np.ndarray | None = None
        self._df: dict[str, int] = {}
        # The delta as small arrays: its passages, and per key (positions, freq).
        passages: dict[int, int] = {}
        docs: list[int] = []
        lengths: list[int] = []
        per_key: dict[str, tuple[list[int], list[float]]] = {}
        recent = zip(*(column or () for column in row[5:11]), strict=True)
        for term, cid, head, body, doc, length in recent:
            at = passages.get(cid)
            if at is None:
                at = passages[cid] = len(docs)
                docs.append(doc)
                lengths.append(length)
            entry = per_key.setdefault(term, ([], []))
            entry[0].append(at)
            entry[1].append(HEAD_WEIGHT * head + BODY_WEIGHT * body)
        self.recent_ids = np.array(list(passages), dtype=np.int64)
        self.recent_docs = np.array(docs, dtype=np.int64)
        self.recent_norm = length_norm(np.array(lengths, dtype=np.float64), avgdl)
        self.recent = {
            key: (np.array(at, dtype=np.int64), np.array(freq, dtype=np.float64))
            for key, (at, freq) in per_key.items()
        }

    def df(self, key: str) -> int:
        """Passages holding ``key``: the generation's live ones and the delta's."""
        import numpy as np

        found = self._df.get(key)
        if found is None:
            found = 0
            if key in self.lists:
                at = self.lists[key][0]
                found = len(at) if not len(self.dead) else int(np.count_nonzero(self._alive()[at]))
            if key in self.recent:
                found += len(self.recent[key][0])
            self._df[key] = found
        return found

    def alive(self, at: np.ndarray) -> np.ndarray:
        """Which generation passages at ``at`` are not tombstoned."""
        import numpy as np

        if not len(self.dead):
            return np.ones(len(at), dtype=bool)
        return self._alive()[at]

    def _alive(self) -> np.ndarray:
        import numpy as np

        if self._live is None:
            self._live = np.ones(len(self.segment.chunk_ids), dtype=bool)
            self._live[self.dead] = False
        return self._live

    def holding(self, keys: Sequence[str], at: np.ndarray) -> np.ndarray:
        """Which segment passages at ``at`` hold one of ``keys``."""
        import numpy as np

        mask = np.zeros(len(self.norm), dtype=bool)
        for key in keys:
            if key in self.lists:
                mask[self.lists[key][0]] = True
        return mask[at]

    def holding_recent(self, keys: Sequence[str], at: np.ndarray) -> np.ndarray:
        """Which delta passages at ``at`` hold one of ``keys``."""
        import numpy as np

        mask = np.zeros(len(self.recent_ids), dtype=bool)
        for key in keys:
            if key in self.recent:
                mask[self.recent[key][0]] = True
        return mask[at]
