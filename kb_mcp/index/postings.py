"""A derived postings segment beside the FTS5 index, scored with numpy (issue 10).

Trigger: at 100k chunks a keyword search spent most of its CPU inside FTS5: ``bm25()``
costs 3–4.5 µs per passage it scores, and before the first row it counts every phrase's
doclist for the idf (about 80 ns a posting), so a question naming a common word paid for
that word's whole doclist however it was pruned (README, "Speed"). Outcome: a segment
built in bulk from the chunk rows — per term, the packed positions of the passages that
hold it and their per-column term frequencies — read with one indexed lookup per query
term and scored by FTS5's own bm25 formula in numpy, so the ranking is the FTS5 path's.

Tables (migration 7):

- ``kw_postings(gen, term, part, ids, head, body)``: ``ids`` are positions into the
  segment's passage arrays (uint32, ascending), ``head`` / ``body`` the term's count in
  each column (uint16); one row per ``PART_PASSAGES`` passages, read in part order.
  ``gen`` is the build that wrote the row: readers read only the generation
  ``kw_segment`` names, so a build writes the next one beside it. A CJK bigram (two
  one-character terms next to each other in one column, the phrase a query's ``"机 器"``
  matches) has a row of its own, keyed ``"机 器"``.
- ``kw_segment``: one row, the live generation and its passage arrays: chunk ids
  (ascending), document ids and token counts (``head`` + ``body``, what bm25 calls the
  passage length).
- ``kw_delta(chunk_id, seq)``: chunks written or deleted since the segment was built or
  a build began (``index/fts.py`` notes every insert and delete; each call takes the next
  ``seq``). The segment ignores them; the ones that still exist are tokenized at search
  time (kept while their rows are unchanged) and scored beside it by the same formula,
  so a search never sees a stale passage. An LSM-style delta: ``refresh`` rebuilds the
  segment when it has grown past ``DELTA_SHARE``.

A build never holds the write lock for long (issue 11: at 100k chunks it tokenizes for
about 132 s of CPU, and another writer waits at most the 10 s busy timeout before
"database is locked"): it marks itself in ``meta`` (``BUILD_MARKER``) in one short write,
writes each part in a write of its own, switches ``kw_segment`` in one more and deletes
the old generation a slice at a time. It reads the chunks in several snapshots, which is
sound because every chunk written or deleted after its first write is in the delta with a
``seq`` past the one it noted (``build`` says why). A search reads ``kw_segment``, the
delta and that generation's postings in one read transaction (a WAL snapshot), so a
switch or a cleanup landing mid-search cannot mix generations. A build that dies leaves
the old segment serving and its half generation behind; the next build deletes it. Each
write of a build refreshes its marker's time: ``refresh`` starts no second build while
one is alive (a build started anyway takes the marker, and the older one stops), and
builds over a marker unwritten for ``BUILD_STALE_S`` (a dead build's).

The collection statistics are the figures FTS5's bm25 reads: the row count and total
token count from ``kw_totals``, kept in the transactions that write the FTS rows
(``index/keyword_totals.py``; never FTS5's private averages record), and a phrase's
document frequency as the segment's live postings plus the delta's. Chunk ids are reused
by SQLite (``max(id) + 1``), which is why a delta id is excluded from the segment even
when it is also a new chunk's id.

Over STYLE.md's 700 lines, on purpose for now: the writer (build, delta) and the reader
(scoring) share one binary format and one tokenization of the FTS columns, kept in one
file so they cannot drift apart; the next cut is the reader into a module of its own.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import apsw

from kb_mcp.index import keyword_totals, maxscore, term_lists, topk
from kb_mcp.index.bm25 import (  # FTS5's formula, shared with the PostgreSQL store
    bm25_idf,
    length_norm,
    passage_terms,
    term_score,
)
from kb_mcp.index.columns import BODY_WEIGHT, HEAD_WEIGHT, index_row
from kb_mcp.index.textprep import FTS_TOKENIZER
from kb_mcp.store.db import Database, read_snapshot

if TYPE_CHECKING:  # numpy loads on first use: opening a library never waits for it
    import numpy as np

# No segment below this many chunks: it costs a build (about 1.3 ms of CPU a passage: 132
# s at 100k chunks, bench perf corpus) and disk (126 MB of postings at 100k), while at
# 10k chunks a whole FTS5-path search takes 7–18 ms CPU p50 (bench perf). The keyword
# leg's pruning starts at the same size.
SEGMENT_MIN_CHUNKS = 30_000
# Rebuild the segment once the delta holds this share of its passages: a delta chunk is
# tokenized at search time (about 0.5 ms, then kept while its row is unchanged) and its
# score summed in Python.
DELTA_SHARE = 0.02
DELTA_MIN = 500
# Rows per read while building (bounded memory for the chunk text; the postings
# themselves are packed arrays, 8 bytes a posting).
BUILD_BATCH = 2_000
# Passages per part: a term's postings are stored in one row per part (``kw_postings``'
# key is ``(term, part)``), so a build holds only one part's postings in memory. At 100k
# chunks, holding them all reached 850 MB RSS (a dict entry per distinct term, most of
# them rare); in parts of 10k the build peaked at 516 MB, most of it the mapped file.
PART_PASSAGES = 10_000
# Postings rows of an old generation deleted per write after a build: one short write
# each, so another writer's wait stays far below the busy timeout.
DROP_SLICE = 5_000
# The ``meta`` key a build sets in its first write (value: the generation it writes) and
# clears in its last: while set, ``note_changed`` records into the delta.
BUILD_MARKER = "kw_building"
# A marker not refreshed for this long is a dead build's (each part's write refreshes it;
# a part is ``PART_PASSAGES`` × ~1.3 ms ≈ 13 s of CPU, bench perf corpus, so ten times
# that on a busy machine): ``refresh`` starts a build over it, and leaves a live one be.
BUILD_STALE_S = 120.0
# Passages sorted per document wanted before the full sort is tried (``FtsIndex``'s
# ``PASSAGES_PER_DOCUMENT`` reads 4 a document first; twice that covers SciFact's 1.2).
PRESELECT = 8


# ---------------------------------------------------------------------------- writes


def note_changed(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    """Record chunks written or deleted since the segment was built, or since a build
    began (none without either). One new ``seq`` a call: a chunk changed again moves
    past the ``s0`` of a build under way. Call inside ``db.write()``."""
    if not _has_segment(conn) and _building(conn) is None:
        return
    seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM kw_delta").fetchone()[0]
    conn.executemany(
        "INSERT INTO kw_delta(chunk_id, seq) VALUES (?, ?) "
        "ON CONFLICT(chunk_id) DO UPDATE SET seq = excluded.seq",
        ((cid, seq) for cid in chunk_ids),
    )


def _has_segment(conn: apsw.Connection) -> bool:
    """Whether a segment is built; False before migration 7 has run too (a migration or
    an old database's writer indexes chunks through ``index/fts`` before it exists)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kw_segment'"
    ).fetchone()
    return exists is not None and conn.execute("SELECT 1 FROM kw_segment").fetchone() is not None


