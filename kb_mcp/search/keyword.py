"""The keyword leg: a prepared ``Query`` → ranked passages from the FTS5 index."""

from __future__ import annotations

from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.query import Query


def keyword_leg(
    fts: FtsIndex, query: Query, documents: int, source_id: int | None = None
) -> list[LegHit]:
    """The best passage of each of up to ``documents`` documents, best bm25 first; [] when
    the query has nothing to match."""
    expression = query.match_expression()
    if expression is None:
        return []
    matches = fts.best_per_document(expression, documents, source_id=source_id)
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(matches, start=1)]
