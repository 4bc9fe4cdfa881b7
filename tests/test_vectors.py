"""index/vectors.py: vectors per signature, leaving with their chunks, searched by numpy.

Real libraries in ``tmp_path`` built by the production migrations, embedded by the real
test embedder of ``tests/hash_embedder.py`` (feature hashing, deterministic). Guards:
a vector outliving its chunk (chunk ids are reused by SQLite), the title being embedded
anywhere but in the embedded text, a stale in-memory cache returning vanished chunks,
source scope leaking other sources, and the approximate search losing the true nearest
neighbours (issue 8, "Index").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hash_embedder import HashEmbedder, hash_factory

from kb_mcp.chunk import Chunk
from kb_mcp.index import vectors
from kb_mcp.index.vectors import VectorIndex
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

NOTES = {
    "kestrel": ("Kestrels", "# Hovering\n\nThe kestrel hovers over the meadow, hunting voles."),
    "heron": ("Herons", "# Fishing\n\nThe grey heron stands still in the shallow river."),
    "owl": ("Owls", "# Night\n\nThe barn owl hunts mice at night over the fields."),
}


class FakeClock:
    """A clock the test moves: the cache's once-a-second check without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lib(home: Path) -> Iterator[Library]:
    opened = Library(
        Settings(home=home, allow_agent_writes=True, embedder="local"), make_embedder=hash_factory()
    )
    try:
        yield opened
    finally:
        opened.close()


def add_notes(library: Library) -> None:
    for uri, (title, text) in NOTES.items():
        library.writing.add_document(title, text, f"notes://{uri}")


def search(library: Library, text: str, limit: int = 3, **scope: int) -> list[tuple[int, float]]:
    state = library.vectors.state()
    assert state.usable and state.embedder is not None and state.index is not None
    vector = state.embedder.embed([text], kind="query")[0]
    return state.index.search(library.db.conn, state.signature_id, vector, limit, **scope)


def chunk_of(library: Library, uri: str) -> int:
    [(chunk_id,)] = library.db.query(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.uri = ?",
        (uri,),
    )
    return chunk_id


def vector_tables(db: Database) -> list[str]:
    """The codes and floats tables of the library's signatures (not the kept vectors of
    removed chunks, ``vectors.reuse_kept``)."""
    found = db.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND (name LIKE 'vec_codes_%' OR name LIKE 'vec_floats_%')"
    )
    return sorted(name for (name,) in found)


def test_vectors_search_ranks_the_nearest_chunk_first(lib: Library) -> None:
    add_notes(lib)
    lib.vectors.embed_pending()
    hits = search(lib, "kestrel hovering over a meadow")
    assert hits[0][0] == chunk_of(lib, "notes://kestrel")
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert 0 < hits[0][1] <= 1.0 + 1e-6


def test_vectors_every_chunk_gets_one_vector(lib: Library) -> None:
    add_notes(lib)
    lib.writing.add_document(
        "Long", "\n\n".join(f"# Part {i}\n\nwords {i} " * 30 for i in range(6)), "l://1"
    )
    report = lib.vectors.embed_pending()
    chunks = lib.catalog.overview().chunks
    assert chunks > len(NOTES)
    assert report is not None and (report.embedded, report.pending, report.error) == (
        chunks,
        0,
        None,
    )
    state = lib.vectors.state()
    assert (state.embedded, state.pending) == (chunks, 0)
    [codes, floats] = vector_tables(lib.db)
    assert lib.db.query(f"SELECT COUNT(*) FROM {codes}") == [(chunks,)]
    assert lib.db.query(f"SELECT COUNT(*) FROM {floats}") == [(chunks,)]


def test_vectors_embedded_text_has_title_and_headings_the_stored_chunk_does_not(
    lib: Library,
) -> None:
    lib.writing.add_document("Kestrels", NOTES["kestrel"][1], "notes://kestrel")
    with lib.db.write() as conn:
        sig_id = vectors.ensure_signature(conn, HashEmbedder().signature)
    [pending] = vectors.pending_chunks(lib.db.conn, sig_id, 10)
    assert pending.text.startswith("Kestrels › Hovering\n\n")
    assert pending.text.endswith("hunting voles.")
    [(stored,)] = lib.db.query("SELECT text FROM chunks WHERE id = ?", (pending.chunk_id,))
    assert "Kestrels" not in stored


def test_vectors_embedded_text_is_cut_to_the_signature_budget() -> None:
    text = vectors.embedding_text("Title", ["Title", "Section"], "x" * 500, max_chars=40)
    assert text == ("Title › Section\n\n" + "x" * 500)[:40]


