"""The keyword leg: a prepared ``Query`` → ranked passages from the FTS5 index.

**Pruning (issue 10).** FTS5 scores every posting of an OR query, so a question's common
words ("cells", "patients", a frequent Chinese character) make it score most of the
index, while their idf is small. MaxScore's argument makes that avoidable: a phrase adds
less than ``idf × (k1 + 1)`` to any passage's bm25, so a passage holding only the
*common* phrases scores below the sum of their bounds. When the best passage found among
those holding an *essential* (rarer) phrase scores above that sum, no passage outside
them can come first. So the leg ranks only the passages of the essential phrases, each by
its exact bm25 over the whole query (``FtsIndex.best_per_document(essential=...)``), and
checks the bound; when the check fails, or the essential phrases find fewer documents
than asked for, it runs the full OR as before.

What this keeps exactly: the first document, and every document whose score is above the
bound, in the same order with the same scores. What it may drop: documents below the
bound that hold only common words; they would rank among the last of the candidates.
Measured (``kb-mcp bench retrieval``, keyword mode, the four public test splits): nDCG@10
unchanged, see the README.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.query import Query, or_expression

# FTS5's bm25 constants (sqlite ext/fts5/fts5_aux.c): the bound below is its own formula.
BM25_K1 = 1.2
# A phrase is common, and left out of the essential set, when more than this share of the
# passages hold it. From `kb-mcp bench perf` at 100k chunks (SciFact queries): 1% left the
# bound unproved for most queries, 3% cut the leg's CPU time from 59 to 21 ms at the
# median with the first result proved for two thirds of them; higher shares gain less.
COMMON_PHRASE_SHARE = 0.03
# Below this many passages pruning does not pay: at 10k chunks (bench perf corpus, CPU
# time on the same index) SciFact queries took 12.6 against 14.1 ms at the median but
# 27 against 25 ms at p95 (a failed bound runs both), NFCorpus 14.4 against 11.4 at p95;
# at 100k the leg fell from 71 to 27 ms. With 2,000 here the four public test splits
# (all under 7k chunks, so pruned) scored the same nDCG@10 to the fourth digit.
PRUNE_MIN_CHUNKS = 30_000
# The bound must hold with room to spare: FTS5 counts its own rows (a chunk being
# written may be counted by one side only), so the idfs here may differ a little.
BOUND_MARGIN = 1.05


def keyword_leg(
    fts: FtsIndex,
    query: Query,
    documents: int,
    source_id: int | None = None,
    *,
    prune_min_chunks: int = PRUNE_MIN_CHUNKS,
) -> list[LegHit]:
    """The best passage of each of up to ``documents`` documents, best bm25 first; [] when
    the query has nothing to match. ``prune_min_chunks`` exists for tests."""
    expression = query.match_expression()
    if expression is None:
        return []
    matches = None
    plan = prune_plan(fts, query, prune_min_chunks) if source_id is None else None
    if plan is not None:
        found = fts.best_per_document(expression, documents, essential=plan.essential)
        if len(found) == documents and found[0][1] > plan.bound:
            matches = found
    if matches is None:
        matches = fts.best_per_document(expression, documents, source_id=source_id)
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(matches, start=1)]


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """The essential phrases' OR, and the most a passage without them can score."""

    essential: str
    bound: float


def bm25_idf(df: int, rows: int) -> float:
    """FTS5's idf: ``log((N - n + 0.5) / (n + 0.5))``, clamped to 1e-6 when not positive."""
    idf = math.log((rows - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6


def prune_plan(fts: FtsIndex, query: Query, min_chunks: int = PRUNE_MIN_CHUNKS) -> PrunePlan | None:
    """Which phrases are essential, or None when pruning cannot pay (a small library, no
    common phrase, or nothing but common ones).

    Only a one-token phrase can be common: its df is a vocabulary row. A query with a
    longer phrase (a CJK bigram) is not pruned: the bigrams would all be essential, and
    scoring their passages twice cost more than the full OR (CMRC2018 queries at 100k
    chunks: 95 against 60 ms CPU at the median).
    """
    rows = fts.chunk_count()
    if rows < min_chunks:
        return None
    units = query.match_units()
    tokens = {u: fts.query_tokens(u) for u in units}
    single = [u for u in units if len(tokens[u]) == 1]
    df = fts.doc_frequencies(tokens[u][0] for u in single)
    limit = COMMON_PHRASE_SHARE * rows
    common = {u for u in single if df.get(tokens[u][0], 0) > limit}
    essential = [u for u in units if u not in common]
    if not common or not essential or len(single) < len(units):
        return None
    bound = sum(bm25_idf(df[tokens[u][0]], rows) * (BM25_K1 + 1) for u in common)
    return PrunePlan(or_expression(essential) or "", bound * BOUND_MARGIN)
