"""Vectors per embedding signature on PostgreSQL: pgvector columns and an HNSW index.

The same surface as ``index/vectors.py`` (the SQLite store's), function for function, so
``embed/active.py``, ``embed/queue.py`` and search call either one. Every signature
(``embed/base.EmbeddingSignature``) has a row in ``embedding_signatures`` and two tables
of its own, named by its key, so vectors of two models are never compared:

- ``vec_<key>(chunk_id, embedding vector(dims))`` with an HNSW index: the vectors a
  search ranks, and the pending anti-join (``pending_chunks``, ``totals``) reads.
- ``vec_kept_<key>(id, text_hash, embedding)``: vectors of removed chunks kept for reuse
  by the exact text they embedded (``reuse_kept``), as on SQLite. Created with the
  signature, not on first use as on SQLite: two servers creating one table at the same
  moment would collide on PostgreSQL's catalog.

``vec_<key>.chunk_id`` references ``chunks(id) ON DELETE CASCADE``: a chunk's vector
leaves with it on every path and every machine.

Scores mean what they mean on SQLite: the inner product of the stored (unit) vector
with the normalized question, the cosine (``vector_ip_ops``; pgvector's ``<#>`` is its
negative). The index form depends on the dimensions, since pgvector's HNSW indexes
``vector`` up to 2,000 dims, ``halfvec`` up to 4,000 and ``bit`` up to 64,000, and a
``vector`` column holds up to 16,000 (``_Form``): up to 2,000 the index ranks the stored
vectors themselves; above, it ranks a half-precision or sign-bit copy (an expression
index: the column keeps full floats) and the candidates it finds are rescored exactly
with the stored floats, so a score is always the float inner product.

How the results compare with exact KNN (numpy over every vector), and why: HNSW is
approximate. A search walks the graph keeping ``ef_search = max(EF_SEARCH, limit)``
candidates (set per query, ``SET LOCAL``), and the graph only links each vector to a few
near ones (m 16), so a true neighbour the walk never reaches is missed. Measured
(``python -m kb_mcp.bench.pg_vectors``, docs/scale.md "Vectors"), recall@10 at the
default ``ef_search`` 100: 1.0 on 16,000 real all-MiniLM-L6-v2 passage vectors, 0.992
at 100k near-copies of them (recall@100 0.971 for the vector leg's 100), but 0.27 at
100k uniformly random directions, where every vector is about as far as every other
and the walk wanders (the SQLite index's exhaustive sign-code pass gets 0.77 there).
On a few hundred vectors the walk reaches every true neighbour: tests/test_postgres_vectors.py
checks the answers against the SQLite index's, exact at that size.

A filter (a source's chunks): a source holding at most ``EXACT_BELOW`` chunks is
searched exactly, over its own vectors read by id (faster than the graph there, and
exact). A larger one goes through the index, the filter applied to the index scan's
rows: pgvector 0.8's iterative scan (``hnsw.iterative_scan = relaxed_order``) keeps
walking the graph until ``limit`` rows pass the filter or ``MAX_SCAN_TUPLES`` were
visited, so the source still gets ``limit`` of its chunks. Rows come back in nearly
distance order (relaxed), so they are sorted again, ties by chunk id as on SQLite.

There is no cache in the process, unlike SQLite's in-memory codes: the index lives in
the server, every search sees every committed vector (``loaded_through`` is None), and
several processes on several machines share it.

Connections: every function takes a psycopg 3 connection (its own SQL is in psycopg's
``%s`` style; the statements use binary COPY and ``SET LOCAL``, which are this engine's
own). Writes run inside the caller's transaction.
"""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

from kb_mcp.errors import InvalidInput
from kb_mcp.index.vectors import (
    GENERATION_KEY,
    KEPT_LIMIT,
    SIGNATURE_COLUMNS,
    PendingChunk,
    SignatureRow,
    embedding_text,
    text_hash,
)

if TYPE_CHECKING:
    import numpy as np

    from kb_mcp.embed.base import EmbeddingSignature

MIGRATIONS: list[tuple[str, str]] = [
    (
        "vectors: the pgvector extension (embedding_signatures is the store schema's)",
        """
CREATE EXTENSION IF NOT EXISTS vector;
""",
    ),
]

