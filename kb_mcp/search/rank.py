"""The ranking stage: the legs' passages → per-document ranks → weighted RRF → the
ranking model over the fused head → the relation order pass.

Fusion (``search/fuse.py``) chooses the candidates and the passage each stands on; the
model (``search/model.py``, weights from ``kb-mcp bench train-ranker``) orders them and
says how likely the first answers; document relations then place a correction above
what it corrects when both matched (``search/relations.py``). Nothing here reads the
question's words for meaning: what moves a document is evidence a model weighed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kb_mcp.index.columns import head_text
from kb_mcp.index.fts import FtsIndex
from kb_mcp.limits import TOP_K
from kb_mcp.relations.change import Change
from kb_mcp.relations.read import changes_for
from kb_mcp.search.adjust import Candidate
from kb_mcp.search.features import Evidence, Question, feature_rows
from kb_mcp.search.freshness import as_of_date
from kb_mcp.search.fuse import RRF_K, FusedHit, LegHit, fuse_rankings
from kb_mcp.search.model import LegSetModel, sigmoid
from kb_mcp.search.relations import (
    WHOLE,
    asks_about_past,
    concerned_only,
    order_pass,
)
from kb_mcp.search.stats import UnitStats
from kb_mcp.store import documents as rows
from kb_mcp.store import relations as relation_rows
from kb_mcp.store.db import Database
from kb_mcp.text.status import CURRENT

# Documents each leg ranks, whatever ``top_k`` is: the adjustments reorder this fixed set
# and the answer is its head, so a document's rank never depends on ``top_k`` (issue 7
# item 12: the candidate set used to grow with top_k, and so could the ranking).
CANDIDATE_DOCUMENTS = TOP_K.maximum
# The fused head the model orders: the answer and its neighbours. Wider costs a passage's
# tokens per document and changed no training question's first result.
MODEL_CANDIDATES = 40
# Not a leg one can ask for: it stands in for the vector leg's rank of a keyword result
# whose passage has no vector yet (``_not_yet_embedded``).
UNEMBEDDED_LEG = "not yet embedded"


@dataclass(frozen=True, slots=True)
class Ranking:
    """The fused head in its final order, with the fused hits and passages behind it."""

    order: list[Candidate]
    fused: dict[str, FusedHit]
    found: dict[int, rows.PassageRow]
    keyword_top: int | None  # chunk id of the keyword leg's best passage
    changes: dict[str, list[Change]] = field(default_factory=dict)
    confidence: float | None = None  # the model's probability that the first answers
    evidence: tuple[Evidence, ...] = ()  # the fused head, in fused order
    features: list[list[float]] = field(default_factory=list)  # one row per ``evidence``

    def passage(self, key: str) -> rows.PassageRow:
        return self.found[self.fused[key].chunk_id]


@dataclass(frozen=True, slots=True)
class RankInputs:
    """What ranks the legs' passages, besides the passages: the question and its rules."""

    query: str
    weights: Mapping[str, float]  # leg → RRF weight
    use_relations: bool = True
    stats: UnitStats | None = None  # with it, relations act only when they concern the question
    unembedded: Collection[int] = ()  # keyword candidates without a vector yet
    model: LegSetModel | None = None  # None: keep the fused order (collecting features)
    exclude: frozenset[str] = frozenset()  # document keys treated as not stored


