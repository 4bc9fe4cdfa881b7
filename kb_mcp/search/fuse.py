"""Weighted Reciprocal Rank Fusion, recency tie-break, and per-hit contributions. Pure.

RRF (Cormack, Clarke & Büttcher, SIGIR 2009): a passage at 1-based rank r in a leg adds
``weight / (k + r)``. k = 60 is the paper's value; it flattens the head of each list so
no single leg dominates. The score and its explanation come from one computation: each
``FusedHit`` carries the contributions it summed, and "which legs matched" reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class FusedHit:
    chunk_id: int
    score: float
    contributions: tuple[Contribution, ...]

    @property
    def legs(self) -> tuple[str, ...]:
        return tuple(c.leg for c in self.contributions)


def fuse_rankings(
    legs: Mapping[str, Sequence[LegHit]],
    weights: Mapping[str, float] | None = None,
    recency: Mapping[int, str] | None = None,
    k: int = RRF_K,
) -> list[FusedHit]:
    """Fuse ranked legs into one list, best first.

    Ties on the fused score go to the more recent passage (``recency``: chunk id → ISO
    date; missing dates sort oldest), then to the lower chunk id for a stable order.
    """
    weights = weights or {}
    recency = recency or {}
    summed: dict[int, list[Contribution]] = {}
    for leg, hits in legs.items():
        weight = weights.get(leg, 1.0)
        for hit in hits:
            value = weight / (k + hit.rank)
            summed.setdefault(hit.chunk_id, []).append(
                Contribution(leg, hit.rank, hit.score, weight, value)
            )
    fused = [
        FusedHit(cid, sum(c.value for c in parts), tuple(parts)) for cid, parts in summed.items()
    ]
    fused.sort(key=lambda h: h.chunk_id)
    fused.sort(key=lambda h: recency.get(h.chunk_id, ""), reverse=True)
    fused.sort(key=lambda h: round(h.score, 12), reverse=True)
    return fused