def _marker(conn: apsw.Connection) -> str | None:
    """A build's marker, ``"<generation> <token>"``: the token tells two builds of one
    generation apart (one started after a ``forget`` dropped the other's marker). The
    stored value adds the time of the build's last write (``_marker_age``)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BUILD_MARKER,)).fetchone()
    return " ".join(row[0].split()[:2]) if row else None


def _marker_age(conn: apsw.Connection) -> float | None:
    """Seconds since a build under way last wrote, or None without a marker."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BUILD_MARKER,)).fetchone()
    return time.time() - float(row[0].split()[2]) if row else None


def _set_marker(conn: apsw.Connection, marker: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        (BUILD_MARKER, f"{marker} {time.time():.3f}"),
    )


def _building(conn: apsw.Connection) -> int | None:
    """The generation a build under way (or a crashed one) is writing, from its marker."""
    marker = _marker(conn)
    return int(marker.split()[0]) if marker else None


def forget(conn: apsw.Connection) -> None:
    """Drop the segment, its delta and a build's marker (the FTS index is being rebuilt
    and renumbers chunks: a build under way finds its marker gone and stops). Inside a
    write."""
    conn.execute("DELETE FROM meta WHERE key = ?", (BUILD_MARKER,))
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kw_postings'"
    ).fetchone()
    if exists is None:
        return
    conn.execute("DELETE FROM kw_postings")
    conn.execute("DELETE FROM kw_segment")
    conn.execute("DELETE FROM kw_delta")


