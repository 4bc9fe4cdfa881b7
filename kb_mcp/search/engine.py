"""The one search engine: chooses legs by mode and index health, runs, fuses, cites.

Every caller (MCP tool, CLI, bench) goes through ``run_search``, so what the bench
measures is what agents get. Expected outcomes are values: an empty result says why
(``reason``), and a mode that cannot run says what ran instead (``fallback``) and why.

The order of a result list is the order of its ``score``: the ranking model's probability
that the document answers (``search/model.py``), or, for a document a later pass moved,
the score of its new place with the adjustment saying why (``search/adjust.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kb_mcp.cite import format_cite
from kb_mcp.errors import InvalidInput, Unavailable
from kb_mcp.index.fts import FtsIndex
from kb_mcp.index.graph import GraphIndex
from kb_mcp.limits import TOP_K
from kb_mcp.search.adjust import Adjustment, Candidate
from kb_mcp.search.calibration import UNCALIBRATED, VectorCalibration, calibration_for, has_cjk
from kb_mcp.search.document import document_leg
from kb_mcp.search.feedback import feedback_leg
from kb_mcp.search.fuse import FusedHit, LegHit
from kb_mcp.search.graph import graph_leg
from kb_mcp.search.keyword import keyword_leg
from kb_mcp.search.model import LegSetModel, shipped
from kb_mcp.search.query import Query, parse_query, without_common_units
from kb_mcp.search.rank import CANDIDATE_DOCUMENTS, UNEMBEDDED_LEG, Ranking, RankInputs, rank
from kb_mcp.search.relations import annotations, without_past_phrase
from kb_mcp.search.stats import unit_stats
from kb_mcp.search.vector import NO_EMBEDDER, VectorLeg, VectorState
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

if TYPE_CHECKING:
    from kb_mcp.search.rerank import Reranking

MODES = ("auto", "keyword", "vector", "hybrid")
LEGS = ("keyword", "vector", "graph", "document", "feedback")
# Passages the vector leg reads (it ranks passages; the engine keeps each document's best).
# As many as the documents each leg ranks: reading 4x as many scored the same to the
# fourth digit on SciFact train, CoSQA dev and the golden set (hybrid nDCG@10 0.6944 /
# 0.5377 / 0.9582), and the index rescores 8 candidates per passage asked for, so 4x cost
# ~25 ms more per search at 6k passages.
VECTOR_PASSAGES = CANDIDATE_DOCUMENTS
KEYWORD_WEIGHT = 1.0  # the reference: a vector leg's weight is its model's calibration
# The graph leg's RRF weight, and the modes that run it unless legs are named. Tuned on
# golden2 dev (keyword vs keyword+graph, docs/retrieval.md "Graph leg"): weights 0.1-0.5
# lost more than 0.05 on every set; at 0.05 multi_hop gains (golden2 dev 0.414 → 0.513,
# old golden 0.640 → 0.688) but both sets as a whole lose (golden2 dev nDCG@10 0.763 →
# 0.742, old golden 0.906 → 0.893). So no mode runs it by default: it is asked for with
# ``legs`` (``--legs keyword,graph``) until document relations (issue 9) keep it from
# lifting superseded and withdrawn documents.
GRAPH_WEIGHT = 0.05
# Passages the graph leg ranks (it ranks passages; the engine keeps each document's best).
GRAPH_PASSAGES = CANDIDATE_DOCUMENTS
GRAPH_MODES: frozenset[str] = frozenset()
# The document leg (``search/document.py``): documents ranked as wholes by bm25, and the
# feedback leg (``search/feedback.py``): the first results' rare terms searched again. Both
# run wherever the keyword leg runs, as legs like the others, so their first documents
# reach the fused head the model orders (at half weight a leg's first document fuses below
# the keyword leg's sixtieth).
DOCUMENT_WEIGHT = 1.0
FEEDBACK_WEIGHT = 1.0
SCORE_DIGITS = 4  # significant digits of reported scores: enough to tell rank 99 from 100
# Issue 7 item 22: an empty library is not "no passage matches"; say what to do.
EMPTY_LIBRARY = (
    "the library is empty: nothing has been indexed yet. Add a folder or a file with "
    "`kb-mcp add PATH`, or save text with the `add_document` tool when the user has "
    "allowed agent writes"
)


@dataclass(frozen=True, slots=True)
class Hit:
    rank: int
    score: float
    doc: str
    title: str
    path: str | None
    source: str | None
    section: tuple[str, ...]
    start_line: int
    end_line: int
    text: str
    cite: str
    legs: tuple[str, ...]
    leg_scores: dict[str, float]
    date: str | None
    adjustments: tuple[Adjustment, ...] = ()
    leg_ranks: dict[str, int] = field(default_factory=dict)
    # What this document is to others: "corrected by <cite>", "contradicts <cite>" …
    relations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: str
    hits: tuple[Hit, ...]
    fallback: str | None = None
    reason: str | None = None
    embed_ms: float | None = None  # time spent embedding the question (None: not embedded)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    top_k: int = 8
    mode: str = "auto"
    source: str | None = None
    legs: tuple[str, ...] | None = None  # named legs, instead of the mode's plan
    relations: bool = True  # use document relations (off: to measure what they bring)

    def validated(self) -> SearchRequest:
        if self.mode not in MODES:
            raise InvalidInput(f"unknown search mode {self.mode!r}; use one of: {', '.join(MODES)}")
        if self.legs is not None:
            check_legs(self.legs)
        TOP_K.check(self.top_k)
        if not self.query.strip():
            raise InvalidInput("query is empty; say what to look for")
        return self


def check_legs(legs: Sequence[str]) -> tuple[str, ...]:
    """``legs`` as a tuple, or ``InvalidInput`` naming the leg that is not one."""
    if not legs:
        raise InvalidInput("no search leg named", hint=f"name one or more of: {', '.join(LEGS)}")
    for leg in legs:
        if leg not in LEGS:
            raise InvalidInput(
                f"unknown search leg {leg!r}",
                hint=f"use any of: {', '.join(LEGS)}, comma-separated",
            )
    if len(set(legs)) != len(legs):
        raise InvalidInput(f"a search leg is named twice in {','.join(legs)!r}")
    return tuple(legs)


def parse_legs(text: str | None) -> tuple[str, ...] | None:
    """``"keyword,graph"`` → ``("keyword", "graph")`` (validated); None stays None."""
    if text is None:
        return None
    return check_legs([part.strip() for part in text.split(",") if part.strip()])


@dataclass(frozen=True, slots=True)
class Plan:
    """The legs a search runs, and, when that is not what was asked, what ran and why."""

    legs: tuple[str, ...]
    fallback: str | None = None
    reason: str | None = None

    @property
    def mode(self) -> str:
        """The mode the keyword and vector legs make (the graph joins either)."""
        kinds = ("keyword" if leg == "document" else leg for leg in self.legs)  # both bm25
        seeds = list(dict.fromkeys(leg for leg in kinds if leg not in ("graph", "feedback")))
        if len(seeds) > 1:
            return "hybrid"
        return seeds[0] if seeds else "graph"

    def with_graph(self) -> Plan:
        return self.with_leg("graph")

    def with_leg(self, leg: str) -> Plan:
        return replace(self, legs=(*self.legs, leg)) if leg not in self.legs else self


KEYWORD_ONLY = Plan(("keyword",))


def plan_legs(
    mode: str,
    state: VectorState,
    query: str = "",
    calibration: VectorCalibration = UNCALIBRATED,
    model: str = "the embedding model",
) -> Plan:
    """``auto`` is hybrid when vectors can run, keyword without an embedder (that is not
    a fallback); ``vector`` / ``hybrid``, and ``auto`` with an embedder, without usable
    vectors fall back to keyword with the reason (issue 22: a default search that ran
    keyword while the library advertised hybrid said nothing). A usable leg's ``reason``
    (what it does not cover yet) goes with the answer.

    A model that does not read CJK sits out questions in CJK the same way: fused, its
    near-random ranking would pull keyword's good one down.
    """
    if mode == "keyword" or (mode == "auto" and state == NO_EMBEDDER):
        return KEYWORD_ONLY
    if not state.usable:
        return Plan(("keyword",), "keyword", state.reason)
    if not calibration.reads_cjk and has_cjk(query):
        reason = f"{model} does not read Chinese or Japanese; the vector leg sat this one out"
        return Plan(("keyword",), "keyword", reason)
    legs = ("vector",) if mode == "vector" else ("keyword", "vector")
    return Plan(legs, None, state.reason)


def plan_named_legs(
    legs: Sequence[str],
    state: VectorState,
    query: str = "",
    calibration: VectorCalibration = UNCALIBRATED,
    model: str = "the embedding model",
) -> Plan:
    """The legs the caller named; a vector leg that cannot run is left out with the
    reason (and keyword runs instead when nothing else was named)."""
    vector = plan_legs("vector", state, query, calibration, model) if "vector" in legs else None
    if vector is None or vector.fallback is None:
        return Plan(tuple(legs))
    kept = tuple(leg for leg in legs if leg != "vector") or ("keyword",)
    return Plan(kept, "+".join(kept), vector.reason)


def _run_legs(
    plan: Plan,
    fts: FtsIndex,
    query: Query,
    vectors: VectorLeg | None,
    request: SearchRequest,
    source_id: int | None,
    graph: GraphIndex | None = None,
) -> tuple[dict[str, list[LegHit]], Plan]:
    """Each planned leg's ranking (keyword first); a vector leg that fails mid-query
    leaves the others, reported as a fallback (keyword alone when it was alone)."""
    nearest: list[LegHit] | None = None
    if "vector" in plan.legs and vectors is not None:
        try:
            nearest = vectors.search(request.query, VECTOR_PASSAGES, source_id)
        except Unavailable as exc:  # EmbedderUnavailable, without importing numpy here
            kept = tuple(leg for leg in plan.legs if leg != "vector")
            kept = kept if kept and kept != ("graph",) else ("keyword", *kept)
            named = "+".join(leg for leg in kept if leg not in ("document", "feedback"))
            plan = Plan(kept, named, f"embedder unavailable: {exc.message}")
    legs: dict[str, list[LegHit]] = {}
    if "keyword" in plan.legs:
        legs["keyword"] = keyword_leg(fts, query, CANDIDATE_DOCUMENTS, source_id)
    if "document" in plan.legs:
        legs["document"] = document_leg(fts, query, CANDIDATE_DOCUMENTS, source_id)
    if nearest is not None and "vector" in plan.legs:
        legs["vector"] = nearest
    if graph is not None and "graph" in plan.legs:
        legs["graph"] = graph_leg(graph, request.query, GRAPH_PASSAGES)
    return legs, plan


def significant(value: float, digits: int = SCORE_DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits (rounding keeps the order)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def _to_hit(
    rank: int,
    candidate: Candidate,
    fused: FusedHit,
    passage: rows.PassageRow,
    relations: tuple[str, ...] = (),
) -> Hit:
    return Hit(
        rank=rank,
        score=significant(candidate.score),
        doc=passage.doc_key,
        title=passage.title,
        path=passage.path,
        source=passage.source,
        section=passage.heading_path,
        start_line=passage.start_line,
        end_line=passage.end_line,
        text=passage.text,
        cite=format_cite(passage.doc_key, passage.start_line, passage.end_line),
        legs=fused.legs,
        leg_scores={c.leg: significant(c.leg_score) for c in fused.contributions},
        date=passage.doc_date,
        adjustments=tuple(
            Adjustment(a.reason, significant(a.factor)) for a in candidate.adjustments
        ),
        leg_ranks={c.leg: c.rank for c in fused.contributions},
        relations=relations,
    )


def _with(reason: str | None, plan: Plan) -> str | None:
    """The empty-result reason, followed by the fallback's when there is one."""
    parts = [p for p in (reason, plan.reason) if p]
    return "; ".join(parts) if parts else None


