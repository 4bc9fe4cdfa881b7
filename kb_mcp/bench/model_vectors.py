"""Passage vectors for the 100k-chunk bench library, derived from the model's own vectors.

Why: embedding 100k passages with the local model takes hours on two cores, and the
uniformly random stand-in vectors used before were not neutral for the vector index
(random directions make every candidate about equally near a question, so the sign-code
pre-selection and the float rescoring behave unlike real data; docs/retrieval.md).

So the bench holds the model's vectors of a few thousand real abstracts and gives every
chunk of the large library (sentences of those abstracts mixed by ``embed_perf.variant``)
the sentence-weighted mean of its source abstracts' vectors, plus Gaussian noise of norm
``NOISE`` seeded by the chunk's text, normalized. Near-copies of an abstract land near one
another, as the model puts them, and a question meets its neighbours at real cosines.

Where the model's vectors come from, in this order: the cache in the bench's working
folder (``CACHE_NAME``); a library that already holds them under the same signature
(``bench perf --vectors-from KB_DB``: a library of the SciFact abstracts embedded by the
same model; a copy is read), each abstract's vector the mean of
its chunks'; else the model embeds ``EMBED_DOCS`` abstracts once.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kb_mcp.bench.corpus import Doc, sentences, standin_vectors
from kb_mcp.home import DB_FILE

if TYPE_CHECKING:
    from kb_mcp.embed.base import Embedder, EmbeddingSignature

CACHE_NAME = "model-vectors-{key}.npz"
EMBED_DOCS = 3_000
# Norm of the noise added to a chunk's mean vector before normalizing: cosine ≈ 0.99
# between a chunk and its source mean, so copies of one abstract stay distinct but close.
NOISE = 0.15
EMBED_BATCH = 64


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


@dataclass(slots=True)
class ModelVectors:
    """The model's vectors of real abstracts, and of some exact passage texts."""

    docs: list[Doc]  # the abstracts that have a model vector, in corpus order
    matrix: np.ndarray  # one unit vector per abstract (float32)
    exact: dict[str, np.ndarray]  # digest of an embedded text → the model's vector of it
    unmatched: int = 0  # derived texts none of whose sentences came from ``docs``
    embedded_anew: int = 0  # texts ``exact_or`` had to embed with the model
    _owner: dict[str, int] = field(default_factory=dict)  # sentence → index in ``docs``

    def __post_init__(self) -> None:
        self._owner = _sentence_owners(self.docs)

    def derived(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's source abstracts' vectors, weighted by its sentences from each,
        plus seeded noise, normalized. A text with no known sentence gets a stand-in."""
        rows = np.empty((len(texts), self.matrix.shape[1]), dtype=np.float32)
        for i, text in enumerate(texts):
            counts = Counter(self._owner[s] for s in sentences(text) if s in self._owner)
            if not counts:
                self.unmatched += 1
                rows[i] = standin_vectors([text], self.matrix.shape[1])[0]
                continue
            mean = sum(n * self.matrix[d] for d, n in counts.items())
            seed = int(_digest(text)[:16], 16)
            noise = np.random.default_rng(seed).standard_normal(mean.shape[0])
            mean = mean / np.linalg.norm(mean)
            rows[i] = mean + NOISE * noise / np.linalg.norm(noise)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def exact_or(
        self, texts: Sequence[str], embed: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """The model's own vector of each text: from ``exact``, else ``embed`` (kept)."""
        missing = [t for t in dict.fromkeys(texts) if _digest(t) not in self.exact]
        if missing:
            self.embedded_anew += len(missing)
            for text, vector in zip(missing, embed(missing), strict=True):
                self.exact[_digest(text)] = np.asarray(vector, dtype=np.float32)
        return np.stack([self.exact[_digest(t)] for t in texts])

    def save(self, path: Path, signature_key: str, corpus: Sequence[Doc]) -> None:
        """Write the vectors as ``path`` (numpy ``.npz``), abstracts by corpus index."""
        index = {doc: i for i, doc in enumerate(corpus)}
        keys = sorted(self.exact)
        np.savez(
            path,
            key=np.array(signature_key),
            docs=np.array([index[d] for d in self.docs], dtype=np.int64),
            matrix=self.matrix,
            exact_keys=np.array(keys),
            exact=np.stack([self.exact[k] for k in keys]) if keys else np.zeros((0, 1)),
        )


def _sentence_owners(docs: Sequence[Doc]) -> dict[str, int]:
    """Sentence → index of the first abstract that holds it."""
    owner: dict[str, int] = {}
    for i, doc in enumerate(docs):
        for sentence in sentences(doc.text):
            owner.setdefault(sentence, i)
    return owner


def load_cache(path: Path, signature_key: str, corpus: Sequence[Doc]) -> ModelVectors | None:
    """The cached vectors at ``path``, or None when absent or of another signature."""
    if not path.is_file():
        return None
    data = np.load(path)
    if str(data["key"]) != signature_key:
        return None
    exact = dict(zip(data["exact_keys"].tolist(), data["exact"], strict=True))
    return ModelVectors([corpus[i] for i in data["docs"]], data["matrix"], exact)


def from_library(
    db_file: Path, signature: EmbeddingSignature, corpus: Sequence[Doc], workdir: Path
) -> ModelVectors | None:
    """The vectors a library holds under ``signature``, read from a copy of it (the
    original is left alone): exact ones by embedded text, and per abstract the mean of
    the chunks whose sentences it holds. None when it has none of that signature."""
    from kb_mcp.index import vectors
    from kb_mcp.index.vectors import embedding_text
    from kb_mcp.store import documents as rows
    from kb_mcp.store.db import Database

    if not db_file.is_file():
        return None
    copy = workdir / "reused" / DB_FILE
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db_file, copy)
    db = Database(copy)
    try:
        found = vectors.find_signature(db.conn, signature.key)
        if found is None:
            return None
        ids, matrix = vectors.all_vectors(db.conn, found.id)
        passages = rows.passages(db.conn, ids)
    finally:
        db.close()
    owner = _sentence_owners(corpus)
    sums = np.zeros((len(corpus), signature.dims), dtype=np.float64)
    exact: dict[str, np.ndarray] = {}
    for chunk_id, vector in zip(ids, matrix, strict=True):
        p = passages.get(chunk_id)
        if p is None:
            continue
        text = embedding_text(p.title, p.heading_path, p.text, signature.max_chars)
        exact[_digest(text)] = vector
        for sentence in sentences(p.text):
            if sentence in owner:
                sums[owner[sentence]] += vector
                break  # one abstract per chunk: its first known sentence's
    kept = [i for i in range(len(corpus)) if sums[i].any()]
    if not kept:
        return None
    means = sums[kept] / np.linalg.norm(sums[kept], axis=1, keepdims=True)
    return ModelVectors([corpus[i] for i in kept], means.astype(np.float32), exact)


