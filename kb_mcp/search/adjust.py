"""Candidates and the adjustments that explain a move. Pure.

A search answers with one score per result, and that score must explain the order: a
result never shows a lower score than the one below it. A candidate's score is the
ranking model's probability that it answers (``search/model.py``); what moves a document
after the model (the relation pass, ``search/relations.py``; a reranker,
``search/rerank.py``) gives it the score of the place it moves to and records why, as an
``Adjustment`` whose factor is the ratio of the two scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Adjustment:
    """Why a document moved after ranking, and the ratio of its new score to its old."""

    reason: str
    factor: float

    def describe(self) -> str:
        return f"{self.reason} ×{self.factor:.3g}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One document in the running: its fused score, what rules read, what moved it."""

    key: str
    score: float
    date: str | None = None
    superseded_on: str | None = None
    superseded_by: str | None = None
    status: str = "current"
    topic: str = ""  # title and section: two versions of a fact share most of it
    path: str | None = None
    evidence: Mapping[str, float] = field(default_factory=dict)  # leg → its own score
    adjustments: tuple[Adjustment, ...] = ()

    def adjusted(self, adjustment: Adjustment) -> Candidate:
        return replace(
            self,
            score=self.score * adjustment.factor,
            adjustments=(*self.adjustments, adjustment),
        )

    def moved_to(self, score: float, reason: str) -> Candidate:
        """This candidate at exactly ``score`` (a neighbour's), with the factor that took it
        there: an order pass places a document by its neighbour's score, never past it."""
        factor = score / self.score if self.score else 1.0
        return replace(
            self, score=score, adjustments=(*self.adjustments, Adjustment(reason, factor))
        )
