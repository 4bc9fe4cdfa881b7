"""index/postgres/vectors.py: vectors per signature in pgvector tables with HNSW, on a real
PostgreSQL 18 with pgvector 0.8 (``postgres_url``: a fresh database per test).

Guards: the PostgreSQL index answering other neighbours or other scores than the SQLite
index on the same vectors, two signatures' vectors mixing, a vector outliving its chunk,
a search returning fewer than it was asked (pgvector's default ``ef_search`` of 40 caps
an HNSW scan at 40 rows; a filter that keeps few of the scanned rows leaves fewer than
``limit`` without an iterative scan), two servers creating one signature colliding on
PostgreSQL's catalog.

Each test's database is a library's, migrated by ``PostgresDatabase`` (the store's schema
and the indexes' tables), and the sources, documents and chunks the vectors hang on are
written by the store's rows functions through it, as a library writes them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from kb_mcp.bench.pg_vectors import measure
from kb_mcp.bench.vectors import queries_near, synthetic
from kb_mcp.chunk import Chunk
from kb_mcp.embed.base import EmbeddingSignature
from kb_mcp.errors import InvalidInput
from kb_mcp.index import vectors as sqlite_vectors
from kb_mcp.index.postgres import vectors
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.paths import StoredPath
from kb_mcp.store.postgres.database import PostgresDatabase

NOW = "2024-01-01T00:00:00Z"


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresDatabase]:
    database = PostgresDatabase(postgres_url)  # migrates: the store's tables, the indexes'
    yield database
    database.close()


@pytest.fixture
def pg(store: PostgresDatabase, postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_url) as conn:
        yield conn


def unit_vectors(count: int, dims: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, dims))
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def add_document(conn: Any, source: str, title: str, texts: list[str]) -> tuple[int, list[int]]:
    """A document titled ``title`` in source ``source`` (made when missing) holding one
    chunk per text, written by the store's rows functions on either engine's ``conn``;
    the source's id and the chunks' ids."""
    source_id = rows.ensure_source(conn, source, "agent", NOW)
    key = f"{source}/{uuid.uuid4().hex}"
    doc = rows.NewDocument(key, title, None, "note", None, "x", key, None, (), NOW, NOW)
    document_id = rows.insert_document(conn, doc)
    rows.upsert_location(conn, source_id, StoredPath(key, key), document_id)
    chunks = [Chunk(i, (), i + 1, i + 1, t) for i, t in enumerate(texts)]
    return source_id, rows.insert_chunks(conn, document_id, chunks)


def add_chunks(store: PostgresDatabase, source_id: int, texts: list[str]) -> list[int]:
    """A document in source ``source_id`` holding one chunk per text; sources are made
    in the order of their ids."""
    with store.write() as conn:
        made, ids = add_document(conn, f"s{source_id}", f"doc in {source_id}", texts)
    assert made == source_id
    return ids


def signature(dims: int, model: str = "m") -> EmbeddingSignature:
    return EmbeddingSignature("test", model, dims, 2000)


def exact_top(ids: list[int], matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    """The exact nearest by inner product with the normalized query, ties by id."""
    scores = matrix @ (query / np.linalg.norm(query))
    order = np.lexsort((np.asarray(ids), -scores))[:k]
    return [ids[i] for i in order]


def sqlite_library(
    home: Path, sources: list[list[str]]
) -> tuple[Library, list[tuple[int, list[int]]]]:
    """A SQLite library with one document per source holding these chunk texts; each
    source's id and chunk ids."""
    library = Library(Settings(home=home, embedder="none"))
    with library.db.write() as conn:
        made = [add_document(conn, f"s{n}", f"d{n}", texts) for n, texts in enumerate(sources)]
    return library, made


