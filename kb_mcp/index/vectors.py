"""Vectors per embedding signature: plain SQLite tables, searched with numpy.

Every signature (``embed/base.EmbeddingSignature``: provider, model, dims, text budget,
prefix scheme) has a row in ``embedding_signatures`` and two tables of its own, named by
its key, so vectors of two models are never compared:

- ``vec_codes_<key>(chunk_id, seq, code)``: the sign bits of each vector (``dims`` bits,
  48 bytes at 384 dims), and ``seq``, the generation that stored it. Narrow on purpose:
  it answers "is this chunk embedded?" (the pending anti-join, the counts) and is what
  a search loads into memory.
- ``vec_floats_<key>(chunk_id, embedding)``: the float32 vector, read back by id only
  for the few hundred candidates a search rescores.

Both reference ``chunks(id) ON DELETE CASCADE``: a chunk's vectors leave with it in
every process and on every path, even one that never loads numpy (``--embedder none``);
``remove_chunks`` deletes them explicitly as well, so caches hear of it. Chunk ids are
reused by SQLite (``max(id) + 1``), which is why a vector must never outlive its chunk.

Search (``VectorIndex``), in three stages: hamming distance over the in-memory sign
codes keeps a few thousand, the float query scored against their codes (asymmetric,
``asymmetric_scores``) keeps a few hundred, and those are rescored exactly with their
float vectors read by id. ``python -m kb_mcp.bench.vectors`` measures speed and recall.

Why not sqlite-vec (measured for issue 8 on this machine, 2 shared cores, 100k × 384
unit vectors): a ``vec0`` table returns 400 vectors by rowid in 170 ms (48 ms with
``chunk_size=8``) against 1.8 ms from a plain rowid table; its brute-force KNN takes
93–145 ms; its bit column reads back no faster than a BLOB. Hamming over the codes in
memory takes 2.7 ms p50. Nothing on our path is faster with the extension, and plain
tables need no extension in the processes that only delete.

The cache of codes is refreshed lazily: the ``meta`` counter ``vectors_generation``
moves on every store and removal; a search looks at it at most once a second
(``RELOAD_CHECK_S``) and then loads only the rows stored since (``seq`` above its
watermark). Removed ids stay in the cache until enough have piled up for a full reload
(``STALE_RELOAD_FRACTION``); that is safe, because rescoring reads floats by id and a
vanished id has none.

numpy is imported inside the functions that compute (storing, searching), not at the
top: ``remove_chunks`` runs on every document removal, in keyword-only processes too
(``--embedder none``), and those never import numpy (about 0.1 s of start-up).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw

from kb_mcp.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np

    from kb_mcp.embed.base import EmbeddingSignature

# Three stages: hamming keeps max(limit × 80, 4000) codes, the asymmetric score (float
# query against the codes) keeps max(limit × 8, 400) of them, and those are rescored
# exactly. Measured recall@10 and latency: docs/architecture.md ("Vectors").
PREFILTER_FACTOR = 80
MIN_PREFILTER = 4000
CANDIDATE_FACTOR = 8
MIN_CANDIDATES = 400
RELOAD_CHECK_S = 1.0
# A full reload of the codes once removed ids are more than this share of the cache.
STALE_RELOAD_FRACTION = 0.10
# How long a source's chunk-id mask is trusted when the codes did not change: a new
# location of an existing document changes a source without touching any vector.
SOURCE_MASK_TTL_S = 5.0
# Vectors of removed chunks kept for reuse per signature, newest first: an embedding run
# that ends with nothing pending empties them, and this bounds them meanwhile (a library
# whose embedder is now ``none`` never runs one). 20,000 × 384 floats is 31 MB.
KEPT_LIMIT = 20_000

GENERATION_KEY = "vectors_generation"
REMOVED_KEY = "vectors_removed"
_KEY_RE = re.compile(r"[0-9a-f]{12}")
_HEAD_SEPARATOR = " › "


@dataclass(frozen=True, slots=True)
class SignatureRow:
    """One signature the library holds vectors for, with the last failure, if any."""

    id: int
    key: str
    provider: str
    model: str
    dims: int
    max_chars: int
    prefixes: str
    created_at: str
    last_error: str | None
    last_error_at: str | None

    @property
    def signature(self) -> EmbeddingSignature:
        from kb_mcp.embed.base import EmbeddingSignature

        return EmbeddingSignature(
            self.provider, self.model, self.dims, self.max_chars, self.prefixes
        )


@dataclass(frozen=True, slots=True)
class PendingChunk:
    """A chunk without a vector yet, with the exact text to embed for it."""

    chunk_id: int
    document_id: int
    text: str


def _kept_table(key: str) -> str:
    """A signature's vectors of removed chunks, by the hash of the text they embedded."""
    _tables(key)  # checks the key
    return f"vec_kept_{key}"