_CHUNK_ROWS = (
    "SELECT c.id, c.document_id, d.title, c.heading_path, c.text, "
    "CASE WHEN d.kind = 'code' THEN d.language END FROM chunks c "
    "JOIN documents d ON d.id = c.document_id"
)


def _chunk_rows(conn: apsw.Connection, where: str = "") -> apsw.Cursor:
    return conn.execute(f"{_CHUNK_ROWS} {where} ORDER BY c.id")


def _chunk_batches(conn: apsw.Connection, size: int) -> Iterator[list[tuple]]:
    """Every chunk row in id order, ``size`` at a time by keyset (``id > last``): each
    batch is fetched whole, so no read cursor stays open across the build's writes."""
    last = 0
    while batch := conn.execute(
        f"{_CHUNK_ROWS} WHERE c.id > ? ORDER BY c.id LIMIT ?", (last, size)
    ).fetchall():
        yield batch
        last = batch[-1][0]


@dataclass(slots=True)
class _Tokenized:
    chunk_id: int
    document_id: int
    length: int
    head: Counter[str]
    body: Counter[str]


def _tokenize_rows(tokenizer: apsw.FTS5Tokenizer, rows: Iterable[tuple]) -> Iterable[_Tokenized]:
    for cid, doc, title, path_json, text, language in rows:
        head, body = index_row(title, json.loads(path_json), text, language)
        head_tokens = _tokens(tokenizer, head)
        body_tokens = _tokens(tokenizer, body)
        yield _Tokenized(
            cid,
            doc,
            len(head_tokens) + len(body_tokens),
            passage_terms(head_tokens, head),
            passage_terms(body_tokens, body),
        )


def _tokens(tokenizer: apsw.FTS5Tokenizer, text: str) -> list[str]:
    return tokenizer(
        text.encode("utf-8"),
        apsw.FTS5_TOKENIZE_DOCUMENT,
        None,
        include_offsets=False,
        include_colocated=False,
    )


class _Superseded(Exception):
    """Another build (or a rebuild of the FTS index) took the marker: this one stops."""


