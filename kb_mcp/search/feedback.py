"""The feedback leg: the rare words of the first results, searched for again.

A question often names one thing and asks about another that only a second document
holds: "which channel do I ask in about the service that replaced X" — X's page names
the replacement, the replacement's page names the channel. The question's own words
find the first document; the second shares none of them but the bridging name. So the
leg reads the keyword leg's first ``FEEDBACK_DOCUMENTS`` passages, takes the terms they
hold that the question does not and that are rare in the library (tf · idf, as
pseudo-relevance feedback does since Rocchio and RM3), and runs them as a query of their
own. Its ranking joins the fusion as any leg, and the ranking model weighs it like the
others (``search/features.py``), so a feedback document that answers nothing stays low.

Language-neutral: terms are the index's own tokens, their rarity its own statistics. A
single CJK character is too common to bridge anything, so CJK text contributes no term.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from kb_mcp.index.fts import FtsIndex
from kb_mcp.index.textprep import CJK_RUN
from kb_mcp.search.features import idf
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.query import or_expression
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

FEEDBACK_DOCUMENTS = 3  # the keyword leg's first documents read for terms
FEEDBACK_TERMS = 8  # terms searched for
# Terms whose frequency is looked up: the most frequent in the read passages. Bounds the
# vocabulary reads of one search (a common term's count walks its whole doclist).
CANDIDATE_TERMS = 40
MIN_TERM_CHARS = 3


def feedback_terms(
    fts: FtsIndex, passages: Sequence[str], asked: Collection[str], terms: int = FEEDBACK_TERMS
) -> list[str]:
    """The ``terms`` rarest-and-most-used tokens of ``passages`` that ``asked`` lacks."""
    counts: Counter[str] = Counter()
    for text in passages:
        tokens = fts.tokens(text)
        if not tokens:
            continue
        for token, n in Counter(tokens).items():
            if token in asked or len(token) < MIN_TERM_CHARS or token.isdigit():
                continue
            if CJK_RUN.search(token):
                continue
            counts[token] += n / len(tokens)
    frequent = [t for t, _ in counts.most_common(CANDIDATE_TERMS)]
    df = fts.doc_frequencies(frequent)
    total = fts.chunk_count()
    scored = {
        t: counts[t] * idf(df[t], total)
        for t in frequent
        if 1 < df.get(t, 0) < total / 2  # seen elsewhere (it can bridge), and not common
    }
    return sorted(scored, key=lambda t: (-scored[t], t))[:terms]


def feedback_leg(
    db: Database,
    fts: FtsIndex,
    keyword: Sequence[LegHit],
    asked: Collection[str],
    documents: int,
    source_id: int | None = None,
) -> list[LegHit]:
    """Documents ranked by bm25 over the feedback terms of ``keyword``'s first documents;
    [] when they yield none. ``asked``: the question's index tokens."""
    first = rows.passages(db.conn, [h.chunk_id for h in keyword[:FEEDBACK_DOCUMENTS]], False)
    terms = feedback_terms(fts, [p.text for p in first.values()], asked)
    expression = or_expression(terms)
    if expression is None:
        return []
    found = fts.segment_best_per_document(terms, documents) if source_id is None else None
    if found is None:
        found = fts.best_per_document(expression, documents, source_id=source_id)
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(found, start=1)]