# HNSW graph parameters: pgvector's defaults, kept on the evidence of docs/scale.md
# ("Vectors"): at 100k real-like vectors recall@10 0.99+ and recall@100 0.975 with them;
# ef_construction 32 halves the build (17 s against 40) and drops recall@100 to 0.943.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
# Candidates the graph search keeps (pgvector's default is 40, which would also cap a
# search's results at 40: the vector leg asks for 100). docs/scale.md has recall and
# latency at 40 / 100 / 200.
EF_SEARCH = 100
MAX_EF_SEARCH = 1000  # pgvector's limit
# Rows an iterative scan may visit before it gives up on a filter (pgvector's default is
# 20,000): a source holding 1 % of a million chunks needs ~10,000 for 100 results.
MAX_SCAN_TUPLES = 100_000
# A source holding at most this many chunks is searched exactly, over its own vectors
# read by id: 1,000 of them take about 9 ms, against about 30 ms for the iterative scan
# that finds 10 of them among 100k (docs/scale.md, "Vectors"). The exact path grows with
# the source (about 9 µs a chunk), the iterative one with limit ÷ the source's share;
# for the vector leg's 100 they meet near here at 100k to 1M (an estimate).
EXACT_BELOW = 5_000
# Above the ``vector`` index limit the index ranks a lossy copy; this many candidates per
# result are rescored exactly (as SQLite's index rescores its sign-code candidates).
RESCORE_FACTOR = 8
MIN_RESCORE = 400

_KEY_RE = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True, slots=True)
class _Form:
    """How a signature's vectors are indexed: the indexed expression, its operator class
    and distance operator, the question's cast to match, and whether the index's order
    is exact (else its candidates are rescored with the stored floats)."""

    expression: str  # over the column ``embedding``
    opclass: str
    operator: str
    query: str  # over the parameter, a ``vector(dims)``
    exact: bool


def _form(dims: int) -> _Form:
    if dims < 1 or dims > 16_000:
        raise InvalidInput(f"pgvector stores 1 to 16,000 dimensions, not {dims:,}")
    if dims <= 2000:
        return _Form("embedding", "vector_ip_ops", "<#>", "{q}", True)
    if dims <= 4000:
        half = f"halfvec({dims})"
        return _Form(f"(embedding::{half})", "halfvec_ip_ops", "<#>", f"{{q}}::{half}", False)
    bits = f"bit({dims})"
    return _Form(
        f"(binary_quantize(embedding)::{bits})",
        "bit_hamming_ops",
        "<~>",
        f"binary_quantize({{q}})::{bits}",
        False,
    )


def _table(key: str) -> str:
    """The vectors table of a signature; the key is checked, never user text."""
    if not _KEY_RE.fullmatch(key):
        raise InvalidInput(f"not a signature key: {key!r}")
    return f"vec_{key}"


def _kept_table(key: str) -> str:
    """A signature's vectors of removed chunks, by the hash of the text they embedded."""
    return f"vec_kept_{_table(key)[4:]}"


def _bump(conn: psycopg.Connection, key: str, by: int = 1) -> int:
    """Add ``by`` to an integer counter in ``meta``; its new value."""
    row = conn.execute(
        "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
        "SET value = (CAST(meta.value AS bigint) + %s)::text RETURNING CAST(value AS bigint)",
        (key, str(by), by),
    ).fetchone()
    return int(row[0])


def generation(conn: psycopg.Connection) -> int:
    """Moves whenever any vector is stored or removed; caches compare it."""
    row = conn.execute(
        "SELECT CAST(value AS bigint) FROM meta WHERE key = %s", (GENERATION_KEY,)
    ).fetchone()
    return int(row[0]) if row else 0


