"""Retrieval metrics: plain functions over one ranked list and one query's judgements.

Conventions, chosen so our figures can be set beside published BEIR numbers
(BEIR scores with pytrec_eval, i.e. trec_eval):

- A doc is relevant when its grade is > 0. Grades <= 0 and unjudged docs count
  as not relevant.
- A ranked list is read best first. A doc id that repeats is counted at its
  first position only, and the cut-off ``k`` applies to distinct ids, so a
  retriever cannot earn credit twice for one doc by returning two of its chunks.
- nDCG uses linear gain (gain = grade) and the discount log2(rank + 1), with
  rank starting at 1. That is trec_eval's ``ndcg_cut``; the "2**grade - 1"
  variant would rank graded sets differently. The ideal ordering is built from
  every judged relevant doc, not only from the ones retrieved.
- A query with no relevant doc scores 0.0 on every measure; ``score_queries``
  leaves such queries out of its means, as trec_eval does, so abstention
  queries never dilute the figures.
- The mean and percentile of nothing are 0.0; callers report the count
  beside them (``Scores.n``), so an empty set reads as n = 0, not as a bad score.

Nothing here does I/O; the bench feeds these functions lists it got from the library.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from kb_mcp.errors import InvalidInput

__all__ = [
    "Scores",
    "avoids_all",
    "hit_at_k",
    "mean",
    "mrr_at_k",
    "ndcg_at_k",
    "percentile",
    "ranks_above",
    "recall_at_k",
    "score_queries",
    "top_k",
]


@dataclass(frozen=True, slots=True)
class Scores:
    """Means over ``n`` queries that have at least one relevant doc."""

    ndcg10: float
    recall10: float
    recall100: float
    mrr10: float
    hit10: float
    n: int


def ndcg_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain of the top ``k`` (trec_eval ``ndcg_cut``).

    DCG = sum over ranks r = 1..k of grade(doc at r) / log2(r + 1); nDCG divides
    it by the DCG of the best possible order of all judged relevant docs.
    """
    ideal = _dcg(sorted(_relevant_grades(rels), reverse=True)[:k])
    if ideal == 0.0:
        return 0.0
    gains = [max(rels.get(doc, 0), 0) for doc in top_k(ranked, k)]
    return _dcg(gains) / ideal


def recall_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    """Share of the relevant docs that appear in the top ``k``."""
    relevant = _relevant(rels)
    if not relevant:
        return 0.0
    return len(relevant.intersection(top_k(ranked, k))) / len(relevant)


def mrr_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    """1 / rank of the first relevant doc in the top ``k``, or 0.0 if none is there."""
    relevant = _relevant(rels)
    for rank, doc in enumerate(top_k(ranked, k), start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def hit_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    """1.0 if any relevant doc is in the top ``k``, else 0.0: did retrieval work at all."""
    relevant = _relevant(rels)
    return 1.0 if any(doc in relevant for doc in top_k(ranked, k)) else 0.0


def avoids_all(ranked: Sequence[str], banned: Collection[str]) -> float:
    """1.0 if no banned doc appears anywhere in ``ranked``, else 0.0.

    Scores retraction: a withdrawn doc must never come back, at any rank.
    """
    return 0.0 if any(doc in banned for doc in ranked) else 1.0


def ranks_above(ranked: Sequence[str], preferred: str, others: Collection[str]) -> float:
    """1.0 if ``preferred`` is retrieved and ranks above every retrieved doc in ``others``.

    Scores hypotheticals: the settled doc must outrank the speculative ones.
    A speculative doc that was not retrieved at all counts as ranked below.
    """
    for doc in _distinct(ranked):
        if doc == preferred:
            return 1.0
        if doc in others:
            return 0.0
    return 0.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; 0.0 for no values (report the count beside it)."""
    items = list(values)
    return math.fsum(items) / len(items) if items else 0.0


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile by the nearest-rank method; 0.0 for no values.

    Nearest rank returns an observed value (the ceil(p/100 * n)-th smallest),
    never an interpolated one, so a reported p95 latency is one a real call had.
    On 1..100, p50 is 50 and p95 is 95.
    """
    if not 0 <= p <= 100:
        raise InvalidInput(f"percentile must be between 0 and 100, got {p}")
    items = sorted(values)
    if not items:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(items)))
    return items[rank - 1]


def score_queries(
    runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> Scores:
    """Mean scores over the queries in ``qrels`` that have at least one relevant doc.

    A judged query missing from ``runs`` counts as an empty result (all zeros),
    so a query the engine failed on cannot raise the mean by being skipped.
    """
    judged = [(query, rels) for query, rels in qrels.items() if _relevant(rels)]
    ranked = [(runs.get(query, ()), rels) for query, rels in judged]
    return Scores(
        ndcg10=mean(ndcg_at_k(run, rels, 10) for run, rels in ranked),
        recall10=mean(recall_at_k(run, rels, 10) for run, rels in ranked),
        recall100=mean(recall_at_k(run, rels, 100) for run, rels in ranked),
        mrr10=mean(mrr_at_k(run, rels, 10) for run, rels in ranked),
        hit10=mean(hit_at_k(run, rels, 10) for run, rels in ranked),
        n=len(judged),
    )


def top_k(ranked: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct doc ids of ``ranked``, best first."""
    if k < 1:
        raise InvalidInput(f"k must be at least 1, got {k}")
    return list(islice(_distinct(ranked), k))


def _distinct(ranked: Iterable[str]) -> Iterable[str]:
    """Doc ids in order, each at its first position only (dict keeps insertion order)."""
    return dict.fromkeys(ranked)


def _relevant(rels: Mapping[str, int]) -> set[str]:
    return {doc for doc, grade in rels.items() if grade > 0}


def _relevant_grades(rels: Mapping[str, int]) -> list[int]:
    return [grade for grade in rels.values() if grade > 0]


def _dcg(gains: Sequence[int]) -> float:
    """Sum of gain / log2(rank + 1) over ranks starting at 1."""
    return math.fsum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))
