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

The question is embedded BEFORE the search's database deadline starts
(``EmbeddedLeg.embed_question``, called by the Library): the deadline is for SQLite work,
and a slow embedding inside it used to abort the whole search once the next statement
ran past the time (``QueryTimeout``), under load even when the database work was quick.
The embedding has a budget of its own (``embed_within``); past it, the vector leg sits
the search out and the result says so, as when the embedder is down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kb_mcp.search.fuse import LegHit

if TYPE_CHECKING:  # embed.base imports numpy: keyword-only search must not
    from kb_mcp.embed.base import Embedder, EmbeddingSignature
    from kb_mcp.store.db import Database


@dataclass(frozen=True, slots=True)
class VectorState:
    """Whether the vector leg can run now, and if not, the reason a person can act on.
    A usable state may carry a ``reason`` too: what the leg does not cover yet, said with
    the answer (issue 22: an answer in a lesser mode than advertised says so)."""

    usable: bool
    reason: str | None = None

    @classmethod
    def ready(cls, note: str | None = None) -> VectorState:
        return cls(True, note)

    @classmethod
    def unavailable(cls, reason: str) -> VectorState:
        return cls(False, reason)


NO_EMBEDDER = VectorState.unavailable("no embedder configured (--embedder none)")


# Share of passages that must have vectors before the vector leg runs. Below it, fused
# results would favour whatever happened to be embedded first: a passage found by both
# legs at rank 5 (2/65) outscores one only keyword can find at rank 1 (1/61).
USABLE_COVERAGE = 0.95


# Said with every "still being built": nothing embeds in the background unless a server
# runs, and a library added with ``--embedder none`` then searched with the default
# ``local`` read "0 of 23,215 passages embedded" with no way forward (outsider run).
BUILD_HINT = "`kb-mcp embed` builds them, a running `kb-mcp serve` in the background"


def percent(part: int, whole: int) -> int:
    """``part`` of ``whole`` in whole percent, rounded down (99.9 % is not 100 %)."""
    return part * 100 // whole if whole else 0


def building_reason(embedded: int, total: int) -> str:
    """Why the vector leg waits: how far the vectors are, and what builds the rest."""
    return (
        f"vectors for {embedded:,} of {total:,} passages so far ({percent(embedded, total)} %): "
        f"keyword only until {round(USABLE_COVERAGE * 100)} % have one ({BUILD_HINT})"
    )


def building(embedded: int, total: int) -> VectorState:
    """The state while passages are still being embedded."""
    return VectorState.unavailable(building_reason(embedded, total))


def partial_note(embedded: int, total: int) -> str:
    """What a hybrid answer says while a few passages still wait for their vector."""
    left = total - embedded
    rest = "the other 1 is" if left == 1 else f"the other {left:,} are"
    one = "it has one" if left == 1 else "they have one"
    return (
        f"hybrid over vectors for {embedded:,} of {total:,} passages; "
        f"{rest} found by keyword until {one}"
    )


def coverage_state(embedded: int, pending: int) -> VectorState:
    """Ready once ``USABLE_COVERAGE`` of the passages have vectors (saying what the leg
    does not cover yet, while some still wait), else still building."""
    total = embedded + pending
    if total and embedded >= USABLE_COVERAGE * total:
        return VectorState.ready(partial_note(embedded, total) if pending else None)
    return building(embedded, total)


class HeldVectors(Protocol):
    """What ``readiness`` reads of the library's vectors (``results.VectorState``)."""

    @property
    def usable(self) -> bool: ...

    reason: str | None
    embedded: int
    pending: int


def readiness(held: HeldVectors) -> VectorState:
    """Whether a search's vector leg can run over the library's vectors: the one rule
    for searching and for the modes ``list`` advertises (issue 22: ``list`` said hybrid
    at 5 % coverage while searches ran keyword)."""
    if not held.usable:
        return VectorState.unavailable(held.reason or "no vectors yet")
    return coverage_state(held.embedded, held.pending)


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

    def unembedded(self, chunk_ids: Sequence[int]) -> set[int]:
        """Those of ``chunk_ids`` without a vector yet (written since the last embedding
        run): the engine stands in for the vector leg's rank of their documents."""
        ...