def build(
    db: Database,
    tokenizer: apsw.FTS5Tokenizer | None = None,
    part_passages: int = PART_PASSAGES,
    on_part: Callable[[int], None] | None = None,
) -> int | None:
    """Build a new generation of the segment beside the live one; the number of
    passages, or None when another build took over meanwhile.

    No write lock is held while it tokenizes (about 1.3 ms a passage: minutes at 100k
    chunks, and every other writer waits at most the 10 s busy timeout): (a) one short
    write sets the marker, takes ``s0`` (the delta's highest seq) and the generation;
    (b) chunks are read by keyset, and each part's rows are written in a write of their
    own under the new generation (readers still read the live one); (c) one short write
    switches ``kw_segment`` to it, drops the delta up to ``s0`` and clears the marker;
    (d) the old generation's rows are deleted a slice per write. ``on_part`` hears of
    each part once its write has committed (progress). A build started meanwhile (a
    second sync) takes a newer generation and the marker: this one stops at its next
    write and returns None.

    Why the parts need no one snapshot: a chunk's row read in (b) is its state at some
    moment after (a). Every chunk written or deleted after (a) committed is in the delta
    with a seq above ``s0`` (the marker makes ``note_changed`` record it, and a chunk
    changed again takes a new seq), and (c) keeps those. A delta chunk is ignored in the
    segment and scored from its current row, so a part built from a chunk that changed
    mid-build never shows its stale text, and a chunk id reused by a new row is not
    confused with the old. Chunks changed before (a) are read as they are after it.
    """
    import numpy as np

    tokenizer = tokenizer or _tokenizer(db)
    s0, gen, live, marker = _begin(db)
    _drop_older(db, gen, keep=live)  # a crashed build's half generation
    ids: list[int] = []
    docs: list[int] = []
    lengths: list[int] = []
    postings: _Lists = {}
    part = 0
    try:
        for batch in _chunk_batches(db.conn, min(BUILD_BATCH, part_passages)):
            _add_batch(tokenizer, batch, ids, docs, lengths, postings)
            if len(ids) >= (part + 1) * part_passages:
                _write_part(db, (gen, marker), part, postings, on_part)
                part += 1
        _write_part(db, (gen, marker), part, postings, on_part)
        with db.write() as conn:
            _check_marker(conn, marker)
            conn.execute(
                "INSERT OR REPLACE INTO kw_segment(id, generation, chunk_ids, doc_ids, lengths) "
                "VALUES (1, ?, ?, ?, ?)",
                (
                    gen,
                    np.asarray(ids, dtype=np.int64).tobytes(),
                    np.asarray(docs, dtype=np.int64).tobytes(),
                    np.asarray(lengths, dtype=np.uint32).tobytes(),
                ),
            )
            conn.execute("DELETE FROM kw_delta WHERE seq <= ?", (s0,))
            conn.execute("DELETE FROM meta WHERE key = ?", (BUILD_MARKER,))
    except _Superseded:
        return None
    _drop_older(db, gen)  # the generation it replaced
    return len(ids)


def _begin(db: Database) -> tuple[int, int, int, str]:
    """Step (a), one short write: ``(s0, new generation, live generation, marker)``. The new
    generation is past a crashed or running build's too, so one that is still running
    finds the marker changed at its next write and stops."""
    with db.write() as conn:
        row = conn.execute("SELECT generation FROM kw_segment").fetchone()
        live = row[0] if row else 0
        gen = max(live, _building(conn) or 0) + 1
        marker = f"{gen} {uuid.uuid4().hex}"
        _set_marker(conn, marker)
        s0 = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM kw_delta").fetchone()[0]
    return s0, gen, live, marker


def _check_marker(conn: apsw.Connection, marker: str) -> None:
    if _marker(conn) != marker:
        raise _Superseded


def _drop_older(db: Database, below: int, keep: int | None = None) -> None:
    """Delete the rows of every generation older than ``below`` but ``keep``,
    ``DROP_SLICE`` rows a write (the key leads with ``gen``: a slice is one range of the
    b-tree). Only older ones: a build started after this one writes a newer generation."""
    gen = -1
    while True:
        row = db.conn.execute(
            "SELECT MIN(gen) FROM kw_postings WHERE gen > ? AND gen < ?", (gen, below)
        ).fetchone()
        if row[0] is None:
            return
        gen = row[0]
        if gen == keep:
            continue
        while True:
            with db.write() as conn:
                cut = conn.execute(
                    "SELECT term FROM kw_postings WHERE gen = ? ORDER BY term LIMIT 1 OFFSET ?",
                    (gen, DROP_SLICE),
                ).fetchone()
                if cut is None:
                    conn.execute("DELETE FROM kw_postings WHERE gen = ?", (gen,))
                    break
                conn.execute("DELETE FROM kw_postings WHERE gen = ? AND term <= ?", (gen, cut[0]))


_Lists = dict[str, tuple[array, array, array]]  # term → positions, head counts, body counts