class _Vector:
    """One float32 vector as a query parameter, sent in pgvector's binary form."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = values


class _VectorDumper(Dumper):
    """``_Vector`` → pgvector's binary input (``vector_recv``: dims, an unused int16, then
    big-endian float4s). The type is left to the server (oid 0), which reads it from the
    statement's ``::vector(dims)``, so no connection needs the extension's type looked up.
    0.1 ms for 384 dims, against 1.7 ms for the same floats as a Python list (and about
    as much formatted as text), against a search of 2.6 ms p50 at 100k."""

    format = Format.BINARY
    oid = 0

    def dump(self, obj: _Vector) -> bytes:
        values = obj.values
        return struct.pack(">HH", values.shape[0], 0) + values.astype(">f4").tobytes()


# Registered once for the whole process: the class is this module's own.
psycopg.adapters.register_dumper(_Vector, _VectorDumper)


# --- signatures -----------------------------------------------------------------------


def signatures(conn: psycopg.Connection) -> list[SignatureRow]:
    """Every signature with vector tables, oldest first."""
    cursor = conn.execute(f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures ORDER BY id")
    return [SignatureRow(*row) for row in cursor]


def signature_row(conn: psycopg.Connection, sig_id: int) -> SignatureRow | None:
    row = conn.execute(
        f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures WHERE id = %s", (sig_id,)
    ).fetchone()
    return SignatureRow(*row) if row else None


def find_signature(conn: psycopg.Connection, key: str) -> SignatureRow | None:
    row = conn.execute(
        f"SELECT {SIGNATURE_COLUMNS} FROM embedding_signatures WHERE key = %s", (key,)
    ).fetchone()
    return SignatureRow(*row) if row else None


def ensure_signature(conn: psycopg.Connection, sig: EmbeddingSignature, now: str = "") -> int:
    """The id of ``sig``'s row, created with its tables and index if new. In a transaction.

    The row is inserted first: a second server creating the same signature waits on its
    unique key until the first commits, and then finds the row and the tables.
    """
    _form(sig.dims)  # refuses dims pgvector cannot store before anything is written
    created = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    inserted = conn.execute(
        "INSERT INTO embedding_signatures(key, provider, model, dims, max_chars, prefixes, "
        "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING "
        "RETURNING id",
        (sig.key, sig.provider, sig.model, sig.dims, sig.max_chars, sig.prefixes, created),
    ).fetchone()
    if inserted is None:
        found = find_signature(conn, sig.key)
        assert found is not None  # the conflicting row is committed
        return found.id
    create_tables(conn, sig.key, sig.dims)
    return int(inserted[0])


def create_tables(conn: psycopg.Connection, key: str, dims: int, *, index: bool = True) -> None:
    """A signature's vectors table (with its HNSW index, unless ``index`` is False: a
    bulk load builds it after, ``build_index``) and its kept table. In a transaction."""
    table, kept = _table(key), _kept_table(key)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (chunk_id bigint PRIMARY KEY "
        f"REFERENCES chunks(id) ON DELETE CASCADE, embedding vector({int(dims)}) NOT NULL)"
    )
    if index:
        build_index(conn, key, dims)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {kept} (id bigint GENERATED BY DEFAULT AS IDENTITY "
        f"PRIMARY KEY, text_hash text NOT NULL UNIQUE, embedding vector({int(dims)}) NOT NULL)"
    )


def graph_bytes(vectors: int, dims: int) -> int:
    """About how much memory an HNSW build of ``vectors`` vectors of ``dims`` needs to
    keep its graph whole: each vector's floats plus about 800 bytes of neighbour lists
    and bookkeeping at ``m`` 16. Measured: 1M vectors of 384 dims peaked at 2.26 GB in the
    building backend (docs/scale.md, "Measured at 1M")."""
    return vectors * (dims * 4 + 800)


def build_index(
    conn: psycopg.Connection,
    key: str,
    dims: int,
    memory: str | None = None,
    m: int = HNSW_M,
    ef_construction: int = HNSW_EF_CONSTRUCTION,
) -> None:
    """Create the signature's HNSW index if it has none (on a full table: the build).

    ``memory`` (``"1GB"``) is the build's ``maintenance_work_mem`` for this transaction:
    a graph that does not fit is built much more slowly (pgvector says so in a notice);
    100k vectors of 384 dims need about 400 MB (docs/scale.md, "Vectors"). ``m`` and
    ``ef_construction`` are for measuring others (``bench/pg_vectors``).
    """
    form = _form(dims)
    table = _table(key)
    if memory is not None:
        conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw "
        f"({form.expression} {form.opclass}) "
        f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
    )


def drop_index(conn: psycopg.Connection, key: str) -> None:
    """Drop the signature's HNSW index: a bulk load then builds it once (``build_index``),
    much faster than growing the graph row by row (docs/scale.md, "Vectors")."""
    conn.execute(f"DROP INDEX IF EXISTS {_table(key)}_hnsw")


def drop_signature(conn: psycopg.Connection, key: str) -> bool:
    """Forget one signature and its vectors; False when there was none. In a transaction."""
    table, kept = _table(key), _kept_table(key)
    if find_signature(conn, key) is None:
        return False
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"DROP TABLE IF EXISTS {kept}")
    conn.execute("DELETE FROM embedding_signatures WHERE key = %s", (key,))
    _bump(conn, GENERATION_KEY)
    return True


def record_failure(
    conn: psycopg.Connection, sig_id: int, document_ids: Iterable[int], reason: str, now: str
) -> None:
    """A provider call failed: its documents are ``embed_pending`` and the reason is kept."""
    conn.execute(
        "UPDATE embedding_signatures SET last_error = %s, last_error_at = %s WHERE id = %s",
        (reason, now, sig_id),
    )
    conn.execute(
        "UPDATE documents SET embed_pending = 1 WHERE id = ANY(%s)",
        ([int(i) for i in document_ids],),
    )


def record_success(conn: psycopg.Connection, sig_id: int, document_ids: Iterable[int]) -> None:
    """A batch was stored: its documents are no longer waiting and the last error is over."""
    conn.execute(
        "UPDATE embedding_signatures SET last_error = NULL, last_error_at = NULL "
        "WHERE id = %s AND last_error IS NOT NULL",
        (sig_id,),
    )
    conn.execute(
        "UPDATE documents SET embed_pending = 0 WHERE embed_pending = 1 AND id = ANY(%s)",
        ([int(i) for i in document_ids],),
    )


def failed_documents(conn: psycopg.Connection) -> int:
    """Documents whose last embedding attempt failed (waiting for a retry); none without
    a signature (``index/vectors.failed_documents`` says why)."""
    if conn.execute("SELECT 1 FROM embedding_signatures LIMIT 1").fetchone() is None:
        return 0
    return conn.execute("SELECT COUNT(*) FROM documents WHERE embed_pending = 1").fetchone()[0]


# --- what to embed --------------------------------------------------------------------


def embedded_among(
    conn: psycopg.Connection, sig_id: int, chunk_ids: Sequence[int], through_seq: int | None = None
) -> set[int]:
    """Those of ``chunk_ids`` that have a vector of signature ``sig_id``. ``through_seq``
    is accepted for the SQLite index's surface and ignored: a search here sees every
    committed vector (``VectorIndex.loaded_through`` is None)."""
    row = signature_row(conn, sig_id)
    if row is None or not chunk_ids:
        return set()
    found = conn.execute(
        f"SELECT chunk_id FROM {_table(row.key)} WHERE chunk_id = ANY(%s)",
        ([int(i) for i in chunk_ids],),
    )
    return {int(r[0]) for r in found}


def _heading(path: Any) -> list[str]:
    """A chunk's heading path: JSON text, as the schema stores it on both engines."""
    return json.loads(path) if isinstance(path, str) else list(path)


