"""The vector leg as the engine sees it: a small port the Library passes in.

The engine does no embedding and no SQL. It asks a ``VectorLeg`` whether it can run
(``state``) and, when it can, for the passages nearest the question (``search``). The
Library builds the leg from its active embedder and vector index, or passes None when
no embedder is configured; everything about models, signatures and tables stays behind
this port.

A leg that cannot run is an expected outcome, never an error: ``state`` says why
(no embedder, vectors still being built, the embedder down), and the engine answers with
keyword results, ``fallback: "keyword"`` and that reason. A leg whose ``search`` fails
mid-query raises ``EmbedderUnavailable``, and the engine falls back the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kb_mcp.search.fuse import LegHit

if TYPE_CHECKING:  # embed.base imports numpy: keyword-only search must not
    from kb_mcp.embed.base import Embedder, EmbeddingSignature
    from kb_mcp.store.db import Database


@dataclass(frozen=True, slots=True)
class VectorState:
    """Whether the vector leg can run now, and if not, the reason a person can act on."""

    usable: bool
    reason: str | None = None

    @classmethod
    def ready(cls) -> VectorState:
        return cls(True)

    @classmethod
    def unavailable(cls, reason: str) -> VectorState:
        return cls(False, reason)


NO_EMBEDDER = VectorState.unavailable("no embedder configured (--embedder none)")


# Share of passages that must have vectors before the vector leg runs. Below it, fused
# results would favour whatever happened to be embedded first: a passage found by both
# legs at rank 5 (2/65) outscores one only keyword can find at rank 1 (1/61).
USABLE_COVERAGE = 0.95


def building(embedded: int, total: int) -> VectorState:
    """The state while passages are still being embedded."""
    return VectorState.unavailable(
        f"vectors still being built: {embedded:,} of {total:,} passages embedded"
    )


def coverage_state(embedded: int, pending: int) -> VectorState:
    """Ready once ``USABLE_COVERAGE`` of the passages have vectors, else still building."""
    total = embedded + pending
    if total and embedded >= USABLE_COVERAGE * total:
        return VectorState.ready()
    return building(embedded, total)


@runtime_checkable
class VectorLeg(Protocol):
    """Nearest passages to a question, by the active embedding signature."""

    embed_seconds: float  # time spent embedding questions so far (reported apart)

    @property
    def signature(self) -> EmbeddingSignature:
        """The model whose vectors this leg compares (the engine's calibration key)."""
        ...

    def state(self) -> VectorState:
        """Cheap (no model call): can ``search`` run now, and if not, why."""
        ...

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        """Up to ``limit`` passages, nearest first: 1-based rank, cosine as the score.

        Raises ``EmbedderUnavailable`` when the question cannot be embedded.
        """
        ...


class NearestIndex(Protocol):
    """What the leg needs of ``index/vectors.VectorIndex``."""

    def search(
        self, conn: Any, sig_id: int, query_vector: Any, limit: int, source_id: int | None = None
    ) -> list[tuple[int, float]]: ...


class EmbeddedLeg:
    """The vector leg over the library's vector index: embed the question, ask the index.

    Built by the Library per search from its vector state (which signature is usable, and
    the embedder that reads queries for it). It times the query embedding, so the bench
    can report it apart from the search.
    """

    def __init__(
        self,
        db: Database,
        index: NearestIndex,
        embedder: Embedder,
        signature_id: int,
        state: VectorState,
    ) -> None:
        self._db, self._index, self._embedder = db, index, embedder
        self._signature_id, self._state = signature_id, state
        self.embed_seconds = 0.0

    @property
    def signature(self) -> EmbeddingSignature:
        return self._embedder.signature

    def state(self) -> VectorState:
        return self._state

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        started = time.perf_counter()
        try:
            vector = self._embedder.embed([query], kind="query")[0]
        finally:
            self.embed_seconds += time.perf_counter() - started
        nearest = self._index.search(self._db.conn, self._signature_id, vector, limit, source_id)
        return [LegHit(cid, rank, cosine) for rank, (cid, cosine) in enumerate(nearest, start=1)]


class UnusableLeg:
    """A configured vector leg that cannot run now; ``state`` says why."""

    embed_seconds = 0.0

    def __init__(self, reason: str) -> None:
        self._state = VectorState.unavailable(reason)

    @property
    def signature(self) -> EmbeddingSignature:
        raise RuntimeError("an unusable vector leg has no signature to search with")

    def state(self) -> VectorState:
        return self._state

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        raise RuntimeError("an unusable vector leg cannot search")