def _tables(key: str) -> tuple[str, str]:
    """The codes and floats table of a signature; the key is checked, never user text."""
    if not _KEY_RE.fullmatch(key):
        raise InvalidInput(f"not a signature key: {key!r}")
    return f"vec_codes_{key}", f"vec_floats_{key}"


def _ids_json(ids: Iterable[int]) -> str:
    return json.dumps([int(i) for i in ids])


def _bump(conn: apsw.Connection, key: str, by: int = 1) -> int:
    """Add ``by`` to an integer counter in ``meta``; its new value."""
    row = conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
        "SET value = CAST(value AS INTEGER) + ? RETURNING CAST(value AS INTEGER)",
        (key, str(by), by),
    ).fetchone()
    return int(row[0])


def _counter(conn: apsw.Connection, key: str) -> int:
    row = conn.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else 0


def generation(conn: apsw.Connection) -> int:
    """Moves whenever any vector is stored or removed; caches compare it."""
    return _counter(conn, GENERATION_KEY)


# --- signatures -----------------------------------------------------------------------

# The columns of a ``SignatureRow``, in its fields' order; the PostgreSQL index reads the
# same table (``index/postgres/vectors.py``).
SIGNATURE_COLUMNS = (
    "id, key, provider, model, dims, max_chars, prefixes, created_at, last_error, last_error_at"
)


