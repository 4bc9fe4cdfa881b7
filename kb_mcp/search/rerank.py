"""The reranker in a search: the first ranked passages reordered within the deadline.

What the engine calls (``Reranking.reorder``, once per search, after the ranking model
and its abstention, before the hits are built). Only the first ``RERANK_PASSAGES``
candidates are read: a reranker reads each passage with the question, which costs per
passage, and a document the legs ranked below them is seldom the answer.

The order it makes is still the order of the scores (``search/adjust.py``): a candidate
the reranker moves takes the score of the place it moves to, and says so in an
``Adjustment`` ("reranked by onnx …: #4 → #1"). Candidates it scores alike keep their
order.

It never fails a search. It runs in a thread of its own, given what is left of the
search's deadline (``search_timeout_ms``, counted from when the search's database work
starts; a model read lazily is read before, once: ``loaded``). Past it, or when the
reranker fails or cannot be built, the ranked order stands and the result's reason says
``reranker skipped: …``. A reranker that cannot be interrupted (an in-process model)
finishes alone; while ``MAX_RUNNING`` such runs are still going, a search does not
start another.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kb_mcp.errors import KbError
from kb_mcp.index.columns import head_text
from kb_mcp.rerank.base import Passage, Reranker, RerankerUnavailable

if TYPE_CHECKING:
    from kb_mcp.search.adjust import Candidate
    from kb_mcp.search.rank import Ranking

RERANK_PASSAGES = 20
MAX_RUNNING = 2
_running = threading.BoundedSemaphore(MAX_RUNNING)


def reordered(head: Sequence[Candidate], scores: Sequence[float], name: str) -> list[Candidate]:
    """``head`` in the order of ``scores`` (stable: ties keep the ranked order); each moved
    candidate takes the score of its new place, with the adjustment that says why."""
    rated = [score if math.isfinite(score) else -math.inf for score in scores]
    order = sorted(range(len(head)), key=lambda i: -rated[i])
    moved = []
    for new, old in enumerate(order):
        candidate = head[old]
        if new != old:
            reason = f"reranked by {name} (score {scores[old]:.3g}): #{old + 1} → #{new + 1}"
            candidate = candidate.moved_to(head[new].score, reason)
        moved.append(candidate)
    return moved


def loaded(reranker: Reranker) -> Reranker:
    """``reranker``, its model read first when it reads one lazily (``load()``, the onnx
    one), as the question's embedder is (``search/vector.embed_within``): once, before
    the deadline starts. A load that fails is remembered by the reranker and reported by
    its ``scores`` as the reason it was skipped."""
    load = getattr(reranker, "load", None)
    if callable(load):
        with contextlib.suppress(KbError):
            load()
    return reranker


class Reranking:
    """A reranker with the time one search has left; built by the Library per search,
    when the search's deadline starts."""

    def __init__(
        self,
        reranker: Reranker,
        budget_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reranker = reranker
        self._clock = clock
        self._until = clock() + budget_s

    def reorder(self, question: str, ranking: Ranking) -> tuple[Ranking, str | None]:
        """``ranking`` with its first candidates in the reranker's order, or unchanged
        with the reason the reranker was skipped."""
        head = ranking.order[:RERANK_PASSAGES]
        if len(head) < 2:
            return ranking, None
        passages = []
        for candidate in head:
            found = ranking.passage(candidate.key)
            passages.append(
                Passage(candidate.key, head_text(found.title, found.heading_path), found.text)
            )
        try:
            scores = self._scores_in_time(question, passages)
        except KbError as error:
            return ranking, f"reranker skipped: {error.message}"
        order = reordered(head, scores, self.reranker.name) + ranking.order[len(head) :]
        return replace(ranking, order=order), None

    def _scores_in_time(self, question: str, passages: list[Passage]) -> list[float]:
        left = self._until - self._clock()
        if left <= 0:
            raise RerankerUnavailable("no time left of the search's deadline")
        if not _running.acquire(blocking=False):
            raise RerankerUnavailable(f"{MAX_RUNNING} earlier rerankings are still running")
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["scores"] = self.reranker.scores(question, passages)
            except KbError as error:  # re-raised in the search's thread below
                box["error"] = error
            except Exception as error:  # a reranker's bug must not fail the search either
                box["error"] = RerankerUnavailable(f"failed: {type(error).__name__}: {error}")
            finally:
                _running.release()

        worker = threading.Thread(target=run, name="kb-mcp-rerank", daemon=True)
        worker.start()
        worker.join(left)
        if worker.is_alive():
            raise RerankerUnavailable(f"timed out after {round(left * 1000)} ms")
        if "error" in box:
            raise box["error"]
        scores = box["scores"]
        if len(scores) != len(passages):
            raise RerankerUnavailable(f"{len(scores)} scores for {len(passages)} passages")
        return scores
