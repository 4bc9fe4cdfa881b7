"""The one search engine: chooses legs by mode and index health, runs, fuses, cites.

Every caller (MCP tool, CLI, bench) goes through ``run_search``, so what the bench
measures is what agents get. Expected outcomes are values: an empty result says why
(``reason``), and a mode that cannot run says what ran instead (``fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_mcp.cite import format_cite
from kb_mcp.errors import InvalidInput
from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.fuse import FusedHit, LegHit, fuse_rankings
from kb_mcp.search.keyword import keyword_leg
from kb_mcp.search.query import parse_query
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

MODES = ("auto", "keyword", "vector", "hybrid")
MAX_TOP_K = 100
# Passages fetched per leg for each result asked for: one document may own several
# matching passages and we return its best one, so the leg must over-fetch.
OVERFETCH = 8
MIN_CANDIDATES = 50


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
        if not 1 <= self.top_k <= MAX_TOP_K:
            raise InvalidInput(f"top_k must be between 1 and {MAX_TOP_K}, got {self.top_k}")
        if not self.query.strip():
            raise InvalidInput("query is empty; say what to look for")
        return self


def _vector_fallback(mode: str) -> str | None:
    """Vectors are not built yet (no embedder configured): say what ran instead."""
    return "keyword" if mode in ("vector", "hybrid") else None


def _best_per_document(
    fused: list[FusedHit], found: dict[int, rows.PassageRow], top_k: int
) -> list[tuple[FusedHit, rows.PassageRow]]:
    """The best passage of each document, in fused order, at most ``top_k``."""
    seen: set[str] = set()
    kept = []
    for hit in fused:
        passage = found.get(hit.chunk_id)
        if passage is None or passage.doc_key in seen:
            continue
        seen.add(passage.doc_key)
        kept.append((hit, passage))
        if len(kept) == top_k:
            break
    return kept


def _to_hit(rank: int, fused: FusedHit, passage: rows.PassageRow) -> Hit:
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
    )


def run_search(
    db: Database, fts: FtsIndex, request: SearchRequest, source_id: int | None = None
) -> SearchResult:
    """Ranked, cited passages for ``request`` (one per document)."""
    request = request.validated()
    fallback = _vector_fallback(request.mode)
    used = "keyword"
    query = parse_query(request.query)
    if query.is_empty:
        return SearchResult(request.query, used, (), fallback, "the query has no searchable words")
    fts.ensure_current()
    limit = max(MIN_CANDIDATES, request.top_k * OVERFETCH)
    legs: dict[str, list[LegHit]] = {"keyword": keyword_leg(fts, query, limit, source_id)}
    found = rows.passages(db.conn, [h.chunk_id for hits in legs.values() for h in hits])
    recency = {cid: p.doc_date or p.updated_at for cid, p in found.items()}
    fused = fuse_rankings(legs, recency=recency)
    kept = _best_per_document(fused, found, request.top_k)
    hits = tuple(_to_hit(i, f, p) for i, (f, p) in enumerate(kept, start=1))
    reason = None if hits else "no passage matches the query"
    return SearchResult(request.query, used, hits, fallback, reason)