def signatures(conn: apsw.Connection) -> list[SignatureRow]:
    """Every signature with vector tables, oldest first."""
    cursor = conn.execute(f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures ORDER BY id")
    return [SignatureRow(*row) for row in cursor]


def signature_row(conn: apsw.Connection, sig_id: int) -> SignatureRow | None:
    row = conn.execute(
        f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures WHERE id = ?", (sig_id,)
    ).fetchone()
    return SignatureRow(*row) if row else None


def find_signature(conn: apsw.Connection, key: str) -> SignatureRow | None:
    row = conn.execute(
        f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures WHERE key = ?", (key,)
    ).fetchone()
    return SignatureRow(*row) if row else None


def ensure_signature(conn: apsw.Connection, sig: EmbeddingSignature, now: str = "") -> int:
    """The id of ``sig``'s row, created with its two tables if new. Call in ``db.write()``."""
    codes, floats = _tables(sig.key)
    found = find_signature(conn, sig.key)
    if found is not None:
        return found.id
    created = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conn.execute(
        "INSERT INTO embedding_signatures(key, provider, model, dims, max_chars, prefixes, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (sig.key, sig.provider, sig.model, sig.dims, sig.max_chars, sig.prefixes, created),
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {codes} (chunk_id INTEGER PRIMARY KEY "
        "REFERENCES chunks(id) ON DELETE CASCADE, seq INTEGER NOT NULL, code BLOB NOT NULL)"
    )
    conn.execute(f"CREATE INDEX IF NOT EXISTS {codes}_seq ON {codes}(seq)")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {floats} (chunk_id INTEGER PRIMARY KEY "
        "REFERENCES chunks(id) ON DELETE CASCADE, embedding BLOB NOT NULL)"
    )
    return int(conn.last_insert_rowid())


def drop_signature(conn: apsw.Connection, key: str) -> bool:
    """Forget one signature and its vectors; False when there was none. In ``db.write()``."""
    codes, floats = _tables(key)
    if find_signature(conn, key) is None:
        return False
    conn.execute(f"DROP TABLE IF EXISTS {codes}")
    conn.execute(f"DROP TABLE IF EXISTS {floats}")
    conn.execute(f"DROP TABLE IF EXISTS {_kept_table(key)}")
    conn.execute("DELETE FROM embedding_signatures WHERE key = ?", (key,))
    _bump(conn, GENERATION_KEY)
    return True


def record_failure(
    conn: apsw.Connection, sig_id: int, document_ids: Iterable[int], reason: str, now: str
) -> None:
    """A provider call failed: its documents are ``embed_pending`` and the reason is kept."""
    conn.execute(
        "UPDATE embedding_signatures SET last_error = ?, last_error_at = ? WHERE id = ?",
        (reason, now, sig_id),
    )
    conn.execute(
        "UPDATE documents SET embed_pending = 1 WHERE id IN (SELECT value FROM json_each(?))",
        (_ids_json(document_ids),),
    )


def record_success(conn: apsw.Connection, sig_id: int, document_ids: Iterable[int]) -> None:
    """A batch was stored: its documents are no longer waiting and the last error is over."""
    conn.execute(
        "UPDATE embedding_signatures SET last_error = NULL, last_error_at = NULL "
        "WHERE id = ? AND last_error IS NOT NULL",
        (sig_id,),
    )
    conn.execute(
        "UPDATE documents SET embed_pending = 0 WHERE embed_pending = 1 AND id IN "
        "(SELECT value FROM json_each(?))",
        (_ids_json(document_ids),),
    )


def failed_documents(conn: apsw.Connection) -> int:
    """Documents whose last embedding attempt failed (waiting for a retry).

    Only ``record_failure`` sets the flag, always under a signature, and signatures are
    never deleted: with none, nothing was ever embedded, so nothing failed, and the scan
    is skipped. It reads every document's row past its text (no index holds the flag):
    47 ms of CPU at 100k chunks right after a change (``bench web`` library, keyword
    only), about half the library page's cold time.
    """
    if conn.execute("SELECT 1 FROM embedding_signatures LIMIT 1").fetchone() is None:
        return 0
    return conn.execute("SELECT COUNT(*) FROM documents WHERE embed_pending = 1").fetchone()[0]


# --- what to embed --------------------------------------------------------------------


def embedded_among(
    conn: apsw.Connection, sig_id: int, chunk_ids: Sequence[int], through_seq: int | None = None
) -> set[int]:
    """Those of ``chunk_ids`` that have a vector of signature ``sig_id`` (primary-key
    lookups: a search asks this of its few dozen keyword candidates); with
    ``through_seq``, only vectors stored at or below that ``seq``, the ones a cached
    snapshot of that watermark holds (``VectorIndex.loaded_through``)."""
    row = signature_row(conn, sig_id)
    if row is None or not chunk_ids:
        return set()
    codes, _ = _tables(row.key)
    marks = ",".join("?" * len(chunk_ids))
    query = f"SELECT chunk_id FROM {codes} WHERE chunk_id IN ({marks})"
    params: tuple[int, ...] = tuple(chunk_ids)
    if through_seq is not None:
        query += " AND seq <= ?"
        params += (through_seq,)
    return {int(r[0]) for r in conn.execute(query, params)}


def embedding_text(title: str, heading_path: Sequence[str], text: str, max_chars: int) -> str:
    """The text embedded for a chunk: title and heading path, a blank line, the chunk.

    Only here are the title and headings prepended (issue 8): the stored, cited and
    keyword-indexed text stays the chunk's own. Cut to the signature's ``max_chars``.
    """
    head = [title.strip()] + [h.strip() for h in heading_path if h and h.strip() != title.strip()]
    prefix = _HEAD_SEPARATOR.join(part for part in head if part)
    full = f"{prefix}\n\n{text}" if prefix else text
    return full[:max_chars]


def first_embedding_texts(conn: apsw.Connection, limit: int, max_chars: int) -> list[str]:
    """The embedding texts of the first ``limit`` chunks in chunk order (the queue's),
    vectors or not: what ``bench/embed_rate.py`` times the model on."""
    rows = conn.execute(
        "SELECT d.title, c.heading_path, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_id ORDER BY c.id LIMIT ?",
        (limit,),
    )
    return [embedding_text(title, json.loads(path), text, max_chars) for title, path, text in rows]


def pending_chunks(
    conn: apsw.Connection, sig_id: int, limit: int, after_id: int = 0
) -> list[PendingChunk]:
    """Up to ``limit`` chunks with id > ``after_id`` that have no vector of ``sig_id``."""
    row = signature_row(conn, sig_id)
    if row is None:
        return []
    codes, _ = _tables(row.key)
    cursor = conn.execute(
        "SELECT c.id, c.document_id, d.title, c.heading_path, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_id "
        f"WHERE c.id > ? AND NOT EXISTS (SELECT 1 FROM {codes} v WHERE v.chunk_id = c.id) "
        "ORDER BY c.id LIMIT ?",
        (after_id, limit),
    )
    return [
        PendingChunk(cid, doc_id, embedding_text(title, json.loads(path), text, row.max_chars))
        for cid, doc_id, title, path, text in cursor
    ]


def totals(conn: apsw.Connection, sig_id: int) -> tuple[int, int]:
    """(chunks embedded under ``sig_id``, chunks still pending)."""
    row = signature_row(conn, sig_id)
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    if row is None:
        return 0, chunks
    codes, _ = _tables(row.key)
    embedded = conn.execute(f"SELECT COUNT(*) FROM {codes}").fetchone()[0]
    return embedded, chunks - embedded


def coverage(conn: apsw.Connection, sig_id: int) -> dict[int, tuple[int, int]]:
    """``{source_id: (embedded, pending)}`` chunks under ``sig_id``; a shared document
    counts in every source that holds it."""
    row = signature_row(conn, sig_id)
    if row is None:
        return {}
    codes, _ = _tables(row.key)
    cursor = conn.execute(
        "SELECT s.source_id, COUNT(v.chunk_id), COUNT(*) - COUNT(v.chunk_id) FROM "
        "(SELECT DISTINCT l.source_id, c.id AS chunk_id FROM locations l "
        " JOIN chunks c ON c.document_id = l.document_id) s "
        f"LEFT JOIN {codes} v ON v.chunk_id = s.chunk_id GROUP BY s.source_id"
    )
    return {source_id: (embedded, pending) for source_id, embedded, pending in cursor}


# --- writing vectors ------------------------------------------------------------------


def sign_codes(matrix: np.ndarray) -> np.ndarray:
    """Each row's sign bits, packed: ``n × ceil(dims / 8)`` bytes."""
    import numpy as np

    return np.packbits(np.asarray(matrix) > 0, axis=1)


def store_vectors(
    conn: apsw.Connection, sig_id: int, chunk_ids: Sequence[int], matrix: np.ndarray
) -> int:
    """Store one vector per chunk id (unit-length float32 rows); how many were stored.

    Ids whose chunk vanished since they were read are skipped. Call inside
    ``db.write()``: the codes and the floats of a batch commit together.
    """
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None:
        raise InvalidInput(f"no embedding signature with id {sig_id}")
    vectors = np.ascontiguousarray(matrix, dtype=np.float32)
    if vectors.shape != (len(chunk_ids), row.dims):
        shape = " × ".join(map(str, vectors.shape))
        raise InvalidInput(f"expected {len(chunk_ids)} × {row.dims} vectors, got {shape}")
    codes_table, floats_table = _tables(row.key)
    alive = {
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
            (_ids_json(chunk_ids),),
        )
    }
    keep = [i for i, cid in enumerate(chunk_ids) if cid in alive]
    if not keep:
        return 0
    seq = _bump(conn, GENERATION_KEY)
    codes = sign_codes(vectors)
    conn.executemany(
        f"INSERT OR REPLACE INTO {codes_table}(chunk_id, seq, code) VALUES (?, ?, ?)",
        ((int(chunk_ids[i]), seq, codes[i].tobytes()) for i in keep),
    )
    conn.executemany(
        f"INSERT OR REPLACE INTO {floats_table}(chunk_id, embedding) VALUES (?, ?)",
        ((int(chunk_ids[i]), vectors[i].tobytes()) for i in keep),
    )
    return len(keep)


def remove_chunks(conn: apsw.Connection, chunk_ids: Iterable[int]) -> int:
    """Delete these chunks' vectors under every signature; how many rows went.

    Call inside ``db.write()``, before the chunk rows are deleted (the cascade would
    take them too, but this also tells the caches). The vectors are kept by the hash of
    the text they embedded until the next complete embedding run (``reuse_kept``): a
    re-synced file removes its old chunks before its new ones exist, and most of the new
    ones say what an old one said.
    """
    rows = signatures(conn)
    if not rows:
        return 0
    ids = _ids_json(chunk_ids)
    removed = 0
    matching = "WHERE chunk_id IN (SELECT value FROM json_each(?))"
    for row in rows:
        codes, floats = _tables(row.key)
        _keep_removed(conn, row, ids)
        conn.execute(f"DELETE FROM {floats} {matching}", (ids,))
        conn.execute(f"DELETE FROM {codes} {matching}", (ids,))
        removed += conn.changes()
    if removed:
        _bump(conn, GENERATION_KEY)
        _bump(conn, REMOVED_KEY, removed)
    return removed


def text_hash(text: str) -> str:
    """The key a vector is kept under: the exact text that was embedded for it."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _keep_removed(conn: apsw.Connection, row: SignatureRow, ids_json: str) -> None:
    """Copy the float vectors of the chunks in ``ids_json`` into the signature's kept
    table, keyed by the hash of their embedding text (their documents still exist); the
    newest ``KEPT_LIMIT`` stay."""
    _, floats = _tables(row.key)
    kept = _kept_table(row.key)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {kept} "
        "(id INTEGER PRIMARY KEY, text_hash TEXT NOT NULL UNIQUE, embedding BLOB NOT NULL)"
    )
    found = conn.execute(
        "SELECT d.title, c.heading_path, c.text, f.embedding FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id JOIN {floats} f ON f.chunk_id = c.id "
        "WHERE c.id IN (SELECT value FROM json_each(?))",
        (ids_json,),
    )
    conn.executemany(
        f"INSERT OR REPLACE INTO {kept}(text_hash, embedding) VALUES (?, ?)",
        (
            (text_hash(embedding_text(title, json.loads(path), text, row.max_chars)), blob)
            for title, path, text, blob in found
        ),
    )
    conn.execute(f"DELETE FROM {kept} WHERE id <= (SELECT MAX(id) FROM {kept}) - ?", (KEPT_LIMIT,))


def reuse_kept(conn: apsw.Connection, sig_id: int, chunks: Sequence[PendingChunk]) -> set[int]:
    """Store, for each of ``chunks`` whose exact embedding text a removed chunk had, that
    chunk's kept vector; the ids served so. Call inside ``db.write()``.

    The same text under the same signature is the same vector, so nothing is lost: an
    edit re-embeds only the chunks it changed, a moved or re-added file none.
    """
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None or not chunks or not has_kept(conn, sig_id):
        return set()
    hashes = {text_hash(chunk.text) for chunk in chunks}
    found = dict(
        conn.execute(
            f"SELECT text_hash, embedding FROM {_kept_table(row.key)} "
            "WHERE text_hash IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(hashes)),),
        )
    )
    served = [(c.chunk_id, found[h]) for c in chunks if (h := text_hash(c.text)) in found]
    if not served:
        return set()
    matrix = np.frombuffer(b"".join(blob for _, blob in served), dtype=np.float32)
    ids = [chunk_id for chunk_id, _ in served]
    store_vectors(conn, sig_id, ids, matrix.reshape(len(ids), row.dims))
    return set(ids)


def forget_kept(conn: apsw.Connection, sig_id: int) -> None:
    """Drop the kept vectors of ``sig_id``: nothing pending can use them any more."""
    row = signature_row(conn, sig_id)
    if row is not None:
        conn.execute(f"DROP TABLE IF EXISTS {_kept_table(row.key)}")


def has_kept(conn: apsw.Connection, sig_id: int) -> bool:
    """Whether ``sig_id`` holds kept vectors of removed chunks (a read: the queue asks
    before it takes the write lock for ``reuse_kept`` or ``forget_kept``)."""
    row = signature_row(conn, sig_id)
    if row is None:
        return False
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_kept_table(row.key),)
    )
    return found.fetchone() is not None


def forget_all(conn: apsw.Connection) -> None:
    """Every vector goes (a rebuild: chunk ids start over); signatures stay, empty."""
    removed = 0
    for row in signatures(conn):
        codes, floats = _tables(row.key)
        removed += conn.execute(f"SELECT COUNT(*) FROM {codes}").fetchone()[0]
        conn.execute(f"DELETE FROM {floats}")
        conn.execute(f"DELETE FROM {codes}")
        conn.execute(f"DROP TABLE IF EXISTS {_kept_table(row.key)}")
    _bump(conn, GENERATION_KEY)
    _bump(conn, REMOVED_KEY, removed)


def all_vectors(conn: apsw.Connection, sig_id: int) -> tuple[list[int], np.ndarray]:
    """(chunk ids, float vectors) of every vector stored under ``sig_id``, by chunk id.

    For benches that reuse a library's model vectors (``bench/model_vectors.py``); a
    search never reads all floats (they stay on disk, issue 10's memory budget).
    """
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None:
        return [], np.zeros((0, 0), dtype=np.float32)
    _, floats_table = _tables(row.key)
    found = conn.execute(
        f"SELECT chunk_id, embedding FROM {floats_table} ORDER BY chunk_id"
    ).fetchall()
    ids = [int(r[0]) for r in found]
    matrix = np.frombuffer(b"".join(r[1] for r in found), dtype=np.float32)
    return ids, matrix.reshape(len(ids), row.dims)


def iter_vectors(
    conn: apsw.Connection, sig_id: int, batch: int = 10_000
) -> Iterator[tuple[list[int], np.ndarray]]:
    """``all_vectors`` a batch at a time, by chunk id: moving a library reads every vector
    once, and a million of them would not fit in memory at once."""
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None:
        return
    _, floats_table = _tables(row.key)
    after = -1
    while found := conn.execute(
        f"SELECT chunk_id, embedding FROM {floats_table} WHERE chunk_id > ? "
        "ORDER BY chunk_id LIMIT ?",
        (after, batch),
    ).fetchall():
        ids = [int(r[0]) for r in found]
        matrix = np.frombuffer(b"".join(r[1] for r in found), dtype=np.float32)
        yield ids, matrix.reshape(len(ids), row.dims)
        after = ids[-1]


# --- search ---------------------------------------------------------------------------


def _code_words(codes: np.ndarray) -> np.ndarray:
    """Packed code rows (``n × bytes``) → ``words × n`` uint64, each word contiguous."""
    import numpy as np

    n, width = codes.shape
    if width % 8 == 0 and codes.flags.c_contiguous:
        # Whole words already (384 dims: 48 bytes): one copy, the transposed one; a
        # padded copy first was 14 MB more at the peak of a 300k-code load (issue 10).
        return np.ascontiguousarray(codes.view(np.uint64).T)
    padded = np.zeros((n, -(-width // 8) * 8), dtype=np.uint8)
    padded[:, :width] = codes
    return np.ascontiguousarray(padded.view(np.uint64).T)


def asymmetric_scores(words: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each column's code, the sum of the query's components where its bit is set.

    That ranks codes as the dot product of the float query with the ±1 code would
    (``2 × sum − Σ query``), much closer to the true cosine than hamming against the
    query's own signs. One 256-entry table per code byte, then one flat gather.
    """
    import numpy as np

    width = words.shape[0] * 8
    code_bytes = np.ascontiguousarray(words.T).view(np.uint8)  # columns × bytes
    padded = np.zeros(width * 8, dtype=np.float32)
    padded[: query.shape[0]] = query
    # packbits order: the first component is the byte's highest bit.
    bits = ((np.arange(256)[:, None] >> np.arange(7, -1, -1)[None, :]) & 1).astype(np.float32)
    table = (bits @ padded.reshape(width, 8).T).T.ravel()  # byte position × 256 values
    offsets = (np.arange(width, dtype=np.uint32) * 256)[None, :]
    return table[code_bytes + offsets].sum(axis=1)


def hamming(words: np.ndarray, query_words: np.ndarray) -> np.ndarray:
    """Bits differing between each column of ``words`` and ``query_words`` (uint16).

    Word by word over contiguous rows: 2.7 ms p50 for 100k × 384 bits here, against
    9–13 ms for one ``bitwise_count`` over the row-major matrix.
    """
    import numpy as np

    distance = np.zeros(words.shape[1], dtype=np.uint16)
    scratch = np.empty(words.shape[1], dtype=np.uint64)
    for w in range(words.shape[0]):
        np.bitwise_xor(words[w], query_words[w], out=scratch)
        distance += np.bitwise_count(scratch)
    return distance


@dataclass(frozen=True, slots=True)
class _Codes:
    """One signature's codes in memory: an immutable snapshot, replaced on refresh."""

    ids: np.ndarray  # int64, one per column of ``words``; may repeat after re-embedding
    words: np.ndarray  # uint64, words × n
    watermark: int  # the highest ``seq`` loaded
    generation: int  # ``vectors_generation`` when last compared
    removed_at_load: int  # ``vectors_removed`` at the last full load
    checked_at: float


class VectorIndex:
    """Approximate nearest neighbours over one library's vectors; one per ``Library``.

    Thread-safe: searches from several worker threads share the cached codes (each
    passes its own connection); a refresh replaces the snapshot under a lock.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._codes: dict[int, _Codes] = {}
        self._masks: dict[tuple[int, int], tuple[int, float, np.ndarray]] = {}

    def search(
        self,
        conn: apsw.Connection,
        sig_id: int,
        query_vector: np.ndarray,
        limit: int,
        source_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, cosine similarity)`` of the ``limit`` nearest chunks, best first.

        Only vectors of ``sig_id`` are compared; ``source_id`` restricts the candidates to
        that source's chunks. An unknown (dropped) signature has no neighbours.
        """
        import numpy as np

        row = signature_row(conn, sig_id)
        if row is None or limit <= 0:
            return []
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != row.dims:
            raise InvalidInput(
                f"the query vector has {query.shape[0]} dims; signature {row.key} has {row.dims}"
            )
        norm = float(np.linalg.norm(query))
        if norm == 0 or not np.isfinite(norm):
            return []
        query = query / norm
        codes = self._snapshot(conn, row)
        ids, words = codes.ids, codes.words
        if source_id is not None:
            mask = self._source_mask(conn, row.id, source_id, codes)
            ids, words = ids[mask], words[:, mask]
        if ids.size == 0:
            return []
        columns = np.arange(ids.size)
        prefilter = max(limit * PREFILTER_FACTOR, MIN_PREFILTER)
        if prefilter < ids.size:
            distance = hamming(words, _code_words(sign_codes(query[None, :]))[:, 0])
            columns = np.argpartition(distance, prefilter - 1)[:prefilter]
        wanted = max(limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
        if wanted < columns.size:
            score = asymmetric_scores(words[:, columns], query)
            columns = columns[np.argpartition(-score, wanted - 1)[:wanted]]
        return _rescore(conn, row, np.unique(ids[columns]), query, limit)

    def warm(self, conn: apsw.Connection, sig_id: int) -> None:
        """Load (or refresh) a signature's codes now, so the first search does not."""
        row = signature_row(conn, sig_id)
        if row is not None:
            self._snapshot(conn, row)

    def loaded_through(self, sig_id: int) -> int | None:
        """The highest ``seq`` of the codes held in memory for ``sig_id`` (None: none held).

        A search sees only those codes, and they are compared with the table at most
        once a second (``RELOAD_CHECK_S``): a vector stored since is in the table but not
        yet findable. Read before a search, it bounds what that search can see (a
        refresh only adds), so the engine knows which keyword candidates to stand in for
        (``EmbeddedLeg.unembedded``)."""
        current = self._codes.get(sig_id)
        return None if current is None else current.watermark

    def discard(self, sig_id: int) -> None:
        """Forget a dropped signature's cached codes."""
        with self._lock:
            self._codes.pop(sig_id, None)
            for key in [k for k in self._masks if k[0] == sig_id]:
                del self._masks[key]

    def _snapshot(self, conn: apsw.Connection, row: SignatureRow) -> _Codes:
        current = self._codes.get(row.id)
        now = self._clock()
        if current is not None and now - current.checked_at < RELOAD_CHECK_S:
            return current
        with self._lock:
            current = self._codes.get(row.id)
            if current is not None and now - current.checked_at < RELOAD_CHECK_S:
                return current
            fresh = _refresh(conn, row, current, now)
            self._codes[row.id] = fresh
            return fresh

    def _source_mask(
        self, conn: apsw.Connection, sig_id: int, source_id: int, codes: _Codes
    ) -> np.ndarray:
        """Which cached columns belong to chunks of ``source_id``."""
        import numpy as np

        cached = self._masks.get((sig_id, source_id))
        now = self._clock()
        if cached is not None and cached[0] == id(codes) and now - cached[1] < SOURCE_MASK_TTL_S:
            return cached[2]
        chunk_ids = np.fromiter(
            (
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT c.id FROM locations l JOIN chunks c "
                    "ON c.document_id = l.document_id WHERE l.source_id = ?",
                    (source_id,),
                )
            ),
            dtype=np.int64,
        )
        mask = np.isin(codes.ids, chunk_ids)
        self._masks[(sig_id, source_id)] = (id(codes), now, mask)
        return mask


def _refresh(
    conn: apsw.Connection, row: SignatureRow, current: _Codes | None, now: float
) -> _Codes:
    """The snapshot brought up to date: unchanged, extended by new rows, or reloaded."""
    import numpy as np

    gen, removed = generation(conn), _counter(conn, REMOVED_KEY)
    if current is not None and gen == current.generation:
        return _Codes(
            current.ids, current.words, current.watermark, gen, current.removed_at_load, now
        )
    stale = current is not None and (
        removed - current.removed_at_load > STALE_RELOAD_FRACTION * max(current.ids.size, 100)
    )
    if current is None or stale:
        ids, words, watermark = _load_codes(conn, row, after_seq=None)
        return _Codes(ids, words, watermark, gen, removed, now)
    ids, words, watermark = _load_codes(conn, row, after_seq=current.watermark)
    if ids.size:
        ids = np.concatenate([current.ids, ids])
        words = np.concatenate([current.words, words], axis=1)
    else:
        ids, words = current.ids, current.words
    return _Codes(ids, words, max(watermark, current.watermark), gen, current.removed_at_load, now)


def _load_codes(
    conn: apsw.Connection, row: SignatureRow, after_seq: int | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids, words, highest seq) of the codes stored after ``after_seq`` (all: None).

    The watermark is the highest ``seq`` actually read: writers take ``seq`` values in
    commit order, so every row at or below it has been seen.
    """
    import numpy as np

    codes_table, _ = _tables(row.key)
    sql = f"SELECT chunk_id, seq, code FROM {codes_table}"
    params: tuple[int, ...] = ()
    if after_seq is not None:
        sql += " WHERE seq > ?"
        params = (after_seq,)
    # ids in a typed array and the codes read in place: a list of Python ints and a
    # bytes copy of the blob were 25 MB more at a 300k-code load (issue 10 memory).
    ids = array("q")
    blob = bytearray()
    watermark = after_seq or 0
    for chunk_id, seq, code in conn.execute(sql, params):
        ids.append(chunk_id)
        blob += code
        watermark = max(watermark, seq)
    width = -(-row.dims // 8)
    words = _code_words(np.frombuffer(blob, dtype=np.uint8).reshape(len(ids), width))
    del blob  # before the ids' copy: the peak is the blob and its transposed copy
    return np.array(ids, dtype=np.int64), words, watermark


def _rescore(
    conn: apsw.Connection, row: SignatureRow, candidates: np.ndarray, query: np.ndarray, limit: int
) -> list[tuple[int, float]]:
    """Exact cosine of each candidate that still has a vector; the best ``limit``."""
    import numpy as np

    _, floats_table = _tables(row.key)
    found = conn.execute(
        f"SELECT chunk_id, embedding FROM {floats_table} "
        "WHERE chunk_id IN (SELECT value FROM json_each(?))",
        (_ids_json(candidates.tolist()),),
    ).fetchall()
    if not found:
        return []
    chunk_ids, blobs = zip(*found, strict=True)
    ids = np.array(chunk_ids, dtype=np.int64)
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), row.dims)
    similarity = matrix @ query
    order = np.lexsort((ids, -similarity))[:limit]  # best first; ties by chunk id
    return [(int(ids[i]), float(similarity[i])) for i in order]