def documents_ranked(hits: Sequence[LegHit], found: Mapping[int, rows.PassageRow]) -> list[LegHit]:
    """A leg's best passage per document, re-ranked 1.. by document (RRF ranks documents)."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        passage = found.get(hit.chunk_id)
        if passage is None or passage.doc_key in seen:
            continue
        seen.add(passage.doc_key)
        kept.append(LegHit(hit.chunk_id, len(kept) + 1, hit.score))
        if len(kept) == CANDIDATE_DOCUMENTS:
            break
    return kept


def _not_yet_embedded(
    legs: Mapping[str, Sequence[LegHit]],
    unembedded: Collection[int],
    found: Mapping[int, rows.PassageRow],
) -> list[LegHit]:
    """The keyword leg's documents whose passage has no vector yet and that the vector
    leg did not find through another passage, at their keyword rank.

    A document an agent just added, or a file saved a moment ago, is searchable by
    keywords at once but has no vector until the background embedding reaches it. Fused
    without one it lost to every document both legs found: first in the keyword leg it
    scored 1/61 against 2/65 for a document fourth in both (seen by a user trying
    kb-mcp on a real folder). Its vector rank is unknown, so it stands in as its keyword
    rank, at the vector leg's weight, under a leg name of its own so a result says so.
    """
    by_vector = {found[h.chunk_id].doc_key for h in legs.get("vector", ()) if h.chunk_id in found}
    return [
        hit
        for hit in legs.get("keyword", ())
        if hit.chunk_id in unembedded and found[hit.chunk_id].doc_key not in by_vector
    ]


def _tail(
    rest: Sequence[FusedHit],
    ranked: Sequence[Candidate],
    head: Sequence[FusedHit],
    found: Mapping[int, rows.PassageRow],
    superseders: Mapping[str, str],
) -> list[Candidate]:
    """The fused candidates past the model's head, in fused order below it: a search for
    up to 100 results still gets them. Each scores its fused score scaled under the
    lowest score above, so the order stays the score's."""
    if not rest or not ranked or not head:
        return []
    scale = min(c.score for c in ranked) / head[-1].score
    return [_candidate(f, found[f.chunk_id], superseders, f.score * scale) for f in rest]


def _candidate(
    fused: FusedHit, passage: rows.PassageRow, superseders: Mapping[str, str], score: float
) -> Candidate:
    return Candidate(
        key=passage.doc_key,
        score=score,
        date=passage.doc_date or passage.updated_at,
        superseded_on=passage.superseded_on,
        superseded_by=superseders.get(passage.doc_key),
        status=passage.status,
        topic=head_text(passage.title, passage.heading_path),
        path=passage.path,
        evidence={c.leg: c.leg_score for c in fused.contributions},
    )


Tokenized = tuple[list[str], list[str]]  # a passage's head (title, headings) and text tokens


def _tokenizer(fts: FtsIndex, found: Mapping[int, rows.PassageRow]) -> Callable[[int], Tokenized]:
    """Chunk id → its passage's index tokens, each passage tokenized once per search (the
    features and the relation pass both read them)."""
    cache: dict[int, Tokenized] = {}

    def tokenized(chunk_id: int) -> Tokenized:
        if chunk_id not in cache:
            p = found[chunk_id]
            cache[chunk_id] = (fts.tokens(head_text(p.title, p.heading_path)), fts.tokens(p.text))
        return cache[chunk_id]

    return tokenized


def _passage_tokens(
    fused: Mapping[str, FusedHit], tokenized: Callable[[int], Tokenized]
) -> Callable[[str], set[str] | None]:
    """Document key → the index tokens of its passage in this ranking, or None."""

    def present(key: str) -> set[str] | None:
        if key not in fused:
            return None
        head, body = tokenized(fused[key].chunk_id)
        return {*head, *body}

    return present


def related_chunks(db: Database, fts: FtsIndex) -> dict[int, str]:
    """Chunk id → document key for the documents with a resolved relation, per data
    version: a search whose candidates hold none of them reads no relations."""
    return fts.per_version("related_chunks", lambda: relation_rows.related_chunks(db.conn))


def has_supersessions(db: Database, fts: FtsIndex) -> bool:
    """Whether any document says it supersedes another, per data version."""
    return fts.per_version("supersessions", lambda: rows.has_supersessions(db.conn))


def _evidence(
    fused: FusedHit,
    passage: rows.PassageRow,
    tokens: Tokenized,
    changes: Sequence[Change],
    cosine_at: Mapping[int, float],
) -> Evidence:
    """``cosine_at``: the vector leg's score at each of its ranks. A passage without a
    vector yet stands in at its keyword rank (``_not_yet_embedded``), and the model reads
    it as a vector hit at that rank with that rank's cosine."""
    head, body = tokens
    heading = frozenset(head)
    ranks = {c.leg: c.rank for c in fused.contributions}
    scores = {c.leg: c.leg_score for c in fused.contributions}
    if UNEMBEDDED_LEG in ranks and "vector" not in ranks:
        ranks["vector"] = ranks[UNEMBEDDED_LEG]
        nearest = min(cosine_at, key=lambda r: abs(r - ranks["vector"]), default=None)
        scores["vector"] = cosine_at[nearest] if nearest is not None else 0.0
    return Evidence(
        key=passage.doc_key,
        fused=fused.score * (RRF_K + 1),
        ranks=ranks,
        scores=scores,
        present=heading.union(body),
        sequence=body,
        head=heading,
        date=passage.doc_date or passage.updated_at,
        changed=any(ch.incoming and ch.kind not in WHOLE for ch in changes),
        replaced=passage.superseded_on is not None
        or passage.status != CURRENT
        or any(ch.incoming and ch.kind in WHOLE for ch in changes),
        code=passage.kind == "code",
    )