def _weights(calibration: VectorCalibration) -> dict[str, float]:
    """Each leg's RRF weight: a vector leg's is its model's calibration."""
    return {
        "keyword": KEYWORD_WEIGHT,
        "vector": calibration.weight,
        "graph": GRAPH_WEIGHT,
        "document": DOCUMENT_WEIGHT,
        "feedback": FEEDBACK_WEIGHT,
        UNEMBEDDED_LEG: calibration.weight,
    }


def _annotations(ranking: Ranking, shown: Sequence[Candidate]) -> dict[str, tuple[str, ...]]:
    """Per shown document: its relations, then the contradictions among the first results."""
    heads = []
    for c in shown:
        p = ranking.passage(c.key)
        heads.append((c.key, p.title, p.text, format_cite(c.key, p.start_line, p.end_line)))
    return annotations(ranking.changes, heads)


def run_search(
    db: Database,
    fts: FtsIndex,
    request: SearchRequest,
    source_id: int | None = None,
    vectors: VectorLeg | None = None,
    graph: GraphIndex | None = None,
    reranking: Reranking | None = None,
) -> SearchResult:
    """Ranked, cited passages for ``request`` (one per document); empty when the model
    doubts the best of them answers.

    ``vectors`` is the vector leg (None: no embedder configured); ``reranking``
    reorders the first passages (None: no reranker; ``search/rerank.py``). The result says
    how long the question took to embed, so callers can time the rest apart.
    """
    before = vectors.embed_seconds if vectors is not None else 0.0
    result = _search(db, fts, request, source_id, vectors, graph, reranking)
    spent = (vectors.embed_seconds - before) if vectors is not None else 0.0
    if spent == 0.0:
        return result
    return replace(result, embed_ms=round(spent * 1000, 2))


