"""``bench/model_vectors.py``: the 100k bench library's vectors, derived from the model's.

The bench's hybrid figure at 100k chunks is only as good as its vectors: a chunk's vector
must sit near its source abstracts' model vectors (so questions meet real cosines, not
the uniform randomness that made the old stand-in cheaper to search), copies must differ,
and reused vectors must be the model's own, of the same signature, read from a copy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kb_mcp.bench import corpus, embed_perf, model_vectors
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from tests.hash_embedder import HashEmbedder

DOCS = [
    corpus.Doc("Cache eviction", "Caches evict old entries. The LRU policy is common."),
    corpus.Doc("Vector search", "Neighbours are found by cosine. Codes speed it up."),
    corpus.Doc("Sleep and memory", "Sleep consolidates memory. Naps help recall."),
]


def _library_with_vectors(tmp_path: Path, embedder: HashEmbedder) -> Path:
    folder = tmp_path / "corpus"
    embed_perf.write_prose_folder(folder, DOCS, len(DOCS))
    settings = Settings(home=tmp_path / "home", embedder="local")
    with Library(settings, make_embedder=lambda provider, model: embedder) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        lib.vectors.embed_pending()
    return tmp_path / "home" / "kb.db"


def test_derived_vectors_sit_near_their_source_abstracts() -> None:
    """A varied copy is nearest its base abstract's vector (two of its three sentences
    are the base's; the third is another abstract's), two copies differ, and text from
    nowhere gets a stand-in that is counted."""
    matrix = HashEmbedder(dims=64).embed([d.text for d in DOCS])
    found = model_vectors.ModelVectors(list(DOCS), matrix, {})
    copies = [corpus.variant(DOCS, n).text for n in (3, 6)]  # abstract 0, copies 1, 2
    derived = found.derived(copies)
    assert np.allclose(np.linalg.norm(derived, axis=1), 1.0, atol=1e-5)
    assert (np.argmax(derived @ matrix.T, axis=1) == 0).all()
    assert (derived @ matrix[0] > 0.8).all()
    assert not np.allclose(derived[0], derived[1])
    assert np.array_equal(found.derived(copies), derived)  # deterministic
    assert found.unmatched == 0
    found.derived(["Nothing of this was ever written."])
    assert found.unmatched == 1


def test_reused_library_vectors_are_the_models_own(tmp_path: Path) -> None:
    """Vectors read back from a library (a copy of it) are exactly the model's vectors of
    the embedded texts; another signature's library is not used; the cache round-trips."""
    embedder = HashEmbedder(dims=64)
    db_file = _library_with_vectors(tmp_path, embedder)
    before = db_file.read_bytes()
    work = tmp_path / "work"
    found = model_vectors.from_library(db_file, embedder.signature, DOCS, work)
    assert found is not None and found.docs == DOCS
    assert db_file.read_bytes() == before  # the original library is left alone
    texts = [f"{d.title}\n\n{d.text}" for d in DOCS]
    exact = found.exact_or(texts, lambda missing: embedder.embed(missing))
    assert found.embedded_anew == 0
    assert np.allclose(exact, embedder.embed(texts), atol=1e-6)
    other = HashEmbedder(model="hash-other", dims=64).signature
    assert model_vectors.from_library(db_file, other, DOCS, work) is None
    cache = work / "cache.npz"
    found.save(cache, embedder.signature.key, DOCS)
    again = model_vectors.load_cache(cache, embedder.signature.key, DOCS)
    assert again is not None and again.docs == DOCS
    assert np.array_equal(again.matrix, found.matrix)
    assert model_vectors.load_cache(cache, "0123456789ab", DOCS) is None