def first_embedding_texts(conn: psycopg.Connection, limit: int, max_chars: int) -> list[str]:
    """The embedding texts of the first ``limit`` chunks in chunk order (the queue's)."""
    rows = conn.execute(
        "SELECT d.title, c.heading_path, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_id ORDER BY c.id LIMIT %s",
        (limit,),
    )
    return [embedding_text(title, _heading(path), text, max_chars) for title, path, text in rows]


def pending_chunks(
    conn: psycopg.Connection, sig_id: int, limit: int, after_id: int = 0
) -> list[PendingChunk]:
    """Up to ``limit`` chunks with id > ``after_id`` that have no vector of ``sig_id``."""
    row = signature_row(conn, sig_id)
    if row is None:
        return []
    cursor = conn.execute(
        "SELECT c.id, c.document_id, d.title, c.heading_path, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.id > %s AND NOT EXISTS "
        f"(SELECT 1 FROM {_table(row.key)} v WHERE v.chunk_id = c.id) ORDER BY c.id LIMIT %s",
        (after_id, limit),
    )
    return [
        PendingChunk(cid, doc_id, embedding_text(title, _heading(path), text, row.max_chars))
        for cid, doc_id, title, path, text in cursor
    ]


def totals(conn: psycopg.Connection, sig_id: int) -> tuple[int, int]:
    """(chunks embedded under ``sig_id``, chunks still pending)."""
    row = signature_row(conn, sig_id)
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    if row is None:
        return 0, chunks
    embedded = conn.execute(f"SELECT COUNT(*) FROM {_table(row.key)}").fetchone()[0]
    return embedded, chunks - embedded