def test_same_neighbours_and_scores_as_the_sqlite_index_on_the_same_vectors(
    store: PostgresDatabase, pg: psycopg.Connection, tmp_path: Path
) -> None:
    # 300 vectors: the SQLite index rescores every one exactly at this size, and the
    # HNSW search visits every node of so small a graph, so both are the exact answer.
    texts = [[f"a{i}" for i in range(250)], [f"b{i}" for i in range(50)]]
    matrix = unit_vectors(300, 384, seed=1)
    library, [(source_a, ids_a), (source_b, ids_b)] = sqlite_library(tmp_path / "home", texts)
    with library:
        all_ids = ids_a + ids_b
        with library.db.write() as conn:
            lite_sig = sqlite_vectors.ensure_signature(conn, signature(384), NOW)
            sqlite_vectors.store_vectors(conn, lite_sig, all_ids, matrix)
        with store.write() as conn:  # the same rows written in the same order: same ids
            made = [add_document(conn, f"s{n}", f"d{n}", t) for n, t in enumerate(texts)]
        assert made == [(source_a, ids_a), (source_b, ids_b)]
        pg_sig = vectors.ensure_signature(pg, signature(384), NOW)
        assert vectors.store_vectors(pg, pg_sig, all_ids, matrix) == 300
        pg.commit()

        lite, index = library.vectors.index, vectors.VectorIndex()
        for query in unit_vectors(20, 384, seed=2):
            for limit, source in ((10, None), (100, None), (10, source_b)):
                expected = lite.search(library.db.conn, lite_sig, query, limit, source)
                found = index.search(pg, pg_sig, query, limit, source)
                assert [cid for cid, _ in found] == [cid for cid, _ in expected]
                assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_two_signatures_side_by_side_keep_their_own_vectors_and_pending_chunks(
    store: PostgresDatabase,
    pg: psycopg.Connection,
) -> None:
    # 384 dims is indexed as vector, 2,048 as halfvec and 4,100 as sign bits (HNSW's
    # limits are 2,000 and 4,000 dims); the lossy forms are rescored with the floats.
    ids = add_chunks(store, 1, [f"passage {i}" for i in range(200)])
    stored = {}
    for dims, count in ((384, 200), (2048, 120), (4100, 200)):
        sig_id = vectors.ensure_signature(pg, signature(dims, model=f"m{dims}"), NOW)
        matrix = unit_vectors(count, dims, seed=dims)
        vectors.store_vectors(pg, sig_id, ids[:count], matrix)
        stored[dims] = (sig_id, matrix)
    pg.commit()

    assert [row.dims for row in vectors.signatures(pg)] == [384, 2048, 4100]
    assert vectors.totals(pg, stored[384][0]) == (200, 0)
    assert vectors.totals(pg, stored[2048][0]) == (120, 80)
    pending = vectors.pending_chunks(pg, stored[2048][0], limit=1000)
    assert [c.chunk_id for c in pending] == ids[120:]
    assert pending[0].text == "doc in 1\n\npassage 120"
    index = vectors.VectorIndex()
    for dims, (sig_id, matrix) in stored.items():
        query = unit_vectors(1, dims, seed=7)[0]
        found = index.search(pg, sig_id, query, 10)
        assert [cid for cid, _ in found] == exact_top(ids[: len(matrix)], matrix, query, 10)
        best = matrix[ids.index(found[0][0])] @ query
        assert found[0][1] == pytest.approx(float(best), abs=1e-5)
    with pytest.raises(InvalidInput):
        index.search(pg, stored[384][0], unit_vectors(1, 2048, seed=1)[0], 10)


def test_a_chunks_vectors_leave_with_it_under_every_signature(
    store: PostgresDatabase, pg: psycopg.Connection
) -> None:
    kept_ids = add_chunks(store, 1, [f"kept {i}" for i in range(30)])
    gone_ids = add_chunks(store, 2, [f"gone {i}" for i in range(30)])
    sig_ids = []
    for dims in (8, 16):
        sig_id = vectors.ensure_signature(pg, signature(dims, model=f"m{dims}"), NOW)
        vectors.store_vectors(pg, sig_id, kept_ids + gone_ids, unit_vectors(60, dims, seed=dims))
        sig_ids.append(sig_id)
    pg.commit()

    pg.execute("DELETE FROM documents WHERE id = 2")  # its chunks cascade, and their vectors
    pg.commit()
    index = vectors.VectorIndex()
    for sig_id, dims in zip(sig_ids, (8, 16), strict=True):
        assert vectors.totals(pg, sig_id) == (30, 0)
        assert vectors.embedded_among(pg, sig_id, gone_ids) == set()
        found = index.search(pg, sig_id, unit_vectors(1, dims, seed=3)[0], 100)
        assert sorted(cid for cid, _ in found) == kept_ids


