"""What the ranking model reads about each candidate document. Pure, and the same for
every language the legs read.

A feature is a number from the legs' own evidence and the documents' structure, never a
word list: where each leg ranked the document and how close its score is to that leg's
best, how much of the question's IDF weight its passage and its title hold (tokens from
the index's own tokenizer, so a Chinese question is measured in the units it is searched
in), the cosine of its passage, whether another document changed or withdrew it, and how
recent it is among the candidates. The model (``search/model.py``) weighs them; its
weights come from ``kb-mcp bench train-ranker`` on public training splits, not from us.

Two kinds of feature serve its two jobs. *Relative* ones (rank, score over the leg's best,
recency among candidates) order the candidates of one question. *Absolute* ones (the
share of the question's weight a passage holds, bm25 over the most the question could
score, cosine) say whether the best candidate answers at all: for abstention, the top of
a list whose answer was removed looks like any other top in relative terms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kb_mcp.index.bm25 import BM25_K1

# Tokens in one proximity window: about a sentence.
PROXIMITY_WINDOW = 16
# Candidates (by fused rank) among which versions of one fact are compared.
PEER_DEPTH = 10
# The legs the model knows, in the order their features appear.
LEGS = ("keyword", "document", "feedback", "vector")
NAMES = (
    "fused",  # the weighted RRF score, scaled so first in one leg is 1.0
    *(f"{leg}_inverse_rank" for leg in LEGS),  # 1 / rank, 0 when the leg missed it
    *(f"{leg}_share_of_best" for leg in LEGS),  # leg score / the leg's best score
    "keyword_strength",  # bm25 / the most the question's terms could add (absolute)
    "cosine",  # the vector leg's cosine, 0 when it did not run or missed it
    "coverage",  # share of the question's IDF weight in the passage (title, headings, text)
    "head_coverage",  # the same share in the title and headings alone
    "coverage_gap",  # coverage minus the best coverage among the candidates
    "proximity",  # the most of the question's IDF weight within PROXIMITY_WINDOW tokens
    "changed",  # a resolved relation says another candidate corrected or updated it
    "replaced",  # superseded or withdrawn: by a relation, frontmatter or status
    "newer",  # recency among the candidates: 1 newest, 0 oldest, 0.5 undated
    "after_as_of",  # dated after the period the question names
    "outdated",  # a peer (same question words held) is newer and still valid then
    "valid_then",  # the newest of its peers dated within the period the question names
    "question_specificity",  # mean IDF of the question's terms over log(passages)
    # Code is found by meaning more than by words (a question in prose, an answer in
    # identifiers): whether the passage is code, and the vector leg's evidence on code,
    # so a linear model can weigh the legs differently there.
    "code",
    "code_vector_inverse_rank",
    "code_cosine",
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One candidate as the legs and the store see it."""

    key: str
    fused: float  # weighted RRF, scaled (``fused`` feature)
    ranks: Mapping[str, int]  # leg → 1-based rank
    scores: Mapping[str, float]  # leg → the leg's own score (bm25 higher-better, cosine)
    present: frozenset[str]  # index tokens of the passage: title, headings and text
    sequence: Sequence[str]  # the passage text's index tokens, in order
    head: frozenset[str]  # index tokens of the title and headings
    date: str | None
    changed: bool = False
    replaced: bool = False
    code: bool = False  # the passage comes from a code file


@dataclass(frozen=True, slots=True)
class Question:
    """The question as the index sees it: its units' tokens and frequencies."""

    units: Sequence[Sequence[str]]  # each term's tokens (several for a phrase)
    df: Mapping[str, int]
    passages: int
    as_of: str | None = None
    # Per non-empty unit: its tokens, its rarest token and that token's IDF (the unit's
    # weight), computed once per question: every candidate's features read them.
    weighted: tuple[tuple[tuple[str, ...], str, float], ...] = field(init=False)

    def __post_init__(self) -> None:
        weighted = []
        for unit in self.units:
            if not unit:
                continue
            rarest = max(unit, key=lambda t: idf(self.df.get(t, 0), self.passages))
            weighted.append((tuple(unit), rarest, idf(self.df.get(rarest, 0), self.passages)))
        object.__setattr__(self, "weighted", tuple(weighted))


def idf(doc_frequency: int, passages: int) -> float:
    """BM25's (Robertson–Spärck Jones) IDF; an unseen term weighs the most."""
    return math.log(1 + (passages - doc_frequency + 0.5) / (doc_frequency + 0.5))


def coverage(question: Question, present: frozenset[str]) -> float:
    """Share of the question's IDF weight held by ``present`` (1.0 for no units). A unit
    counts when all its tokens are present and weighs its rarest token's IDF."""
    total = covered = 0.0
    for unit, _rarest, weight in question.weighted:
        total += weight
        if all(t in present for t in unit):
            covered += weight
    return covered / total if total else 1.0