def coverage(conn: psycopg.Connection, sig_id: int) -> dict[int, tuple[int, int]]:
    """``{source_id: (embedded, pending)}`` chunks under ``sig_id``; a shared document
    counts in every source that holds it."""
    row = signature_row(conn, sig_id)
    if row is None:
        return {}
    cursor = conn.execute(
        "SELECT s.source_id, COUNT(v.chunk_id), COUNT(*) - COUNT(v.chunk_id) FROM "
        "(SELECT DISTINCT l.source_id, c.id AS chunk_id FROM locations l "
        " JOIN chunks c ON c.document_id = l.document_id) s "
        f"LEFT JOIN {_table(row.key)} v ON v.chunk_id = s.chunk_id GROUP BY s.source_id"
    )
    return {source_id: (embedded, pending) for source_id, embedded, pending in cursor}


# --- writing vectors ------------------------------------------------------------------


def _checked_matrix(row: SignatureRow, chunk_ids: Sequence[int], matrix: Any) -> np.ndarray:
    import numpy as np

    vectors = np.ascontiguousarray(matrix, dtype=np.float32)
    if vectors.shape != (len(chunk_ids), row.dims):
        shape = " × ".join(map(str, vectors.shape))
        raise InvalidInput(f"expected {len(chunk_ids)} × {row.dims} vectors, got {shape}")
    return vectors


def store_vectors(
    conn: psycopg.Connection, sig_id: int, chunk_ids: Sequence[int], matrix: np.ndarray
) -> int:
    """Store one vector per chunk id (unit-length float32 rows); how many were stored.

    Ids whose chunk vanished are skipped. The chunks found are locked (``FOR KEY SHARE``)
    until the caller's transaction ends, so a concurrent removal on another connection
    waits for this batch, or went first and its ids are skipped: never a foreign-key
    error. A vector already stored for a chunk is replaced.
    """
    row = signature_row(conn, sig_id)
    if row is None:
        raise InvalidInput(f"no embedding signature with id {sig_id}")
    vectors = _checked_matrix(row, chunk_ids, matrix)
    alive = {
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE",
            ([int(i) for i in chunk_ids],),
        )
    }
    keep = [i for i, cid in enumerate(chunk_ids) if cid in alive]
    if not keep:
        return 0
    _bump(conn, GENERATION_KEY)
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {_table(row.key)}(chunk_id, embedding) "
            f"VALUES (%s, %s::vector({row.dims})) "
            "ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding",
            [(int(chunk_ids[i]), _Vector(vectors[i])) for i in keep],
        )
    return len(keep)


COPY_BATCH = 10_000


