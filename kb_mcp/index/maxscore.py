"""Exact top-k over term lists by MaxScore (Turtle & Flood, 1995): the postings stores'
one way to rank the best documents without scoring every passage a question matches.

Trigger: at 1M passages a question's common words hold hundreds of thousands of
postings each, and scoring all of them in numpy put the keyword leg's p95 near 90 ms
before any database time (issue 24; ``python -m kb_mcp.bench.keyword_pg --simulate``),
though a common word adds little to any passage's score. Outcome: MaxScore's bound. A
phrase adds at most ``idf × (k1 + 1)`` to a passage's bm25 (``bm25.term_score``: the
frequency's share ``f / (f + norm)`` is below 1), and less: its score at its list's
highest frequency in the shortest passage. The phrases are sorted by that bound and
split: the *essential* ones (highest bounds) are scored over their whole lists; the
others, whose bounds add up to less than the score a top ``documents`` already holds, are
only looked up for the passages the essential ones found. A passage holding none of
the essential phrases scores at most that sum, below every document kept, so it cannot
enter the top; every passage that can is scored over the whole question.

Exact, not approximate: each candidate's score is summed phrase by phrase in query order
from the same arrays with the same ``bm25`` calls as the full scoring (IEEE additions and
products do not depend on which elements an array holds), so the scores are equal to the
last bit; a passage left out is below the kept ones by more than the sort key's rounding
(``MARGIN``), so the order and the documents are the full scoring's too. The cut needs no
tuning: it comes from the scores themselves, in at most a few rounds (each round's
``documents``-th score, exact and only growing as candidates are added, says which
phrases may stay out of the next).

At 1M passages a round's essential lists often hold half a million postings (a
question's dozen words less its commonest), so the merge and the lookups are what a
ranking costs; both use plain arrays over every passage when the lists are that long
(``_merged_dense``, ``_lookup``: sorting or binary-searching them cost about twice as
much), and a round raises its floor first from its best few hundred passages. At 1M,
SciFact's questions, the keyword leg's top 100 went from 30 to 16 ms CPU at p95
(docs/scale.md, "At 1M"); every way gives the same arrays, so the same bits.

The document leg's ranking of documents as wholes is this same call over the documents'
index (``keyword_reader.best_documents``: one list per word, a document per entry).

Only a top ``documents`` is pruned this way. A document's best passage (the document
leg's citations) needs no bound: only the cited documents' passages can be its answer, so
``document_scores`` scores those alone (``ByDocument`` finds them), by the same
``scores_at`` and so to the same bits. At 1M passages scoring every match for a hundred
citations cost 32 / 102 ms CPU p50 / p95 (docs/scale.md, "At 1M").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb_mcp.index.bm25 import BM25_K1, term_score

if TYPE_CHECKING:
    import numpy as np

# A passage left out scores at most the phrases' bound; it must sort strictly after the
# last document kept, whose key is ``round(-score, 9)`` (``topk``): a gap over 1e-9 plus
# the float error of summing bounds (scores are at most a few hundred) keeps it out.
MARGIN = 1e-8

Found = list[tuple[int, float]]  # (chunk id, score), as ``topk.best_per_document`` gives
# Below this many postings in a question's lists, scoring them all costs less than the
# pruning's rounds of small numpy calls: medians over SciFact's questions, 0.71 ms whole
# against 1.23 ms pruned under 20k postings, 7.9 against 2.3 ms at 50k-100k
# (docs/scale.md, "Exact top-k at 1M"). Either way the answer is the same.
FULL_BELOW = 20_000
# A round's essential lists are merged over an array of every passage when they hold
# more than 1/DENSE_SHARE of them, by sorting their postings below that (``_candidates``):
# the crossover of a pass over the passages (a few ns each) and a sort (tens of ns a
# posting), measured at 1M passages.
DENSE_SHARE = 16
# ``_lookup`` reads a list whole against a mask of the passages asked for when they
# number over 1/GATHER_SHARE of the list (a binary search costs tens of ns a passage,
# a read of the list a few ns a posting).
GATHER_SHARE = 16
# ... and over 1/GATHER_PASSAGES of all passages (the mask is one byte a passage).
GATHER_PASSAGES = 256
# A pruning round scores its FLOOR_DEPTH × documents passages of highest essential share
# first, for a higher floor (``_candidates``).
FLOOR_DEPTH = 4


@dataclass(slots=True)
class TermList:
    """One phrase of a question: its idf and its postings (positions ascending, each
    with its column-weighted frequency)."""

    idf: float
    positions: np.ndarray
    freq: np.ndarray


def full_scores(terms: Sequence[TermList], norm: np.ndarray) -> np.ndarray:
    """Every passage's bm25 for the OR of ``terms`` (in query order; 0: no match)."""
    import numpy as np

    scores = np.zeros(len(norm), dtype=np.float64)
    for term in terms:
        scores[term.positions] += term_score(term.idf, term.freq, norm[term.positions])
    return scores


