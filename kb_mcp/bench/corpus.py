"""The benches' real text: BEIR records, endless variants of them, and stand-in vectors.

Shared by ``bench/embed_perf.py`` (the libraries it builds and times) and
``bench/model_vectors.py`` (the passage vectors derived from a model's vectors of the
same abstracts), which both need the same records and the same sentence split.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class Doc:
    """One corpus record: a title (may be empty) and its text."""

    title: str
    text: str


def read_corpus(path: Path) -> list[Doc]:
    """The records of a BEIR ``corpus.jsonl``, in file order."""
    docs = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            docs.append(Doc(record.get("title") or "", record.get("text") or ""))
    return docs


def read_queries(path: Path, limit: int) -> list[str]:
    """The first ``limit`` query texts of a BEIR ``queries.jsonl``."""
    queries = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            queries.append(json.loads(line)["text"])
            if len(queries) == limit:
                break
    return queries


def sentences(text: str) -> list[str]:
    """A text cut after each full stop or question mark followed by a space."""
    parts = [part.strip() for part in text.replace("? ", "?\n").replace(". ", ".\n").split("\n")]
    return [part for part in parts if part]


def variant(docs: list[Doc], n: int) -> Doc:
    """The ``n``-th document of an endless real-text corpus: abstract ``n % len(docs)``,
    copy ``n // len(docs)``. Copy 0 is the abstract as it is; copy k rotates its
    sentences by k and appends a sentence of another abstract, so copies differ."""
    base = docs[n % len(docs)]
    copy = n // len(docs)
    if copy == 0:
        return base
    parts = sentences(base.text)
    shift = copy % max(1, len(parts))
    other = sentences(docs[(n * 7 + copy) % len(docs)].text)
    extra = other[copy % len(other)] if other else ""
    text = " ".join(parts[shift:] + parts[:shift] + [extra])
    return Doc(f"{base.title} ({copy})", text)


def standin_vectors(texts: list[str], dims: int) -> np.ndarray:
    """Unit vectors that depend only on each text (seeded by its digest): the cheap
    stand-in for the model's passage vectors in the 100k library. Uniformly random
    directions are the hardest case for the index's sign codes (no structure to
    exploit), so a timing with them is not flattered."""
    import numpy as np

    rows = np.empty((len(texts), dims), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest())
        rows[i] = np.random.default_rng(seed).standard_normal(dims, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)