def plan_search(request: SearchRequest, vectors: VectorLeg | None, graph: bool = True) -> Plan:
    """The legs ``request`` runs (cheap: no SQL, no model call). The Library asks it
    before the database deadline starts, to embed the question only when the vector leg
    will run (``search/vector.py`` says why the embedding stays out of the deadline)."""
    state = vectors.state() if vectors is not None else NO_EMBEDDER
    calibration, model = UNCALIBRATED, ""
    if vectors is not None and state.usable:
        calibration, model = calibration_for(vectors.signature), vectors.signature.describe()
    if request.legs is not None:
        return plan_named_legs(request.legs, state, request.query, calibration, model)
    plan = plan_legs(request.mode, state, request.query, calibration, model)
    if request.mode in GRAPH_MODES and graph:
        plan = plan.with_graph()
    if "keyword" in plan.legs:
        plan = plan.with_leg("document").with_leg("feedback")
    return plan


@dataclass(frozen=True, slots=True)
class Ranked:
    """A request's legs run and ranked: what ``run_search`` answers from, and what the
    ranking model's trainer reads (``ranking`` None: ``empty`` says why)."""

    plan: Plan
    ranking: Ranking | None
    empty: str | None = None
    passages: int = 0  # in the library (what abstention needs to be trusted)