def copy_vectors(
    conn: psycopg.Connection, sig_id: int, chunk_ids: Sequence[int], matrix: np.ndarray
) -> int:
    """Bulk-load vectors of chunks that have none yet, by binary COPY; how many.

    For moving a library's vectors (no re-embedding) and the bench: the rows are built
    by numpy in COPY's binary format (pgvector's ``vector_recv``: dims and an unused
    int16, then big-endian float4s), with no text to format or parse. A chunk id that
    does not exist, or already has a vector, fails the whole COPY (use
    ``store_vectors`` for batches that may overlap).
    """
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None:
        raise InvalidInput(f"no embedding signature with id {sig_id}")
    vectors = _checked_matrix(row, chunk_ids, matrix)
    if not len(chunk_ids):
        return 0
    layout = np.dtype(
        [
            ("fields", ">i2"),
            ("id_size", ">i4"),
            ("id", ">i8"),
            ("vector_size", ">i4"),
            ("dims", ">i2"),
            ("unused", ">i2"),
            ("vector", ">f4", (row.dims,)),
        ]
    )
    tuples = np.zeros(len(chunk_ids), dtype=layout)
    tuples["fields"], tuples["id_size"], tuples["id"] = 2, 8, np.asarray(chunk_ids)
    tuples["vector_size"], tuples["dims"], tuples["vector"] = 4 + 4 * row.dims, row.dims, vectors
    header = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension area
    with (
        conn.cursor() as cursor,
        cursor.copy(
            f"COPY {_table(row.key)} (chunk_id, embedding) FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.write(header)
        for at in range(0, len(tuples), COPY_BATCH):
            copy.write(tuples[at : at + COPY_BATCH].tobytes())
        copy.write(b"\xff\xff")  # the trailer: a tuple of -1 fields
    _bump(conn, GENERATION_KEY)
    return len(chunk_ids)


def remove_chunks(conn: psycopg.Connection, chunk_ids: Iterable[int]) -> int:
    """Delete these chunks' vectors under every signature; how many rows went.

    Call in the transaction that deletes the chunks, before it does (the cascade would
    take the vectors too; this also keeps them for reuse, ``reuse_kept``, as on SQLite).
    """
    rows = signatures(conn)
    if not rows:
        return 0
    ids = [int(i) for i in chunk_ids]
    removed = 0
    for row in rows:
        _keep_removed(conn, row, ids)
        removed += conn.execute(
            f"DELETE FROM {_table(row.key)} WHERE chunk_id = ANY(%s)", (ids,)
        ).rowcount
    if removed:
        _bump(conn, GENERATION_KEY)
    return removed


def _keep_removed(conn: psycopg.Connection, row: SignatureRow, ids: list[int]) -> None:
    """Copy the vectors of the chunks ``ids`` into the signature's kept table, keyed by
    the hash of their embedding text; the newest ``KEPT_LIMIT`` stay. The vectors move
    inside the server; only the texts come here, to be hashed."""
    kept, table = _kept_table(row.key), _table(row.key)
    found = conn.execute(
        "SELECT c.id, d.title, c.heading_path, c.text FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id JOIN {table} v "
        "ON v.chunk_id = c.id WHERE c.id = ANY(%s)",
        (ids,),
    ).fetchall()
    if not found:
        return
    hashes = [
        text_hash(embedding_text(title, _heading(path), text, row.max_chars))
        for _, title, path, text in found
    ]
    conn.execute(
        f"INSERT INTO {kept}(text_hash, embedding) SELECT DISTINCT ON (t.h) t.h, v.embedding "
        f"FROM unnest(%s::bigint[], %s::text[]) AS t(id, h) JOIN {table} v ON v.chunk_id = t.id "
        "ORDER BY t.h ON CONFLICT (text_hash) DO UPDATE SET embedding = EXCLUDED.embedding",
        ([r[0] for r in found], hashes),
    )
    conn.execute(f"DELETE FROM {kept} WHERE id <= (SELECT MAX(id) FROM {kept}) - %s", (KEPT_LIMIT,))


def reuse_kept(conn: psycopg.Connection, sig_id: int, chunks: Sequence[PendingChunk]) -> set[int]:
    """Store, for each of ``chunks`` whose exact embedding text a removed chunk had, that
    chunk's kept vector; the ids served so. In a transaction."""
    row = signature_row(conn, sig_id)
    if row is None or not chunks:
        return set()
    stored = conn.execute(
        f"INSERT INTO {_table(row.key)}(chunk_id, embedding) SELECT t.id, k.embedding "
        f"FROM unnest(%s::bigint[], %s::text[]) AS t(id, h) JOIN {_kept_table(row.key)} k "
        "ON k.text_hash = t.h WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.id = t.id) "
        "ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding RETURNING chunk_id",
        ([c.chunk_id for c in chunks], [text_hash(c.text) for c in chunks]),
    ).fetchall()
    if stored:
        _bump(conn, GENERATION_KEY)
    return {int(r[0]) for r in stored}


def forget_kept(conn: psycopg.Connection, sig_id: int) -> None:
    """Empty the kept vectors of ``sig_id``: nothing pending can use them any more."""
    row = signature_row(conn, sig_id)
    if row is not None:
        conn.execute(f"DELETE FROM {_kept_table(row.key)}")


def has_kept(conn: psycopg.Connection, sig_id: int) -> bool:
    """Whether ``sig_id`` holds kept vectors of removed chunks."""
    row = signature_row(conn, sig_id)
    if row is None:
        return False
    return conn.execute(f"SELECT 1 FROM {_kept_table(row.key)} LIMIT 1").fetchone() is not None


def forget_all(conn: psycopg.Connection) -> None:
    """Every vector goes (a rebuild: chunk ids start over); signatures stay, empty."""
    for row in signatures(conn):
        conn.execute(f"DELETE FROM {_table(row.key)}")
        conn.execute(f"DELETE FROM {_kept_table(row.key)}")
    _bump(conn, GENERATION_KEY)


def all_vectors(conn: psycopg.Connection, sig_id: int) -> tuple[list[int], np.ndarray]:
    """(chunk ids, float vectors) of every vector stored under ``sig_id``, by chunk id
    (moving a library, benches); read as float4 arrays in binary, no text parsed."""
    import numpy as np

    row = signature_row(conn, sig_id)
    if row is None:
        return [], np.zeros((0, 0), dtype=np.float32)
    with conn.cursor(binary=True) as cursor:
        found = cursor.execute(
            f"SELECT chunk_id, embedding::real[] FROM {_table(row.key)} ORDER BY chunk_id"
        ).fetchall()
    ids = [int(r[0]) for r in found]
    matrix = np.array([r[1] for r in found], dtype=np.float32)
    return ids, matrix.reshape(len(ids), row.dims)


# --- search ---------------------------------------------------------------------------


def _source_chunks(conn: psycopg.Connection, source_id: int, limit: int) -> list[int]:
    """Up to ``limit`` ids of the chunks of ``source_id``'s documents (a semi-join: a
    document at two paths of the source counts once, with no DISTINCT to sort)."""
    found = conn.execute(
        "SELECT c.id FROM chunks c WHERE c.document_id IN "
        "(SELECT l.document_id FROM locations l WHERE l.source_id = %s) LIMIT %s",
        (source_id, limit),
    )
    return [int(r[0]) for r in found]


class VectorIndex:
    """Nearest neighbours through the signature's HNSW index; one per ``Library``.

    Holds nothing but its two settings: the index lives in the server. Thread-safe as
    long as each thread passes its own connection, as with the SQLite index.
    """

    def __init__(self, ef_search: int = EF_SEARCH, exact_below: int = EXACT_BELOW) -> None:
        self.ef_search = ef_search
        self.exact_below = exact_below

    def search(
        self,
        conn: psycopg.Connection,
        sig_id: int,
        query_vector: np.ndarray,
        limit: int,
        source_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, cosine similarity)`` of the ``limit`` nearest chunks, best first.

        Only vectors of ``sig_id`` are compared; ``source_id`` restricts the candidates to
        that source's chunks: exactly, over all of them, when the source holds at most
        ``exact_below`` chunks, else through the index with an iterative scan. An
        unknown (dropped) signature has no neighbours.
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
        params: dict[str, Any] = {"q": _Vector(query / norm), "limit": limit}
        q = f"%(q)s::vector({row.dims})"
        score = f"SELECT chunk_id, -(embedding <#> {q}) AS score FROM"
        best = "ORDER BY score DESC, chunk_id LIMIT %(limit)s"
        if source_id is not None:
            chunk_ids = _source_chunks(conn, source_id, self.exact_below + 1)
            if len(chunk_ids) <= self.exact_below:
                params["ids"] = chunk_ids
                sql = f"{score} {_table(row.key)} WHERE chunk_id = ANY(%(ids)s) {best}"
                # Never prepared: the generic plan psycopg's prepared statement turns to
                # after five runs cannot see the ids' count, and scans the whole table
                # (16 ms against 9 ms for 1,000 ids among 100k).
                found = conn.execute(sql, params, prepare=False).fetchall()
                return [(int(cid), float(s)) for cid, s in found]
        form = _form(row.dims)
        params["wanted"] = limit if form.exact else max(limit * RESCORE_FACTOR, MIN_RESCORE)
        within = ""
        if source_id is not None:
            params["source"] = source_id
            within = (
                "WHERE v.chunk_id IN (SELECT c.id FROM chunks c JOIN locations l "
                "ON l.document_id = c.document_id WHERE l.source_id = %(source)s)"
            )
        sql = (
            "WITH nearest AS MATERIALIZED (SELECT v.chunk_id, v.embedding "
            f"FROM {_table(row.key)} v {within} "
            f"ORDER BY {form.expression} {form.operator} {form.query.format(q=q)} "
            f"LIMIT %(wanted)s) {score} nearest {best}"
        )
        ef_search = min(max(self.ef_search, params["wanted"]), MAX_EF_SEARCH)
        with conn.transaction():
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', %s, true), "
                "set_config('hnsw.max_scan_tuples', %s, true)",
                (
                    str(ef_search),
                    "off" if source_id is None else "relaxed_order",
                    str(MAX_SCAN_TUPLES),
                ),
            )
            found = conn.execute(sql, params).fetchall()
        return [(int(cid), float(s)) for cid, s in found]

    def warm(self, conn: psycopg.Connection, sig_id: int) -> None:
        """Nothing to load in this process: the server holds the index in its buffers."""

    def loaded_through(self, sig_id: int) -> int | None:
        """None: a search sees every committed vector (no snapshot in this process)."""
        return None

    def discard(self, sig_id: int) -> None:
        """Nothing cached here for a dropped signature."""
