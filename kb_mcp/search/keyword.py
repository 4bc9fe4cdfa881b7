"""The keyword leg: a prepared ``Query`` → ranked passages from the FTS5 index.

**The postings segment (issue 10).** From 30k chunks a library has one
(``index/postings.py``): the same bm25 ranking, scored with numpy from derived postings
instead of by FTS5, so the leg asks it first. Without one (a small library, a scoped
search, a phrase it does not key) the FTS5 path below answers.

**Pruning (issue 10).** FTS5 scores every posting of an OR query, so a question's common
words ("cells", "patients", a frequent Chinese character) make it score most of the
index, while their idf is small. MaxScore's argument makes that avoidable: a phrase adds
less than ``idf × (k1 + 1)`` to any passage's bm25, so a passage holding only the
*common* phrases scores below the sum of their bounds. When the best passage found among
those holding an *essential* (rarer) phrase scores above that sum, no passage outside
them can come first. So the leg ranks only the passages of the essential phrases, each by
its exact bm25 over the whole query (``FtsIndex.best_per_document(essential=...)``), and
checks the bound. When the check fails, the best score found says which common phrases
may still stay out (MaxScore's rule: those whose bounds add up to less than it), and a
second round ranks the passages of all the others; when that is every phrase, or the
essential phrases find fewer documents than asked for, it runs the full OR as before.

What this keeps exactly: the first document, and every document whose score is above the
bound, in the same order with the same scores. What it may drop: documents below the
bound that hold only common words; they would rank among the last of the candidates.
Measured (``kb-mcp bench retrieval``, keyword mode, the four public test splits): nDCG@10
unchanged, see the README. At 100k chunks the second round instead of the full OR, with
each passage scored once (``index/fts.py``), took SciFact queries' CPU p95 from 173 to
111 ms and NFCorpus' from 49 to 42 (one run, load 13-15; the median moved within noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kb_mcp.index.bm25 import BM25_K1, bm25_idf  # FTS5's bm25: the bound is its formula
from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.query import Query, or_expression

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
# Pruned rounds before the full OR: the second round's bound holds by construction, a
# third runs only when the essential phrases found too few documents.
MAX_ROUNDS = 3


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
    if source_id is None:
        matches = fts.segment_best_per_document(query.match_units(), documents)
    if matches is None and source_id is None:
        plan = prune_plan(fts, query, prune_min_chunks)
        matches = pruned_matches(fts, plan, expression, documents) if plan else None
    if matches is None:
        matches = fts.best_per_document(expression, documents, source_id=source_id)
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(matches, start=1)]


def pruned_matches(
    fts: FtsIndex, plan: PrunePlan, expression: str, documents: int
) -> list[tuple[int, float]] | None:
    """``best_per_document`` over the essential phrases' passages, or None when no round
    proves its first document (the caller then runs the full OR).

    MaxScore's rounds: when the first round's best score does not clear the bound of
    the phrases left out, that score still says which of them may stay out (the most
    common ones, whose bounds add up to less than it); the next round ranks the
    passages of all the others, and its best, at least as high, clears their bound. So
    a failed bound costs a second, larger pruned round instead of the full OR.
    """
    essential = plan.first
    for _ in range(MAX_ROUNDS):
        rest = [u for u in plan.units if u not in essential]
        found = fts.best_per_document(
            expression, documents, essential=or_expression(essential), rest=or_expression(rest)
        )
        best = found[0][1] if found else 0.0
        if len(found) == documents and best > plan.bound_without(essential):
            return found
        wider = plan.essential_for(best, essential)
        if wider is None:
            return None
        essential = wider
    return None


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """A query's phrases: those always ranked, and the common ones with their bounds.

    ``units`` keeps the query's order; ``common`` is sorted most common first (lowest
    bound), the order in which MaxScore leaves phrases out.
    """

    units: tuple[str, ...]
    common: tuple[tuple[str, float], ...]  # (phrase, most it adds to a passage's score)
    first: tuple[str, ...]  # the first round's essential phrases

    def bound_without(self, essential: Sequence[str]) -> float:
        """The most a passage holding none of ``essential`` can score."""
        kept = set(essential)
        return sum(b for u, b in self.common if u not in kept) * BOUND_MARGIN

    def essential_for(self, best: float, current: Sequence[str]) -> tuple[str, ...] | None:
        """The next round's essential phrases: all but the most common ones whose bounds
        stay under ``best``; at least one more than ``current``; None when that is every
        phrase (the full OR is cheaper than an AND over all of them)."""
        kept = set(current)
        outside = [(u, b) for u, b in self.common if u not in kept]
        left_out: set[str] = set()
        total = 0.0
        for unit, bound in outside:
            if (total + bound) * BOUND_MARGIN >= best:
                break
            total += bound
            left_out.add(unit)
        if len(left_out) == len(outside):  # no progress: bring in the next common one
            left_out = {u for u, _ in outside[:-1]}
        wider = tuple(u for u in self.units if u not in left_out)
        return None if len(wider) == len(self.units) else wider


def prune_plan(fts: FtsIndex, query: Query, min_chunks: int = PRUNE_MIN_CHUNKS) -> PrunePlan | None:
    """Which phrases are essential, or None when pruning cannot pay (a small library, no
    common phrase, or nothing but common ones).

    Only a one-token phrase can be common: its df is a vocabulary row. A query with a
    longer phrase (a CJK bigram) is not pruned: a bigram has no df to bound its idf
    with, so all of them would be essential, and ranking their passages cost as much as
    the full OR (CMRC2018 queries at 100k chunks, CPU p50 / p95: 64 / 133 ms pruned
    with the bigrams essential, 62 / 116 ms not pruned; before the single-scoring
    split, 95 against 60 ms at the median).
    """
    rows = fts.chunk_count()
    if rows < min_chunks:
        return None
    units = query.match_units()
    tokens = {u: fts.query_tokens(u) for u in units}
    single = [u for u in units if len(tokens[u]) == 1]
    df = fts.doc_frequencies(tokens[u][0] for u in single)
    limit = COMMON_PHRASE_SHARE * rows
    common = [u for u in single if df.get(tokens[u][0], 0) > limit]
    first = tuple(u for u in units if u not in common)
    if not common or not first or len(single) < len(units):
        return None
    bounds = [(u, bm25_idf(df[tokens[u][0]], rows) * (BM25_K1 + 1)) for u in common]
    bounds.sort(key=lambda item: item[1])
    return PrunePlan(tuple(units), tuple(bounds), first)
