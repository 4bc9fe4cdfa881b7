"""Vectors in a library on PostgreSQL (issue 24): embedded there, searched in hybrid.

The same documents, embedded by the same deterministic embedder (``hash_embedder``), in
a SQLite library and in one on a real PostgreSQL server (pgvector): the default mode must
run hybrid on both and rank alike, scores within float noise (pgvector computes the
inner product in its own order of additions). A removed document's vectors go with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hash_embedder import HashEmbedder, hash_factory
from team_notes import DOCUMENTS, QUESTIONS

from kb_mcp.embed.base import Availability, EmbeddingSignature, EmbedKind
from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store


def _library(home: Path, store: Store | None = None) -> Library:
    settings = dataclasses.replace(
        Settings(home=home),
        allow_agent_writes=True,
        embedder="test",
        embed_model="hash-64",
        store=store or Store(),
    )
    library = Library(settings, make_embedder=hash_factory())
    for title, content, uri, _tags in DOCUMENTS:
        library.writing.add_document(title, content, uri)
    report = library.vectors.embed_pending()
    assert report is not None and report.complete and report.error is None
    return library


@pytest.fixture
def both(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Library, Library]]:
    """The same embedded documents in a SQLite library and in one on PostgreSQL."""
    sqlite = _library(tmp_path / "sqlite")
    postgres = _library(tmp_path / "postgres", Store(postgres_url))
    try:
        yield sqlite, postgres
    finally:
        sqlite.close()
        postgres.close()


def test_the_default_mode_runs_hybrid_and_ranks_as_the_sqlite_library(
    both: tuple[Library, Library],
) -> None:
    sqlite, postgres = both
    for question in QUESTIONS:
        want = sqlite.lookup.search(question)
        got = postgres.lookup.search(question)
        assert want.mode == "hybrid" and want.hits, question  # the comparison means something
        assert (got.mode, got.fallback) == (want.mode, want.fallback), question
        assert [(h.doc, h.cite, h.legs) for h in got.hits] == [
            (h.doc, h.cite, h.legs) for h in want.hits
        ], question
        for mine, theirs in zip(got.hits, want.hits, strict=True):
            assert mine.score == pytest.approx(theirs.score, abs=1e-5), question
    health = [library.catalog.overview().health["vectors"] for library in (sqlite, postgres)]
    assert health[1] == health[0], health


def test_a_replaced_documents_old_vectors_go_with_its_chunks(
    both: tuple[Library, Library], postgres_url: str
) -> None:
    _, postgres = both
    before = postgres.vectors.state()
    assert before.embedded > 0 and before.pending == 0
    title, _content, uri, _tags = DOCUMENTS[0]
    postgres.writing.add_document(title, "# Deploy\n\nDrain the load balancer first.\n", uri)
    after = postgres.vectors.state()
    assert after.embedded < before.embedded and after.pending == 1
    assert postgres.vectors.embed_pending().complete
    with psycopg.connect(postgres_url) as conn:
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        (key,) = conn.execute("SELECT key FROM embedding_signatures").fetchone()
        stored = conn.execute(f"SELECT COUNT(*) FROM vec_{key}").fetchone()[0]
    assert stored == chunks == postgres.vectors.state().embedded
    hits = postgres.lookup.search("drain the load balancer").hits
    assert hits[0].doc == uri or hits[0].title == title


class _Watching:
    """``HashEmbedder`` that, at each batch, records the locks on ``chunks`` that would
    stop another server adding a document (taken by creating a table that references it)."""

    def __init__(self, url: str) -> None:
        self.inner = HashEmbedder("hash-64")
        self.url = url
        self.blocking: list[str] = []

    @property
    def signature(self) -> EmbeddingSignature:
        return self.inner.signature

    def availability(self) -> Availability:
        return Availability(True)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        with psycopg.connect(self.url) as conn:
            found = conn.execute(
                "SELECT l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE c.relname = 'chunks' AND l.granted AND l.mode IN "
                "('ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')"
            ).fetchall()
        self.blocking += [mode for (mode,) in found]
        return self.inner.embed(texts, kind)


def test_a_new_models_table_does_not_hold_chunk_writers_while_it_embeds(
    tmp_path: Path, postgres_url: str
) -> None:
    """Creating a signature's table (it references ``chunks``) locks out every writer of
    chunks until it commits: it commits before the first passage is embedded."""
    watching = _Watching(postgres_url)
    settings = dataclasses.replace(
        Settings(home=tmp_path / "home"),
        allow_agent_writes=True,
        embedder="test",
        embed_model="hash-64",
        store=Store(postgres_url),
    )
    with Library(settings, make_embedder=lambda _p, _m: watching) as library:
        for title, content, uri, _tags in DOCUMENTS:
            library.writing.add_document(title, content, uri)
        assert library.vectors.embed_pending(batch=1).complete
    assert watching.blocking == []
