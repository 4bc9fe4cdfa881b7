"""The one search engine: chooses legs by mode and index health, runs, fuses, cites.

Every caller (MCP tool, CLI, bench) goes through ``run_search``, so what the bench
measures is what agents get. Expected outcomes are values: an empty result says why
(``reason``), and a mode that cannot run says what ran instead (``fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_mcp.cite import format_cite
from kb_mcp.errors import InvalidInput
from kb_mcp.index.fts import FtsIndex, head_text
from kb_mcp.limits import TOP_K
from kb_mcp.search.floor import COVERAGE_FLOOR, coverage
from kb_mcp.search.freshness import Candidate, apply_freshness, as_of_date
from kb_mcp.search.fuse import FusedHit, fuse_rankings
from kb_mcp.search.keyword import keyword_leg
from kb_mcp.search.prior import Adjustment, path_adjustments
from kb_mcp.search.query import Query, parse_query, without_common_units
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

MODES = ("auto", "keyword", "vector", "hybrid")
# Documents each leg ranks, whatever ``top_k`` is: freshness reorders this fixed set and
# the answer is its head, so a document's rank never depends on ``top_k`` (issue 7 item
# 12: the candidate set used to grow with top_k, and so could the ranking).
CANDIDATE_DOCUMENTS = TOP_K.maximum
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
    adjustments: tuple[str, ...] = ()  # what moved it, e.g. "demoted ×0.5: test file"


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: str
    hits: tuple[Hit, ...]
    fallback: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    top_k: int = 8
    mode: str = "auto"
    source: str | None = None

    def validated(self) -> SearchRequest:
        if self.mode not in MODES:
            raise InvalidInput(f"unknown search mode {self.mode!r}; use one of: {', '.join(MODES)}")
        TOP_K.check(self.top_k)
        if not self.query.strip():
            raise InvalidInput("query is empty; say what to look for")
        return self


def _vector_fallback(mode: str) -> str | None:
    """Vectors are not built yet (no embedder configured): say what ran instead."""
    return "keyword" if mode in ("vector", "hybrid") else None


def _best_per_document(
    fused: list[FusedHit], found: dict[int, rows.PassageRow]
) -> list[tuple[FusedHit, rows.PassageRow]]:
    """The best passage of each document, in fused order."""
    seen: set[str] = set()
    kept = []
    for hit in fused:
        passage = found.get(hit.chunk_id)
        if passage is None or passage.doc_key in seen:
            continue
        seen.add(passage.doc_key)
        kept.append((hit, passage))
    return kept


def _freshness_order(
    ranked: list[tuple[FusedHit, rows.PassageRow]],
    as_of: str | None,
    prior: dict[str, Adjustment],
) -> list[tuple[FusedHit, rows.PassageRow]]:
    """``apply_freshness`` over the documents, scored by their keyword score when present,
    scaled by the path prior (``search/prior.py``)."""
    by_key = {p.doc_key: (f, p) for f, p in ranked}
    candidates = [
        Candidate(
            p.doc_key,
            _rank_score(f) * (prior[p.doc_key].factor if p.doc_key in prior else 1.0),
            p.doc_date or p.updated_at,
            p.superseded_on,
            p.status,
            head_text(p.title, p.heading_path),
        )
        for f, p in ranked
    ]
    return [by_key[c.key] for c in apply_freshness(candidates, as_of)]


def _rank_score(hit: FusedHit) -> float:
    for part in hit.contributions:
        if part.leg == "keyword":
            return part.leg_score
    return hit.score


@dataclass(frozen=True, slots=True)
class UnitStats:
    """The index's view of a query: each term's tokens, their frequencies, the chunk count."""

    tokens: dict[str, list[str]]
    df: dict[str, int]
    chunks: int

    def unit_df(self) -> dict[str, int]:
        """A term's frequency is its rarest token's (0 when a token is not indexed at all)."""
        return {
            u: min((self.df.get(t, 0) for t in toks), default=0) for u, toks in self.tokens.items()
        }


def _unit_stats(fts: FtsIndex, query: Query) -> UnitStats:
    tokens = {unit: fts.tokens(unit) for unit in (*query.phrases, *query.terms)}
    df = fts.doc_frequencies(t for toks in tokens.values() for t in toks)
    return UnitStats(tokens, df, fts.chunk_count())


def _query_coverage(fts: FtsIndex, stats: UnitStats, passage: rows.PassageRow) -> float:
    """Share of the query's IDF weight present in ``passage`` (see ``search/floor.py``)."""
    present = set(fts.tokens(f"{head_text(passage.title, passage.heading_path)}\n{passage.text}"))
    return coverage(list(stats.tokens.values()), present, stats.df, stats.chunks)


def _to_hit(
    rank: int, fused: FusedHit, passage: rows.PassageRow, adjusted: Adjustment | None = None
) -> Hit:
    return Hit(
        rank=rank,
        score=round(fused.score, 6),
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
        leg_scores={c.leg: round(c.leg_score, 4) for c in fused.contributions},
        date=passage.doc_date,
        adjustments=(adjusted.label,) if adjusted else (),
    )


def run_search(
    db: Database, fts: FtsIndex, request: SearchRequest, source_id: int | None = None
) -> SearchResult:
    """Ranked, cited passages for ``request`` (one per document); empty below the floor."""
    request = request.validated()
    fallback = _vector_fallback(request.mode)
    used = "keyword"
    query = parse_query(request.query)
    if query.is_empty:
        return SearchResult(request.query, used, (), fallback, "the query has no searchable words")
    fts.ensure_current()
    stats = _unit_stats(fts, query)
    if stats.chunks == 0:
        return SearchResult(request.query, used, (), fallback, EMPTY_LIBRARY)
    matched = without_common_units(query, stats.unit_df(), stats.chunks)
    legs = {"keyword": keyword_leg(fts, matched, CANDIDATE_DOCUMENTS, source_id)}
    found = rows.passages(db.conn, [h.chunk_id for hits in legs.values() for h in hits])
    recency = {cid: p.doc_date or p.updated_at for cid, p in found.items()}
    ranked = _best_per_document(fuse_rankings(legs, recency=recency), found)
    prior = path_adjustments(request.query, {p.doc_key: p.path for _, p in ranked})
    ranked = _freshness_order(ranked, as_of_date(request.query), prior)
    if not ranked:
        return SearchResult(request.query, used, (), fallback, "no passage matches the query")
    covered = _query_coverage(fts, stats, ranked[0][1])
    if covered < COVERAGE_FLOOR:
        reason = (
            f"nothing relevant: the best passage covers {covered:.0%} of the query's "
            f"weight (floor {COVERAGE_FLOOR:.0%}); the answer is probably not stored"
        )
        return SearchResult(request.query, used, (), fallback, reason)
    hits = tuple(
        _to_hit(i, f, p, prior.get(p.doc_key))
        for i, (f, p) in enumerate(ranked[: request.top_k], start=1)
    )
    return SearchResult(request.query, used, hits, fallback, None)