def rank_request(
    db: Database,
    fts: FtsIndex,
    request: SearchRequest,
    source_id: int | None = None,
    vectors: VectorLeg | None = None,
    graph: GraphIndex | None = None,
    *,
    model: LegSetModel | bool | None = True,
    exclude: frozenset[str] = frozenset(),
) -> Ranked:
    """Plan, run the legs, fuse and rank ``request``. ``model``: True for the shipped
    model of the legs that ran (none when the request names its legs: it then answers in
    their fused order, unjudged), None to keep the fused order; ``exclude``: documents
    treated as not stored (both for ``kb-mcp bench train-ranker``)."""
    request = request.validated()
    plan = plan_search(request, vectors, graph is not None)
    calibration = UNCALIBRATED
    if vectors is not None and vectors.state().usable:
        calibration = calibration_for(vectors.signature)
    query = parse_query(without_past_phrase(request.query))
    if query.is_empty:
        return Ranked(plan, None, "the query has no searchable words")
    fts.ensure_current()
    stats = unit_stats(fts, query)
    if stats.chunks == 0:
        return Ranked(plan, None, EMPTY_LIBRARY)
    matched = without_common_units(query, stats.unit_df(), stats.chunks)
    legs, plan = _run_legs(plan, fts, matched, vectors, request, source_id, graph)
    if "feedback" in plan.legs:
        asked = {t for tokens in stats.tokens.values() for t in tokens}
        first = legs.get("keyword") or legs.get("vector") or []
        legs["feedback"] = feedback_leg(db, fts, first, asked, CANDIDATE_DOCUMENTS, source_id)
    unembedded: set[int] = set()
    if "vector" in legs and legs.get("keyword") and vectors is not None:
        unembedded = vectors.unembedded([hit.chunk_id for hit in legs["keyword"]])
    # Named legs answer in their fused order: naming them is asking what they find.
    chosen = model or None
    if model is True:
        chosen = shipped().for_legs(plan.legs) if request.legs is None else None
    inputs = RankInputs(
        request.query,
        _weights(calibration),
        request.relations,
        stats,
        unembedded,
        chosen,
        exclude,
    )
    ranking = rank(db, fts, legs, inputs)
    if not ranking.order:
        return Ranked(plan, None, "no passage matches the query", stats.chunks)
    return Ranked(plan, ranking, None, stats.chunks)