def rank(
    db: Database, fts: FtsIndex, legs: Mapping[str, Sequence[LegHit]], inputs: RankInputs
) -> Ranking:
    """Legs → per-document ranks → weighted RRF → the model's order of the fused head →
    the relation order pass.

    The fused ranking picks the candidates (its first ``MODEL_CANDIDATES``) and the passage
    each stands on; the model (``search/model.py``) orders them by the features
    ``search/features.py`` reads, and says how likely the first answers. Without a model
    (``inputs.model`` None: the trainer collecting features) the fused order stays.
    ``inputs.exclude`` leaves documents out as if they were not stored (the trainer's
    absent-answer questions)."""
    chunk_ids = list(dict.fromkeys(h.chunk_id for hits in legs.values() for h in hits))
    found = rows.passages(db.conn, chunk_ids, superseded=has_supersessions(db, fts))
    if inputs.exclude:
        found = {cid: p for cid, p in found.items() if p.doc_key not in inputs.exclude}
    ranked = {name: documents_ranked(hits, found) for name, hits in legs.items()}
    if inputs.unembedded:
        ranked[UNEMBEDDED_LEG] = _not_yet_embedded(ranked, inputs.unembedded, found)
    group = {cid: p.doc_key for cid, p in found.items()}
    recency = {p.doc_key: p.doc_date or p.updated_at for p in found.values()}
    fused_hits = fuse_rankings(ranked, inputs.weights, recency=recency, group=group)
    fused = {str(f.key): f for f in fused_hits}
    head = fused_hits[:MODEL_CANDIDATES]
    changes: dict[str, list[Change]] = {}
    if inputs.use_relations and not related_chunks(db, fts).keys().isdisjoint(chunk_ids):
        changes = changes_for(db.conn, [str(f.key) for f in head])
    stats = inputs.stats
    units = list(stats.tokens.values()) if stats is not None else []
    question = Question(
        units,
        stats.df if stats is not None else {},
        stats.chunks if stats is not None else 0,
        as_of_date(inputs.query),
    )
    tokenized = _tokenizer(fts, found)
    acting = changes
    if changes and stats is not None:
        present = _passage_tokens(fused, tokenized)
        acting = concerned_only(changes, units, present, stats.df, stats.chunks)
    cosine_at = {h.rank: h.score for h in ranked.get("vector", ())}
    evidence = [
        _evidence(
            f, found[f.chunk_id], tokenized(f.chunk_id), acting.get(str(f.key), ()), cosine_at
        )
        for f in head
    ]
    features = feature_rows(evidence, question)
    superseded = [k for k, f in fused.items() if found[f.chunk_id].superseded_on]
    superseders = rows.superseders(db.conn, superseded)
    scores = [f.score for f in head]  # the fused order, unless the model orders them
    confidence = None
    if inputs.model is not None and head:
        logits, confidence = inputs.model.confidence(features)
        scores = [sigmoid(z) for z in logits]
    candidates = [
        _candidate(f, found[f.chunk_id], superseders, score)
        for f, score in zip(head, scores, strict=True)
    ]
    if inputs.model is not None:
        candidates.sort(key=lambda c: -c.score)
    if acting:
        past = asks_about_past(inputs.query)
        position = {str(f.key): i for i, f in enumerate(head)}
        candidates = order_pass(candidates, acting, question.as_of, past, position)
    candidates += _tail(fused_hits[MODEL_CANDIDATES:], candidates, head, found, superseders)
    keyword = ranked.get("keyword")
    top = keyword[0].chunk_id if keyword else None
    return Ranking(candidates, fused, found, top, changes, confidence, tuple(evidence), features)