class NearestIndex(Protocol):
    """What the leg needs of ``index/vectors.VectorIndex``."""

    def search(
        self, conn: Any, sig_id: int, query_vector: Any, limit: int, source_id: int | None = None
    ) -> list[tuple[int, float]]: ...

    def loaded_through(self, sig_id: int) -> int | None: ...


# Question embeddings that outlived their budget keep their thread until the embedder
# returns: at most this many run at once, so a stuck embedder (a model swapped out, an
# embedding server that stopped answering) costs a few threads, not one per search.
MAX_QUESTION_EMBEDDINGS = 2
_question_slots = threading.BoundedSemaphore(MAX_QUESTION_EMBEDDINGS)


def embed_within(embedder: Embedder, query: str, timeout_s: float) -> Any:
    """The question's vector, or ``EmbedderUnavailable`` when the embedder fails or takes
    longer than ``timeout_s``.

    The call runs in a thread of its own: an in-process model cannot be interrupted, so
    past the budget its thread finishes alone and its vector is dropped. While
    ``MAX_QUESTION_EMBEDDINGS`` such threads still run, a search does not start another:
    it answers from keywords at once. A model that loads lazily (``load()``, the local
    one) is loaded first, outside the budget.
    """
    from kb_mcp.embed.base import EmbedderUnavailable

    load = getattr(embedder, "load", None)
    if callable(load):
        load()
    if not _question_slots.acquire(blocking=False):
        raise EmbedderUnavailable(
            f"{MAX_QUESTION_EMBEDDINGS} earlier question embeddings are still running",
            hint="the embedder is stuck or very slow; keyword results only until it answers",
        )
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["vector"] = embedder.embed([query], kind="query")[0]
        except Exception as exc:  # re-raised in the caller's thread below
            box["error"] = exc
        finally:
            _question_slots.release()

    worker = threading.Thread(target=run, name="kb-mcp-question-embedding", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise EmbedderUnavailable(
            f"embedding the question took longer than {round(timeout_s * 1000)} ms",
            hint="the machine is busy or the embedding server slow; keyword results only",
        )
    if "error" in box:
        raise box["error"]
    return box["vector"]


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
        # (question, its vector or why it has none), from ``embed_question``.
        self._question: tuple[str, Any, Exception | None] | None = None
        # The codes the last search could see: stored at or below this seq (None: all).
        self._seen_through: int | None = None

    @property
    def signature(self) -> EmbeddingSignature:
        return self._embedder.signature

    def state(self) -> VectorState:
        return self._state

    def embed_question(self, query: str, timeout_s: float) -> None:
        """Embed ``query`` now, in at most ``timeout_s``, for the ``search`` that follows
        (the Library calls this before the database deadline starts). A failure or a
        timeout is kept and raised by ``search``, so the engine falls back to keyword."""
        from kb_mcp.embed.base import EmbedderUnavailable

        started = time.perf_counter()
        try:
            self._question = (query, embed_within(self._embedder, query, timeout_s), None)
        except EmbedderUnavailable as exc:
            self._question = (query, None, exc)
        finally:
            self.embed_seconds += time.perf_counter() - started

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        if self._question is not None and self._question[0] == query:
            _, vector, failure = self._question
            if failure is not None:
                raise failure
        else:
            started = time.perf_counter()
            try:
                vector = self._embedder.embed([query], kind="query")[0]
            finally:
                self.embed_seconds += time.perf_counter() - started
        self._seen_through = self._index.loaded_through(self._signature_id)
        nearest = self._index.search(self._db.conn, self._signature_id, vector, limit, source_id)
        return [LegHit(cid, rank, cosine) for rank, (cid, cosine) in enumerate(nearest, start=1)]

    def unembedded(self, chunk_ids: Sequence[int]) -> set[int]:
        from kb_mcp.index.vector_store import embedded_among

        seen = embedded_among(self._db.conn, self._signature_id, chunk_ids, self._seen_through)
        return set(chunk_ids) - seen


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

    def unembedded(self, chunk_ids: Sequence[int]) -> set[int]:
        raise RuntimeError("an unusable vector leg has no vectors to look up")