def top_documents(
    terms: Sequence[TermList],
    norm: np.ndarray,
    documents: int,
    select: Callable[[np.ndarray, np.ndarray], Found],
) -> Found:
    """The best ``documents`` documents for the OR of ``terms`` (in query order), exactly
    as ``select`` would rank every matching passage: ``select(positions, scores)`` gets
    candidate passages (ascending positions) with their full bm25 and returns its top
    (the store's filters, extra passages and ``topk.best_per_document``).

    A round scores the passages of the essential phrases (highest bounds first) and
    drops those that cannot reach ``kept``, the last score of a top already proven; when
    ``select`` then returns ``documents`` documents whose last one scores above the
    other phrases' summed bound, that is the answer. Otherwise the next round keeps out
    only the phrases whose bounds add up to less than that score; with none left out,
    every matching passage is scored."""
    if sum(len(term.positions) for term in terms) < FULL_BELOW:
        return _scored_whole(terms, norm, select)
    floor = float(norm.min()) if len(norm) else 1.0
    bounds = [_bound(term, floor) for term in terms]
    by_bound = sorted(range(len(terms)), key=lambda i: -bounds[i])
    # left_out[j]: the summed bound of the phrases after the first j of ``by_bound``.
    left_out = [0.0] * (len(terms) + 1)
    for j in range(len(terms) - 1, -1, -1):
        left_out[j] = left_out[j + 1] + bounds[by_bound[j]]
    kept = 0.0  # the documents-th best score of an exactly scored set: a floor for the top
    order = [(terms[i], bounds[i]) for i in by_bound]
    essential = _first_filling(terms, by_bound, documents)

    def floor_of(at: np.ndarray) -> float:
        """The last score of ``select``'s top of the passages at ``at``, scored exactly
        (0 when they hold too few documents): a floor for the answer's."""
        some = select(at, scores_at(terms, norm, at))
        return some[-1][1] if len(some) == documents else 0.0

    while essential < len(terms):
        positions, kept = _candidates(
            order, left_out, essential, norm, kept, documents * FLOOR_DEPTH, floor_of
        )
        found = select(positions, scores_at(terms, norm, positions))
        if len(found) < documents:  # too few documents among the essential phrases' passages
            essential *= 2
            continue
        kept = max(kept, found[-1][1])
        if left_out[essential] + MARGIN < kept:
            return found
        while essential < len(terms) and left_out[essential] + MARGIN >= kept:
            essential += 1
    return _scored_whole(terms, norm, select)


def _scored_whole(
    terms: Sequence[TermList], norm: np.ndarray, select: Callable[[np.ndarray, np.ndarray], Found]
) -> Found:
    """Every matching passage scored, ranked by ``select``: the answer pruning must equal."""
    import numpy as np

    scores = full_scores(terms, norm)
    positions = np.flatnonzero(scores)
    return select(positions, scores[positions])