def proximity(question: Question, sequence: Sequence[str]) -> float:
    """The largest share of the question's IDF weight held by one window of
    ``PROXIMITY_WINDOW`` consecutive tokens: an answer states what was asked together,
    a passage that merely mentions the same words scatters them. A phrase counts by its
    rarest token."""
    weights: dict[str, float] = {}
    total = 0.0
    for _unit, rarest, weight in question.weighted:
        weights[rarest] = max(weights.get(rarest, 0.0), weight)
        total += weight
    if not total:
        return 1.0
    hits = [(i, t) for i, t in enumerate(sequence) if t in weights]
    best = 0.0
    start = 0
    inside: dict[str, int] = {}
    for position, token in hits:
        inside[token] = inside.get(token, 0) + 1
        while position - hits[start][0] >= PROXIMITY_WINDOW:
            gone = hits[start][1]
            inside[gone] -= 1
            if not inside[gone]:
                del inside[gone]
            start += 1
        best = max(best, sum(weights[t] for t in inside))
    return best / total


def _most_bm25(question: Question) -> float:
    """An upper bound of a passage's bm25 for the question: each unit's IDF × (k1 + 1)."""
    return sum(weight * (BM25_K1 + 1) for _unit, _rarest, weight in question.weighted)


def _specificity(question: Question) -> float:
    weights = [weight for _unit, _rarest, weight in question.weighted]
    if not weights:
        return 0.0
    return sum(weights) / len(weights) / math.log(question.passages + 2)


def _recency(dates: Sequence[str | None]) -> list[float]:
    """Each date's place among the dated ones, 0 oldest to 1 newest; 0.5 when undated."""
    known = sorted({d[:10] for d in dates if d})
    if len(known) < 2:
        return [0.5] * len(dates)
    place = {d: i / (len(known) - 1) for i, d in enumerate(known)}
    return [place[d[:10]] if d else 0.5 for d in dates]


def _held(question: Question, present: frozenset[str]) -> frozenset[int]:
    """Which of the question's units ``present`` holds (by position)."""
    return frozenset(
        i for i, unit in enumerate(question.units) if unit and all(t in present for t in unit)
    )


def _versions(candidates: Sequence[Evidence], question: Question) -> list[tuple[float, float]]:
    """Per candidate: (outdated, valid then). Peers are candidates among the first
    ``PEER_DEPTH`` holding exactly the same question units: two versions of one fact
    answer the same words. Of dated peers, one is outdated by a newer peer (for a question
    naming a period, a newer one dated within it); the newest within the period is the
    one valid then."""
    held = [_held(question, c.present) for c in candidates]
    day = [c.date[:10] if c.date else None for c in candidates]
    cut = question.as_of
    out = []
    for i in range(len(candidates)):
        if not day[i] or not held[i] or i >= PEER_DEPTH:
            out.append((0.0, 0.0))
            continue
        peers = [
            day[j]
            for j in range(min(len(candidates), PEER_DEPTH))
            if j != i and day[j] and held[j] == held[i]
        ]
        usable = [d for d in peers if cut is None or d <= cut]
        outdated = any(d > day[i] for d in usable)
        valid = bool(cut and peers and day[i] <= cut and not outdated)
        out.append((float(outdated), float(valid)))
    return out


def feature_rows(candidates: Sequence[Evidence], question: Question) -> list[list[float]]:
    """One row of ``NAMES`` per candidate, in the candidates' order."""
    best = {
        leg: max((c.scores[leg] for c in candidates if leg in c.scores), default=0.0)
        for leg in LEGS
    }
    most = _most_bm25(question) or 1.0
    covered = [coverage(question, c.present) for c in candidates]
    top_coverage = max(covered, default=0.0)
    newer = _recency([c.date for c in candidates])
    versions = _versions(candidates, question)
    specificity = _specificity(question)
    rows = []
    for c, cov, recent, (outdated, valid) in zip(candidates, covered, newer, versions, strict=True):
        share = [
            c.scores[leg] / best[leg] if leg in c.scores and best[leg] > 0 else 0.0 for leg in LEGS
        ]
        after = bool(question.as_of and c.date and c.date[:10] > question.as_of)
        rows.append(
            [
                c.fused,
                *(1.0 / c.ranks[leg] if leg in c.ranks else 0.0 for leg in LEGS),
                *share,
                max(c.scores.get("keyword", 0.0), 0.0) / most,
                c.scores.get("vector", 0.0),
                cov,
                coverage(question, c.head),
                cov - top_coverage,
                proximity(question, c.sequence),
                float(c.changed),
                float(c.replaced),
                recent,
                float(after),
                outdated,
                valid,
                specificity,
                float(c.code),
                float(c.code) * (1.0 / c.ranks["vector"] if "vector" in c.ranks else 0.0),
                float(c.code) * c.scores.get("vector", 0.0),
            ]
        )
    return rows