def _abstains(ranked: Ranked) -> str | None:
    """Why the answer is empty, when the model doubts its first document answers (never
    in a library smaller than those it learned from: ``Ranker.abstains_from``)."""
    ranking, ranker = ranked.ranking, shipped()
    model = ranker.for_legs(ranked.plan.legs)
    if ranking is None or ranked.passages < ranker.abstains_from:
        return None
    if ranking.confidence is None or ranking.confidence >= model.threshold:
        return None
    return (
        f"nothing relevant: the best passage answers with an estimated probability of "
        f"{ranking.confidence:.0%} (threshold {model.threshold:.0%}); the answer is "
        "probably not stored"
    )


def _search(
    db: Database,
    fts: FtsIndex,
    request: SearchRequest,
    source_id: int | None = None,
    vectors: VectorLeg | None = None,
    graph: GraphIndex | None = None,
    reranking: Reranking | None = None,
) -> SearchResult:
    """``run_search`` without the timing."""
    ranked = rank_request(db, fts, request, source_id, vectors, graph)
    plan, ranking = ranked.plan, ranked.ranking
    reason = ranked.empty
    if ranking is not None:
        reason = _abstains(ranked)
    if ranking is None or reason is not None:
        return SearchResult(request.query, plan.mode, (), plan.fallback, _with(reason, plan))
    skipped = None  # why the reranker left the fused order, when it did
    if reranking is not None:
        ranking, skipped = reranking.reorder(request.query, ranking)
    shown = ranking.order[: request.top_k]
    notes = _annotations(ranking, shown) if request.relations else {}
    hits = tuple(
        _to_hit(i, c, ranking.fused[c.key], ranking.passage(c.key), notes.get(c.key, ()))
        for i, c in enumerate(shown, start=1)
    )
    return SearchResult(request.query, plan.mode, hits, plan.fallback, _with(skipped, plan))