def test_removed_chunks_vectors_serve_the_same_text_again_without_embedding(
    store: PostgresDatabase,
    pg: psycopg.Connection,
) -> None:
    old_ids = add_chunks(store, 1, ["same words", "other words"])
    sig_id = vectors.ensure_signature(pg, signature(8), NOW)
    matrix = unit_vectors(2, 8, seed=5)
    vectors.store_vectors(pg, sig_id, old_ids, matrix)
    pg.commit()  # the signature's table is made: chunk writers wait until this commits
    assert vectors.remove_chunks(pg, old_ids) == 2
    pg.execute("DELETE FROM chunks WHERE id = ANY(%s)", (old_ids,))
    pg.commit()  # the document's chunks removed, as the store's write commits it
    new_ids = add_chunks(store, 1, ["same words", "new words"])  # a document of the same title
    pending = vectors.pending_chunks(pg, sig_id, limit=10)
    assert vectors.has_kept(pg, sig_id)

    served = vectors.reuse_kept(pg, sig_id, pending)

    assert served == {new_ids[0]}
    _, stored = vectors.all_vectors(pg, sig_id)
    assert np.array_equal(stored[0], matrix[0])  # the very floats, not re-parsed approximations
    vectors.forget_kept(pg, sig_id)
    assert not vectors.has_kept(pg, sig_id)


def test_a_search_returns_as_many_as_asked_beyond_the_default_graph_breadth(
    store: PostgresDatabase,
    pg: psycopg.Connection,
) -> None:
    ids = add_chunks(store, 1, [f"p{i}" for i in range(3000)])
    sig_id = vectors.ensure_signature(pg, signature(32), NOW)
    vectors.copy_vectors(pg, sig_id, ids, unit_vectors(3000, 32, seed=11))
    pg.commit()

    found = vectors.VectorIndex().search(pg, sig_id, unit_vectors(1, 32, seed=12)[0], 100)

    assert len(found) == 100  # the vector leg asks for 100; HNSW's default breadth is 40


@pytest.mark.parametrize("exact_below", [0, vectors.EXACT_BELOW], ids=["iterative", "exact"])
def test_a_filter_that_leaves_few_rows_still_returns_the_nearest_limit_of_them(
    store: PostgresDatabase, pg: psycopg.Connection, exact_below: int
) -> None:
    # 1 % of the chunks are in source 2: the first 40 rows the graph yields hold none of
    # them, so the index path needs its iterative scan; a source this small is searched
    # exactly by default, and both paths must give the exact answer here.
    many = add_chunks(store, 1, [f"p{i}" for i in range(4950)])
    few = add_chunks(store, 2, [f"q{i}" for i in range(50)])
    sig_id = vectors.ensure_signature(pg, signature(32), NOW)
    matrix = unit_vectors(5000, 32, seed=21)
    vectors.copy_vectors(pg, sig_id, many + few, matrix)
    pg.commit()
    pg.execute("ANALYZE")
    index = vectors.VectorIndex(exact_below=exact_below)

    for query in unit_vectors(5, 32, seed=22):
        found = index.search(pg, sig_id, query, 10, source_id=2)
        assert [cid for cid, _ in found] == exact_top(few, matrix[-50:], query, 10)
        assert found[0][1] == pytest.approx(float(max(matrix[-50:] @ query)), abs=1e-5)


def test_copied_vectors_read_back_exactly(store: PostgresDatabase, pg: psycopg.Connection) -> None:
    ids = add_chunks(store, 1, [f"p{i}" for i in range(50)])
    sig_id = vectors.ensure_signature(pg, signature(384), NOW)
    matrix = unit_vectors(50, 384, seed=31)

    assert vectors.copy_vectors(pg, sig_id, ids, matrix) == 50

    read_ids, read = vectors.all_vectors(pg, sig_id)
    assert read_ids == ids
    assert np.array_equal(read, matrix)