def _bound(term: TermList, floor: float) -> float:
    """The most ``term`` adds to a passage's bm25: its score at its list's highest
    frequency in the shortest passage (``term_score`` grows with the frequency and falls
    with the length norm, whose least value is ``floor``); never above ``idf × (k1 + 1)``."""
    if not len(term.positions):
        return 0.0
    return min(float(term_score(term.idf, float(term.freq.max()), floor)), term.idf * (BM25_K1 + 1))


def _first_filling(terms: Sequence[TermList], by_bound: list[int], want: int) -> int:
    """How many phrases of highest bound hold at least ``want`` postings between them (a
    round with fewer passages cannot fill the top)."""
    held = 0
    for j, i in enumerate(by_bound, start=1):
        held += len(terms[i].positions)
        if held >= want:
            return j
    return len(by_bound)


def _candidates(
    order: Sequence[tuple[TermList, float]],
    left_out: Sequence[float],
    essential: int,
    norm: np.ndarray,
    kept: float,
    depth: int,
    floor_of: Callable[[np.ndarray], float],
) -> tuple[np.ndarray, float]:
    """The passages holding one of the first ``essential`` phrases of ``order`` (bound
    descending) that may still score ``kept`` (MaxScore's test: the score so far plus
    the bounds of the phrases not yet looked up must reach it), and the floor used,
    ``kept`` or higher.

    The essential lists are merged with each passage's summed share of them (by a sort
    of their postings when short, over an array of every passage when long); the
    ``depth`` passages of highest share are scored exactly first (``floor_of``: a higher
    floor from a few hundred passages), and the survivors are looked up in the other
    phrases' lists, highest bound first."""
    import numpy as np

    held = [term for term, _bound in order[:essential] if len(term.positions)]
    if not held:
        return np.zeros(0, dtype=np.int64), kept
    if len(held) > 1 and sum(len(term.positions) for term in held) * DENSE_SHARE >= len(norm):
        positions, shares = _merged_dense(held, norm)
    else:
        positions, shares = _merged_sorted(held, norm)
    if len(positions) > 2 * depth:
        # The ``depth`` passages of highest share scored first: their top's last score
        # is a floor too, often well above ``kept`` (it came from the rarest phrases'
        # passages alone), and a higher floor drops more passages before the lookups.
        best = np.sort(np.argpartition(-shares, depth)[:depth])
        kept = max(kept, floor_of(positions[best]))
    if kept <= 0:  # no top proven yet: nothing to drop, and ``scores_at`` looks them up
        return positions, kept
    upper = shares
    for j in range(essential, len(order) + 1):
        alive = upper + left_out[j] + MARGIN >= kept
        positions, upper = positions[alive], upper[alive]
        if j == len(order):
            break
        term = order[j][0]
        at, where = _lookup(term.positions, positions, len(norm))
        upper[at] += term_score(term.idf, term.freq[where], norm[positions[at]])
    return positions, kept