def _write_part(
    db: Database,
    build: tuple[int, str],
    part: int,
    postings: _Lists,
    on_part: Callable[[int], None] | None,
) -> None:
    """Step (b): one part's rows under the new generation, in a write of its own."""
    gen, marker = build
    with db.write() as conn:
        _check_marker(conn, marker)
        _set_marker(conn, marker)  # alive: ``refresh`` leaves it be
        conn.executemany(
            "INSERT INTO kw_postings(gen, term, part, ids, head, body) VALUES (?, ?, ?, ?, ?, ?)",
            (
                (gen, t, part, _little(p), _little(h), _little(b))
                for t, (p, h, b) in postings.items()
            ),
        )
    postings.clear()
    if on_part is not None:
        on_part(part)


def _little(values: array) -> bytes:
    """The array's bytes little-endian, as the reader's numpy dtypes take them."""
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _add_batch(
    tokenizer: apsw.FTS5Tokenizer,
    batch: Sequence[tuple],
    ids: list[int],
    docs: list[int],
    lengths: list[int],
    postings: _Lists,
) -> None:
    """Append one batch of chunk rows to the part's postings (hot: ~150 terms a row)."""
    for row in _tokenize_rows(tokenizer, batch):
        position = len(ids)
        ids.append(row.chunk_id)
        docs.append(row.document_id)
        lengths.append(row.length)
        head, body = row.head, row.body
        if row.length > 0xFFFF:  # a count must fit its uint16 (a chunk is ~1,800 chars)
            head = Counter({t: min(n, 0xFFFF) for t, n in head.items()})
            body = Counter({t: min(n, 0xFFFF) for t, n in body.items()})
        for term, count in body.items():
            entry = postings.get(term)
            if entry is None:
                entry = postings[term] = (array("I"), array("H"), array("H"))
            entry[0].append(position)
            entry[1].append(head.get(term, 0))
            entry[2].append(count)
        for term, count in head.items():
            if term in body:
                continue
            entry = postings.get(term)
            if entry is None:
                entry = postings[term] = (array("I"), array("H"), array("H"))
            entry[0].append(position)
            entry[1].append(count)
            entry[2].append(0)


def delta_size(conn: apsw.Connection) -> tuple[int, int] | None:
    """``(segment passages, delta chunks)``, or None when there is no segment."""
    row = conn.execute("SELECT length(lengths) / 4 FROM kw_segment").fetchone()
    if row is None:
        return None
    return row[0], conn.execute("SELECT COUNT(*) FROM kw_delta").fetchone()[0]


def refresh_due(
    conn: apsw.Connection, min_chunks: int | None = None, delta_min: int = DELTA_MIN
) -> bool:
    """Whether ``build`` should run: a library of ``min_chunks`` (default
    ``SEGMENT_MIN_CHUNKS``) or more without a segment, or a delta past ``DELTA_SHARE`` of
    it (and past ``delta_min``); never while another build is under way (its marker
    written within ``BUILD_STALE_S``): two syncs ending together build once."""
    age = _marker_age(conn)
    if age is not None and age < BUILD_STALE_S:
        return False
    size = delta_size(conn)
    if size is None:
        least = SEGMENT_MIN_CHUNKS if min_chunks is None else min_chunks
        return conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] >= least
    passages, delta = size
    return delta > max(delta_min, DELTA_SHARE * passages)


def refresh(db: Database, min_chunks: int | None = None, delta_min: int = DELTA_MIN) -> int | None:
    """Build the segment when ``refresh_due``; the passages it holds, or None when it was
    not due or another build overtook it. Called after a sync (``ingest/sync.py``): a
    build is a bulk write, in short transactions (``build``)."""
    if not refresh_due(db.conn, min_chunks, delta_min):
        return None
    return build(db)


def _tokenizer(db: Database) -> apsw.FTS5Tokenizer:
    """The FTS table's own tokenizer, on ``db``'s connection."""
    name, *args = FTS_TOKENIZER.split()
    return db.conn.fts5_tokenizer(name, args)


# ---------------------------------------------------------------------------- reads