def test_a_signature_is_created_once_and_dropped_with_its_tables(pg: psycopg.Connection) -> None:
    first = vectors.ensure_signature(pg, signature(8), NOW)
    assert vectors.ensure_signature(pg, signature(8), NOW) == first
    key = signature(8).key

    assert vectors.drop_signature(pg, key)

    assert vectors.signatures(pg) == []
    tables = pg.execute(
        "SELECT to_regclass(%s), to_regclass(%s)", (f"vec_{key}", f"vec_kept_{key}")
    )
    assert tables.fetchone() == (None, None)
    assert not vectors.drop_signature(pg, key)
    with pytest.raises(InvalidInput):
        vectors.ensure_signature(pg, signature(16_001), NOW)


def test_the_bench_loads_builds_and_measures_recall_on_a_small_load(
    postgres_url: str,
) -> None:
    matrix = synthetic(2000, 16, clusters=20)
    queries = queries_near(matrix, 20, noise=0.5)

    report = measure(postgres_url, matrix, queries, "clusters20", reuse=False)

    assert report.load.copy_rows_per_s and report.load.hnsw_build_s is not None
    assert report.index_mb is not None and report.table_mb is not None
    assert len(report.searches) == 8
    assert all(row.short == 0 for row in report.searches)
    assert min(row.recall for row in report.searches) >= 0.9


def test_a_failed_batch_marks_its_documents_until_a_stored_one_clears_them(
    store: PostgresDatabase,
    pg: psycopg.Connection,
) -> None:
    ids = add_chunks(store, 1, ["one", "two"])
    other = add_chunks(store, 2, ["three"])
    sig_id = vectors.ensure_signature(pg, signature(8), NOW)
    document_id = pg.execute("SELECT document_id FROM chunks WHERE id = %s", (ids[0],))
    document_id = document_id.fetchone()[0]

    vectors.record_failure(pg, sig_id, [document_id], "the embedder timed out", NOW)

    assert vectors.failed_documents(pg) == 1
    assert vectors.signature_row(pg, sig_id).last_error == "the embedder timed out"
    vectors.store_vectors(pg, sig_id, ids, unit_vectors(2, 8, seed=1))
    vectors.record_success(pg, sig_id, [document_id])
    assert vectors.failed_documents(pg) == 0
    assert vectors.signature_row(pg, sig_id).last_error is None
    assert vectors.coverage(pg, sig_id) == {1: (2, 0), 2: (0, 1)}
    assert vectors.embedded_among(pg, sig_id, ids + other) == set(ids)
    assert vectors.first_embedding_texts(pg, 2, max_chars=9) == ["doc in 1\n", "doc in 1\n"]


def wait_until_a_session_waits_for_a_lock(url: str, within_s: float = 30.0) -> None:
    """Return once another session of this database waits on a lock (a state the server
    reports, not a guess at timing); fail after ``within_s``."""
    deadline = time.monotonic() + within_s
    with psycopg.connect(url, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting:
                return
            time.sleep(0.01)
    raise AssertionError("no session came to wait on a lock")


def test_two_servers_creating_one_signature_at_once_share_one_row_and_one_table(
    pg: psycopg.Connection, postgres_url: str
) -> None:
    first = vectors.ensure_signature(pg, signature(8), NOW)  # not committed yet
    found: list[int] = []
    failed: list[BaseException] = []

    def other_server() -> None:
        try:
            with psycopg.connect(postgres_url) as conn:
                found.append(vectors.ensure_signature(conn, signature(8), NOW))
                conn.commit()
        except BaseException as exc:  # the assertion below reports it
            failed.append(exc)

    worker = threading.Thread(target=other_server)
    worker.start()
    wait_until_a_session_waits_for_a_lock(postgres_url)  # the other server is blocked on us
    pg.commit()
    worker.join(timeout=30)

    assert not failed and found == [first]
    assert [row.id for row in vectors.signatures(pg)] == [first]