def _merged_sorted(held: Sequence[TermList], norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The passages holding one of ``held`` (ascending) with their summed share of them,
    by one stable sort of the lists' sorted runs: the way for short lists."""
    import numpy as np

    positions = np.concatenate([term.positions.astype(np.int64) for term in held])
    shares = np.concatenate(
        [term_score(term.idf, term.freq, norm[term.positions]) for term in held]
    )
    if len(held) > 1:
        by_position = np.argsort(positions, kind="stable")
        positions, shares = positions[by_position], shares[by_position]
        first = np.flatnonzero(np.concatenate(([True], positions[1:] != positions[:-1])))
        positions, shares = positions[first], np.add.reduceat(shares, first)
    return positions, shares


def _merged_dense(held: Sequence[TermList], norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_merged_sorted``'s passages and shares (the shares summed in the same order, so
    the same bits), added into arrays over every passage: when the lists hold more than
    1/``DENSE_SHARE`` of the passages, one pass over them costs far less than sorting
    the postings (at 1M passages 500k postings took 30 ms to sort)."""
    import numpy as np

    sums = np.zeros(len(norm), dtype=np.float64)
    held_at = np.zeros(len(norm), dtype=bool)
    for term in held:  # a list holds a passage once, so ``+=`` adds each share once
        sums[term.positions] += term_score(term.idf, term.freq, norm[term.positions])
        held_at[term.positions] = True
    positions = np.flatnonzero(held_at)
    return positions, sums[positions]


def _lookup(
    postings: np.ndarray, positions: np.ndarray, passages: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``positions`` (ascending, each below ``passages``) a list holds: their
    indexes in ``positions`` and in the list, ascending. A search per passage, so a
    long list is never read whole; but when the passages are many against the list
    (at 1M passages a round's first lookup is typically 70k passages in a list of 90k,
    and such searches took 2.3 of the 6 s CPU of SciFact's 600 simulated rankings), the
    list is read once against a mask of them instead: the same pairs."""
    import numpy as np

    if not len(postings) or not len(positions):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    many = len(positions) * GATHER_SHARE >= len(postings)
    if many and len(positions) * GATHER_PASSAGES >= passages:
        asked = np.zeros(passages, dtype=bool)
        asked[positions] = True
        where = np.flatnonzero(asked[postings])
        return np.searchsorted(positions, postings[where]), where
    wanted = positions.astype(postings.dtype)  # the short side converted, not the list
    where = np.searchsorted(postings, wanted)
    hit = where < len(postings)
    hit[hit] = postings[where[hit]] == wanted[hit]
    at = np.flatnonzero(hit)
    return at, where[at]


def scores_at(terms: Sequence[TermList], norm: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The bm25 of the passages at ``positions``, summed phrase by phrase in query order
    as ``full_scores`` sums them (the same values, so the same bits)."""
    import numpy as np

    scores = np.zeros(len(positions), dtype=np.float64)
    for term in terms:
        at, where = _lookup(term.positions, positions, len(norm))
        scores[at] += term_score(term.idf, term.freq[where], norm[positions[at]])
    return scores


class ByDocument:
    """Where each document's passages are in a segment (a generation's passage arrays):
    the positions ordered by document id, sorted on first use and kept with the segment
    (a stable sort of its document ids: 10–39 ms of CPU at 1M passages, once a
    generation), so a search that cites nothing never pays for it."""

    def __init__(self, doc_ids: np.ndarray) -> None:
        self._doc_ids = doc_ids
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # (positions, their docs)

    def positions(self, document_ids: Sequence[int]) -> np.ndarray:
        """The positions (ascending) of the passages of ``document_ids``."""
        import numpy as np

        if self._sorted is None:
            order = np.argsort(self._doc_ids, kind="stable")
            self._sorted = (order, self._doc_ids[order])
        order, docs = self._sorted
        wanted = np.unique(np.asarray(document_ids, dtype=np.int64))
        first = np.searchsorted(docs, wanted, side="left")
        counts = np.searchsorted(docs, wanted, side="right") - first
        total = int(counts.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        # Each document's run [first, first + count) of ``order``, concatenated.
        starts = np.repeat(first - (np.cumsum(counts) - counts), counts)
        return np.sort(order[starts + np.arange(total)])


def document_scores(
    terms: Sequence[TermList],
    norm: np.ndarray,
    passages: ByDocument,
    document_ids: Sequence[int],
    dead: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The passages of ``document_ids`` that match ``terms`` (positions ascending, none
    of ``dead``) with their bm25: ``full_scores``' values at those positions, to the
    bit, and its matches (a score of 0 is no match), looked up in each list for the
    documents' passages alone instead of scoring every passage the question matches."""
    import numpy as np

    positions = passages.positions(document_ids)
    if dead is not None and len(dead) and len(positions):
        positions = positions[~np.isin(positions, dead)]
    scores = scores_at(terms, norm, positions)
    matched = np.flatnonzero(scores)
    return positions[matched], scores[matched]