def embedded(model: Embedder, corpus: Sequence[Doc], count: int = EMBED_DOCS) -> ModelVectors:
    """The model embeds the first ``count`` abstracts, as their Markdown file's chunk
    would be embedded (title, blank line, text): slow, done once, then cached."""
    from kb_mcp.index.vectors import embedding_text

    docs = list(corpus[:count])
    texts = [embedding_text(d.title, (d.title,), d.text, model.signature.max_chars) for d in docs]
    parts = [model.embed(texts[at : at + EMBED_BATCH]) for at in range(0, len(texts), EMBED_BATCH)]
    matrix = np.concatenate(parts).astype(np.float32)
    exact = {_digest(t): v for t, v in zip(texts, matrix, strict=True)}
    return ModelVectors(docs, matrix, exact)


def model_vectors(
    model: Embedder,
    corpus: Sequence[Doc],
    workdir: Path,
    reuse: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> ModelVectors:
    """The model's vectors of ``corpus`` abstracts: cached, reused, or embedded (then
    cached in ``workdir``), in that order of preference."""
    key = model.signature.key
    cache = workdir / CACHE_NAME.format(key=key)
    found = load_cache(cache, key, corpus)
    if found is not None:
        log(f"model vectors of {len(found.docs)} abstracts from the cache {cache}")
        return found
    found = from_library(reuse, model.signature, corpus, workdir) if reuse else None
    if found is not None:
        log(f"model vectors of {len(found.docs)} abstracts reused from {reuse}")
    else:
        log(f"embedding {min(EMBED_DOCS, len(corpus))} abstracts with the model (once)")
        found = embedded(model, corpus)
    found.save(cache, key, corpus)
    return found
