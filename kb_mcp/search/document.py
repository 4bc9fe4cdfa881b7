"""The document leg: a prepared ``Query`` → documents ranked as wholes, each cited by one
passage.

The keyword leg ranks passages and keeps each document's best (``search/keyword.py``);
this leg ranks the documents themselves by bm25 over their whole text
(``index/docs_fts.py`` says why: a question's words spread over several passages of one
document). The same MATCH expression runs against both tables, so the two legs agree on
what a word is.

A hit needs a passage to show and cite: each ranked document's best-bm25 passage for the
same expression, found in one query for all of them; a document none of whose passages
matches (its title alone did: the passages' head holds it too, so this is a guard, not a
case) is cited by its first passage. The best passages come from the postings segment
when the library has one (the same bm25, ``index/postings.py``), else from FTS5.
"""

from __future__ import annotations

from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.query import Query
from kb_mcp.store import documents as rows


def document_leg(
    fts: FtsIndex, query: Query, documents: int, source_id: int | None = None
) -> list[LegHit]:
    """Up to ``documents`` documents, best whole-document bm25 first, each as its best
    passage (rank 1.., the document's score); [] when the query has nothing to match."""
    expression = query.match_expression()
    if expression is None:
        return []
    ranked = fts.best_documents(expression, documents, source_id)
    ids = [document_id for document_id, _score in ranked]
    cited = fts.segment_best_passages(query.match_units(), ids)
    if cited is None:
        cited = fts.best_passage_of(expression, ids)
    missing = [document_id for document_id in ids if document_id not in cited]
    if missing:
        cited |= rows.first_chunk_of(fts.db.conn, missing)
    kept = [(d, score) for d, score in ranked if d in cited]  # no passage: nothing to cite
    return [LegHit(cited[d], rank, score) for rank, (d, score) in enumerate(kept, start=1)]