def test_vectors_removing_a_file_removes_its_vectors(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, (title, text) in NOTES.items():
        (folder / f"{name}.md").write_text(text.replace("# ", f"# {title}\n\n## ", 1))
    with Library(Settings(home=home, embedder="local"), make_embedder=hash_factory()) as library:
        library.folders.add_folder(folder, "notes")
        library.folders.sync()
        library.vectors.embed_pending()
        owl = {cid for (cid,) in library.db.query("SELECT id FROM chunks WHERE text LIKE '%owl%'")}
        assert owl and library.vectors.state().embedded == library.catalog.overview().chunks
        (folder / "owl.md").unlink()
        library.folders.sync()
        [codes, floats] = vector_tables(library.db)
        for table in (codes, floats):
            left = {cid for (cid,) in library.db.query(f"SELECT chunk_id FROM {table}")}
            assert left and not (left & owl)
        assert library.vectors.state().embedded == library.catalog.overview().chunks
        assert not {cid for cid, _ in search(library, "barn owl hunting mice", 10)} & owl


def test_vectors_leave_with_their_chunks_in_a_keyword_only_library(home: Path) -> None:
    """``--embedder none`` still removes vectors: a later chunk reusing the id must not
    inherit the old vector."""
    with Library(
        Settings(home=home, allow_agent_writes=True, embedder="local"), make_embedder=hash_factory()
    ) as a:
        add_notes(a)
        a.vectors.embed_pending()
    keyword_only = Settings(home=home, allow_agent_writes=True, embedder="none")
    with Library(keyword_only) as b:
        b.writing.add_document("Owls", "# Day\n\nOwls sleep in the barn by day.", "notes://owl")
        [codes, _] = vector_tables(b.db)
        embedded = {cid for (cid,) in b.db.query(f"SELECT chunk_id FROM {codes}")}
        assert chunk_of(b, "notes://owl") not in embedded
        assert len(embedded) == len(NOTES) - 1


def test_vectors_rebuild_drops_every_vector(lib: Library) -> None:
    add_notes(lib)
    lib.vectors.embed_pending()
    lib.writing.reindex(rebuild=True)
    state = lib.vectors.state()
    assert (state.embedded, state.pending) == (0, len(NOTES))
    report = lib.vectors.embed_pending()
    assert report is not None and report.embedded == len(NOTES)


def test_vectors_stale_cache_never_scores_a_reused_chunk_id_with_its_old_vector(
    home: Path,
) -> None:
    """The owl note is the newest chunk; replacing it (from a keyword-only process)
    frees its id and SQLite gives the new chunk the same id. The searching process still
    holds the old code for that id in memory, but must not answer with the old vector."""
    clock = FakeClock()
    settings = Settings(home=home, allow_agent_writes=True, embedder="local")
    with Library(settings, make_embedder=hash_factory()) as reader:
        add_notes(reader)
        reader.vectors.embed_pending()
        state = reader.vectors.state()
        index = VectorIndex(clock=clock)
        owl = chunk_of(reader, "notes://owl")
        query = state.embedder.embed(["the barn owl hunts mice at night"], kind="query")[0]
        [(best, old_score), *_] = index.search(reader.db.conn, state.signature_id, query, 3)
        assert best == owl
        with Library(settings.with_overrides(embedder="none")) as writer:
            writer.writing.add_document("Owls", "# Day\n\nCrows gather on the roof.", "notes://owl")
        assert chunk_of(reader, "notes://owl") == owl  # the id was reused
        hits = index.search(reader.db.conn, state.signature_id, query, 3)  # same second
        assert owl not in {cid for cid, _ in hits} and len(hits) == len(NOTES) - 1
        reader.vectors.embed_pending()
        clock.now += vectors.RELOAD_CHECK_S
        rescored = dict(index.search(reader.db.conn, state.signature_id, query, 3))
        [_, floats] = vector_tables(reader.db)
        [(blob,)] = reader.db.query(f"SELECT embedding FROM {floats} WHERE chunk_id = ?", (owl,))
        new_vector = np.frombuffer(blob, dtype=np.float32)
        assert rescored[owl] == pytest.approx(float(new_vector @ query), abs=1e-5)
        assert rescored[owl] < old_score - 0.2


def test_vectors_cache_picks_up_new_vectors_after_a_second(lib: Library) -> None:
    add_notes(lib)
    lib.vectors.embed_pending()
    sig_id = lib.vectors.state().signature_id
    clock = FakeClock()
    index = VectorIndex(clock=clock)
    embedder = HashEmbedder()
    query = embedder.embed(["the osprey dives for fish"], kind="query")[0]
    assert len(index.search(lib.db.conn, sig_id, query, 10)) == len(NOTES)
    lib.writing.add_document("Ospreys", "# Diving\n\nThe osprey dives for fish.", "notes://osprey")
    lib.vectors.embed_pending()
    assert len(index.search(lib.db.conn, sig_id, query, 10)) == len(NOTES)  # cached
    clock.now += vectors.RELOAD_CHECK_S
    hits = index.search(lib.db.conn, sig_id, query, 10)
    assert hits[0][0] == chunk_of(lib, "notes://osprey") and len(hits) == len(NOTES) + 1


def test_vectors_source_scope_keeps_other_sources_out(tmp_path: Path, lib: Library) -> None:
    folder = tmp_path / "birds"
    folder.mkdir()
    (folder / "kestrel.md").write_text("# Kestrel\n\nA kestrel hovers over the meadow.\n")
    lib.folders.add_folder(folder, "birds")
    lib.folders.sync()
    add_notes(lib)  # the agent source has a kestrel note too
    lib.vectors.embed_pending()
    birds = rows.get_source(lib.db.conn, "birds")
    assert birds is not None
    scoped = search(lib, "kestrel hovering over the meadow", 10, source_id=birds.id)
    [(folder_chunk,)] = lib.db.query(
        "SELECT c.id FROM chunks c JOIN locations l ON l.document_id = c.document_id "
        "WHERE l.source_id = ?",
        (birds.id,),
    )
    assert [cid for cid, _ in scoped] == [folder_chunk]
    assert len(search(lib, "kestrel hovering over the meadow", 10)) == len(NOTES) + 1


def test_vectors_coverage_counts_embedded_and_pending_per_source(
    tmp_path: Path, lib: Library
) -> None:
    folder = tmp_path / "birds"
    folder.mkdir()
    (folder / "kestrel.md").write_text("# Kestrel\n\nA kestrel hovers over the meadow.\n")
    lib.folders.add_folder(folder, "birds")
    lib.folders.sync()
    lib.vectors.embed_pending()
    add_notes(lib)  # not embedded yet
    overview = lib.catalog.overview()
    coverage = {s.name: (s.embedded, s.embed_pending) for s in overview.sources}
    assert coverage == {"birds": (1, 0), "agent": (0, len(NOTES))}
    assert overview.health["embed_pending"] == len(NOTES)
    from kb_mcp import render

    assert "vectors 1/1" in render.overview_text(overview)


def test_vectors_a_dropped_signature_has_no_neighbours(lib: Library) -> None:
    add_notes(lib)
    lib.vectors.embed_pending()
    state = lib.vectors.state()
    query = state.embedder.embed(["owl"], kind="query")[0]
    with lib.db.write() as conn:
        assert vectors.drop_signature(conn, state.signature.key)
    assert lib.vectors.index.search(lib.db.conn, state.signature_id, query, 3) == []
    assert vector_tables(lib.db) == []


def test_vectors_store_skips_chunks_that_vanished_meanwhile(lib: Library) -> None:
    add_notes(lib)
    embedder = HashEmbedder()
    with lib.db.write() as conn:
        sig_id = vectors.ensure_signature(conn, embedder.signature)
    pending = vectors.pending_chunks(lib.db.conn, sig_id, 10)
    matrix = embedder.embed([p.text for p in pending])
    with lib.db.write() as conn:
        conn.execute("DELETE FROM chunks WHERE id = ?", (pending[0].chunk_id,))
        stored = vectors.store_vectors(conn, sig_id, [p.chunk_id for p in pending], matrix)
    assert stored == len(pending) - 1


def _synthetic_library(home: Path, count: int, dims: int) -> tuple[Library, int, np.ndarray]:
    """A library of ``count`` chunk rows with clustered random unit vectors stored."""
    library = Library(Settings(home=home, embedder="local"), make_embedder=hash_factory())
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((count // 50, dims))
    matrix = centres[rng.integers(0, len(centres), count)] + 0.6 * rng.standard_normal(
        (count, dims)
    )
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    signature = HashEmbedder("synthetic", dims=dims).signature
    with library.db.write() as conn:
        source_id = rows.ensure_source(conn, "synthetic", "agent", "2024-01-01T00:00:00Z")
        doc = rows.NewDocument(
            doc_key="synthetic",
            title="synthetic",
            uri=None,
            kind="note",
            language=None,
            text="x",
            content_hash="0",
            doc_date=None,
            tags=(),
            created_at="2024-01-01T00:00:00Z",
            updated_at="2024-01-01T00:00:00Z",
        )
        document_id = rows.insert_document(conn, doc)
        rows.upsert_location(conn, source_id, library.db.paths.of("synthetic"), document_id)
        chunks = [Chunk(i, (), i + 1, i + 1, f"chunk {i}") for i in range(count)]
        ids = rows.insert_chunks(conn, document_id, chunks)
        sig_id = vectors.ensure_signature(conn, signature)
        vectors.store_vectors(conn, sig_id, ids, matrix)
    return library, sig_id, matrix


def test_vectors_search_finds_the_exact_nearest_neighbours(home: Path) -> None:
    """recall@10 of hamming candidates + float rescoring against exact cosine search."""
    library, sig_id, matrix = _synthetic_library(home, 5_000, 128)
    try:
        ids = np.array([cid for (cid,) in library.db.query("SELECT id FROM chunks ORDER BY id")])
        rng = np.random.default_rng(11)
        recalls = []
        for row in rng.choice(len(matrix), 30, replace=False):
            query = matrix[row] + 0.3 * rng.standard_normal(matrix.shape[1]).astype(np.float32)
            exact = set(ids[np.argsort(-(matrix @ query))[:10]].tolist())
            found = library.vectors.index.search(library.db.conn, sig_id, query, 10)
            recalls.append(len(exact & {cid for cid, _ in found}) / 10)
        assert np.mean(recalls) >= 0.95
    finally:
        library.close()
