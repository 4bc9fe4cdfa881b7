"""Adjustments that explain themselves: every change to the fused order is a factor. Pure.

A search answers with one score per result, and that score must explain the order: a
result never shows a lower score than the one below it. So nothing reorders results
behind the score's back. Every rule that moves a document (freshness demotions, the
as-of cut, recency on near-ties, a path prior) multiplies the document's fused score by
a factor and records why, as an ``Adjustment``; the order is the adjusted score's.

A factor on the fused (RRF) scale reads in ranks: 1 / (60 + r) × f equals
1 / (60 + r'), so f moves a document from rank r to r' = (60 + r) / f − 60. Near the
head of one leg, f = 0.95 is about three ranks down and f = 0.5 about sixty: scores
under RRF are flat (1/61, 1/62, …), and factors tuned on bm25 ratios mean far more here.

Rules come in two kinds. A *factor rule* (``Rule``) looks at one candidate alone and
returns an ``Adjustment`` or None; ``apply_rules`` applies all of them, then orders by
the result. An *order pass* (``freshness.reorder``) looks at neighbours; it moves a
document by raising or lowering its score to its new neighbour's, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Adjustment:
    """Why a document's score changed, and by what factor (below 1 demotes)."""

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
    section_date: str | None = None  # a changelog entry's own date (``freshness.section_date``)
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


Rule = Callable[[Candidate], Adjustment | None]


def apply_rules(candidates: Iterable[Candidate], rules: Sequence[Rule]) -> list[Candidate]:
    """Every rule's factor applied to every candidate, then best first by adjusted score.

    The sort is stable, so candidates left level keep the fused order (and its recency
    tie-break).
    """
    adjusted = []
    for candidate in candidates:
        for rule in rules:
            found = rule(candidate)
            if found is not None:
                candidate = candidate.adjusted(found)
        adjusted.append(candidate)
    adjusted.sort(key=lambda c: -c.score)
    return adjusted