@dataclass(slots=True)
class _Segment:
    """The passage arrays of one built segment (read once per build)."""

    key: int  # the segment's generation: each build adds one
    chunk_ids: np.ndarray
    doc_ids: np.ndarray
    lengths: np.ndarray
    by_document: maxscore.ByDocument  # each document's passages (the citations' lookup)


@dataclass(slots=True)
class _State:
    """What a search needs besides the postings, valid for one data version."""

    stamp: tuple
    rows: int
    avgdl: float
    norm: np.ndarray  # k1 * (1 - b + b * D / avgdl) per segment passage
    live: np.ndarray  # bool per segment passage: not in the delta
    all_live: bool
    dead: np.ndarray  # positions of the segment passages in the delta
    delta: list[_Tokenized]
    delta_postings: dict[str, list[tuple[int, float]]]  # key → (delta index, weighted freq)
    df: dict[str, int] = field(default_factory=dict)


class Postings:
    """The read side of the segment: ranked passages for a query's phrase keys."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._local = threading.local()  # a state belongs to a connection's data version
        self._kept = term_lists.TermLists()

    def _delta_rows(self, tokenizer: apsw.FTS5Tokenizer) -> list[_Tokenized]:
        """The delta's chunks that exist, tokenized; a row tokenized for an earlier data
        version is reused while its columns are the same (an agent writing document after
        document changes the data version each time, and tokenizing costs ~0.7 ms a row)."""
        where = "WHERE c.id IN (SELECT chunk_id FROM kw_delta)"
        known: dict[tuple, _Tokenized] = getattr(self._local, "delta_rows", {})
        kept: dict[tuple, _Tokenized] = {}
        fresh = []
        for row in _chunk_rows(self.db.conn, where):
            if row in known:
                kept[row] = known[row]
            else:
                fresh.append(row)
        kept.update(zip(fresh, _tokenize_rows(tokenizer, fresh), strict=True))
        self._local.delta_rows = kept
        return sorted(kept.values(), key=lambda r: r.chunk_id)

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction around a search's segment reads, so the passage arrays,
        the delta and the postings are all of one commit (a rebuild may land between two
        statements otherwise, and its positions would index the old arrays). Inside a
        transaction already (a search within a write), that one is the snapshot."""
        with read_snapshot(self.db.conn):
            yield

    def _segment(self) -> _Segment | None:
        """The built segment's arrays, read again only after a rebuild (a new generation)."""
        conn = self.db.conn
        head = conn.execute("SELECT generation FROM kw_segment").fetchone()
        if head is None:
            return None  # before numpy loads: a keyword-only library never imports it
        import numpy as np

        cached = getattr(self._local, "segment", None)
        if cached is not None and cached.key == head[0]:
            return cached
        row = conn.execute("SELECT chunk_ids, doc_ids, lengths FROM kw_segment").fetchone()
        if row is None:
            return None
        doc_ids = np.frombuffer(row[1], dtype=np.int64)
        segment = _Segment(
            head[0],
            np.frombuffer(row[0], dtype=np.int64),
            doc_ids,
            np.frombuffer(row[2], dtype=np.uint32).astype(np.float64),
            maxscore.ByDocument(doc_ids),
        )
        self._local.segment = segment
        return segment

    def state(self, stamp: tuple, tokenizer: apsw.FTS5Tokenizer) -> tuple[_Segment, _State] | None:
        """The segment and this data version's statistics and delta, or None without a
        segment. ``stamp`` is ``FtsIndex``'s data-version stamp."""
        segment = self._segment()  # one small read: a rebuild may commit at any time
        if segment is None:
            return None
        import numpy as np

        state = getattr(self._local, "state", None)
        if state is not None and state.stamp == (stamp, segment.key):
            return segment, state
        conn = self.db.conn
        rows, tokens = keyword_totals.read(conn)
        if rows == 0:
            return None
        avgdl = tokens / rows
        norm = length_norm(segment.lengths, avgdl)
        dirty = np.array(
            [r[0] for r in conn.execute("SELECT chunk_id FROM kw_delta")], dtype=np.int64
        )
        live = np.ones(len(segment.chunk_ids), dtype=bool)
        if len(dirty):
            at = np.searchsorted(segment.chunk_ids, dirty)
            inside = at < len(segment.chunk_ids)
            hit = at[inside][segment.chunk_ids[at[inside]] == dirty[inside]]
            live[hit] = False
        delta = self._delta_rows(tokenizer) if len(dirty) else []
        state = _State(
            (stamp, segment.key),
            rows,
            avgdl,
            norm,
            live,
            bool(live.all()),
            np.flatnonzero(~live),
            delta,
            _delta_postings(delta),
        )
        self._local.state = state
        return segment, state

    def _lists(self, gen: int, keys: Sequence[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each key's ``(positions, weighted frequency)`` in generation ``gen`` (the live
        one, read in the same snapshot); absent keys are absent. Kept between searches
        (``index/term_lists.py``)."""
        return self._kept.lists(gen, keys, lambda missing: self._read_lists(gen, missing))

    def _read_lists(self, gen: int, keys: Sequence[str]) -> term_lists.Lists:
        import numpy as np

        unique = sorted(set(keys))
        marks = ",".join("?" * len(unique))
        parts: dict[str, list[tuple[bytes, bytes, bytes]]] = {}
        for term, ids, head, body in self.db.conn.execute(
            f"SELECT term, ids, head, body FROM kw_postings WHERE gen = ? AND term IN ({marks}) "
            "ORDER BY term, part",
            (gen, *unique),
        ):
            parts.setdefault(term, []).append((ids, head, body))
        found = {}
        for term, rows in parts.items():
            ids, head, body = (b"".join(column) for column in zip(*rows, strict=True))
            freq = HEAD_WEIGHT * np.frombuffer(head, dtype=np.uint16) + BODY_WEIGHT * (
                np.frombuffer(body, dtype=np.uint16)
            )
            found[term] = (np.frombuffer(ids, dtype=np.uint32), freq)
        return found

    def best_per_document(
        self, stamp: tuple, tokenizer: apsw.FTS5Tokenizer, keys: Sequence[str], documents: int
    ) -> list[tuple[int, float]] | None:
        """``FtsIndex.best_per_document`` for the OR of the phrases ``keys`` (in query
        order), or None without a segment. Scores are FTS5's bm25, summed phrase by phrase
        in query order as its C code does, so they match to the last bits; only the
        passages that can reach the top are scored (``index/maxscore.py``)."""
        found = self._terms(stamp, tokenizer, keys)
        if found is None:
            return None
        segment, state, terms, extra = found

        def select(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
            if not state.all_live:
                live = state.live[at]
                at, values = at[live], values[live]
            chunk_ids, doc_ids, scores = _with_extra(segment, at, values, extra)
            return topk.best_per_document(chunk_ids, doc_ids, scores, documents, PRESELECT)

        return maxscore.top_documents(terms, state.norm, documents, select)

    def best_passages(
        self,
        stamp: tuple,
        tokenizer: apsw.FTS5Tokenizer,
        keys: Sequence[str],
        document_ids: Sequence[int],
    ) -> dict[int, int] | None:
        """``FtsIndex.best_passage_of`` for the OR of ``keys``: document id → chunk id of
        its best passage (lowest chunk id on a tie), for those of ``document_ids`` with a
        matching passage; None without a segment.

        Trigger: the document leg cites each ranked document by its best passage, and
        FTS5 found them by scoring every passage the OR matches (at 100k chunks, about
        half of them for a SciFact question) to keep a hundred documents' rows; so did
        this segment at first, 32 / 102 ms CPU p50 / p95 at 1M passages. Outcome: only
        the documents' own passages are scored, from the term lists the keyword leg has
        just read (kept decoded, ``index/term_lists.py``), by ``maxscore.document_scores``
        (the full scoring's bits), with the delta's matching passages beside them."""
        found = self._terms(stamp, tokenizer, keys)
        if found is None:
            return None
        segment, state, terms, extra = found
        at, values = maxscore.document_scores(
            terms, state.norm, segment.by_document, document_ids, state.dead
        )
        chunk_ids, doc_ids, values = _with_extra(segment, at, values, extra)
        return topk.best_passage_of(chunk_ids, doc_ids, values, document_ids)

    def _terms(
        self, stamp: tuple, tokenizer: apsw.FTS5Tokenizer, keys: Sequence[str]
    ) -> tuple[_Segment, _State, list[maxscore.TermList], list[tuple[int, int, float]]] | None:
        """The segment, its state, each key's list with its idf (query order; keys the
        segment lacks left out) and the delta's matching ``(chunk id, document id,
        score)``; None without a segment."""
        with self._snapshot():
            found = self.state(stamp, tokenizer)
            if found is None:
                return None
            segment, state = found
            lists = self._lists(segment.key, keys)
        terms = []
        delta_scores = [0.0] * len(state.delta)
        for key in keys:
            idf = bm25_idf(self._df(state, lists, key), state.rows)
            if key in lists:
                terms.append(maxscore.TermList(idf, *lists[key]))
            for i, f in state.delta_postings.get(key, ()):
                norm = length_norm(state.delta[i].length, state.avgdl)
                delta_scores[i] += term_score(idf, f, norm)
        extra = [
            (r.chunk_id, r.document_id, s)
            for r, s in zip(state.delta, delta_scores, strict=True)
            if s
        ]
        return segment, state, terms, extra

    def _df(self, state: _State, lists: dict, key: str) -> int:
        """Passages holding ``key`` now: the segment's live ones plus the delta's."""
        import numpy as np

        df = state.df.get(key)
        if df is None:
            df = 0
            if key in lists:
                at = lists[key][0]
                df = len(at) if state.all_live else int(np.count_nonzero(state.live[at]))
            df += len(state.delta_postings.get(key, ()))
            state.df[key] = df
        return df

    def doc_frequencies(
        self, stamp: tuple, tokenizer: apsw.FTS5Tokenizer, terms: Iterable[str]
    ) -> dict[str, int] | None:
        """How many chunks hold each term, from the segment and its delta; None without."""
        with self._snapshot():
            found = self.state(stamp, tokenizer)
            if found is None:
                return None
            segment, state = found
            unique = sorted(set(terms))
            missing = [t for t in unique if t not in state.df]
            if missing:
                lists = self._lists(segment.key, missing)
                for t in missing:
                    self._df(state, lists, t)
        return {t: state.df[t] for t in unique if state.df[t]}


def _with_extra(
    segment: _Segment, at: np.ndarray, values: np.ndarray, extra: list[tuple[int, int, float]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The segment passages at ``at`` with their scores ``values`` as (chunk ids,
    document ids, scores), with the delta's matching passages after them."""
    import numpy as np

    chunk_ids, doc_ids = segment.chunk_ids[at], segment.doc_ids[at]
    if extra:
        chunk_ids = np.concatenate([chunk_ids, np.array([e[0] for e in extra], np.int64)])
        doc_ids = np.concatenate([doc_ids, np.array([e[1] for e in extra], np.int64)])
        values = np.concatenate([values, np.array([e[2] for e in extra], np.float64)])
    return chunk_ids, doc_ids, values


def _delta_postings(delta: Sequence[_Tokenized]) -> dict[str, list[tuple[int, float]]]:
    """The delta's own small inverted index: key → (row index, weighted frequency)."""
    found: dict[str, list[tuple[int, float]]] = {}
    for i, row in enumerate(delta):
        for key in row.head.keys() | row.body.keys():
            f = HEAD_WEIGHT * row.head.get(key, 0) + BODY_WEIGHT * row.body.get(key, 0)
            found.setdefault(key, []).append((i, f))
    return found
