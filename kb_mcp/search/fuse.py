"""Weighted Reciprocal Rank Fusion, recency tie-break, and per-hit contributions. Pure.

RRF (Cormack, Clarke & Büttcher, SIGIR 2009): a passage at 1-based rank r in a leg adds
``weight / (k + r)``. k = 60 is the paper's value; it flattens the head of each list so
no single leg dominates. The score and its explanation come from one computation: each
``FusedHit`` carries the contributions it summed, and "which legs matched" reads them.

Legs are fused on a key: the chunk id by default, or whatever ``group`` maps a chunk to.
The engine fuses on the document, because it answers with one passage per document and
two legs may pick different passages of the same document as its best: fused on chunks,
a document both legs found would count as two half-found ones.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


@dataclass(frozen=True, slots=True)
class LegHit:
    """One passage in one leg's ranking: 1-based rank and the leg's own score."""

    chunk_id: int
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Contribution:
    leg: str
    rank: int
    leg_score: float
    weight: float
    value: float
    chunk_id: int


@dataclass(frozen=True, slots=True)
class FusedHit:
    key: Hashable
    score: float
    contributions: tuple[Contribution, ...]
    # The passage that stands for this hit: the strongest contribution's (first leg on
    # ties, so with the keyword leg first, its passage wins a tie). Chosen once: the
    # ranking reads it for every candidate several times (66k reads in 100 searches).
    chunk_id: int = field(init=False)

    def __post_init__(self) -> None:
        strongest = max(self.contributions, key=lambda c: c.value)
        object.__setattr__(self, "chunk_id", strongest.chunk_id)

    @property
    def legs(self) -> tuple[str, ...]:
        return tuple(c.leg for c in self.contributions)


def fuse_rankings(
    legs: Mapping[str, Sequence[LegHit]],
    weights: Mapping[str, float] | None = None,
    recency: Mapping[Hashable, str] | None = None,
    k: int = RRF_K,
    group: Mapping[int, Hashable] | None = None,
) -> list[FusedHit]:
    """Fuse ranked legs into one list, best first.

    ``group`` maps a chunk id to the key it is fused on (missing: the chunk id itself); a
    leg should rank each key once, as its best passage. Ties on the fused score go to the
    more recent key (``recency``: key → ISO date; missing dates sort oldest), then to the
    lower chunk id for a stable order.
    """
    weights = weights or {}
    recency = recency or {}
    group = group or {}
    summed: dict[Hashable, list[Contribution]] = {}
    for leg, hits in legs.items():
        weight = weights.get(leg, 1.0)
        for hit in hits:
            value = weight / (k + hit.rank)
            summed.setdefault(group.get(hit.chunk_id, hit.chunk_id), []).append(
                Contribution(leg, hit.rank, hit.score, weight, value, hit.chunk_id)
            )
    fused = [
        FusedHit(key, sum(c.value for c in parts), tuple(parts)) for key, parts in summed.items()
    ]
    fused.sort(key=lambda h: h.chunk_id)
    fused.sort(key=lambda h: recency.get(h.key, ""), reverse=True)
    fused.sort(key=lambda h: round(h.score, 12), reverse=True)
    return fused
