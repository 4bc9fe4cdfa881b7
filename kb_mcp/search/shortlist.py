"""Rank only the keyword leg's first documents when its scores prove the rest cannot reach
the head of the answer (issue 10: ranking all 100 candidates cost 6–10 ms a search).

The ranking stage (``search/rank.py``) turns each candidate into a fused score, applies
factor rules, then order passes. Ranked alone, the first ``size`` documents of a lone
keyword leg keep exactly the order and scores they have among all 100 when nothing below
them can climb into them:

- **Scores.** One leg: a document's fused score is ``weight / (RRF_K + rank)``, whoever
  else is ranked. A document below the shortlist scores at most the first one below's,
  and no rule can raise it when no rule can promote (no file class the question asks for
  and no relation in play are preconditions; a document below that defines an identifier
  the question names fails the proof). So when every
  shortlisted document still scores above that after its rules, all of them stay above
  every document below.
- **Order passes.** The as-of pass reads dates across the whole list (precondition: no
  as-of date). The recency pass moves a newer near-tied document on a similar topic one
  place up at a time; it can carry a document from below into the shortlist only by
  passing a shortlisted one. ``proves`` checks every pair that could (``may_pass``,
  whatever the two documents' standing): the document below must score at least
  ``LEG_TIE`` of the other's bm25, so only the first few below are read, by their titles,
  headings and dates.
- **Relations.** A relation moves a document relative to the other one it links (the
  relation rule's match, the order pass, ``concerned_only``) only when both are ranked;
  a withdrawal or supersession demotes its document whatever else is ranked, which the
  score check covers. So the shortlist runs only when no relation links two of the 100
  candidates (``rank.linked``); each shortlisted document still reads its relations, for
  the demotion and the relations its hit reports.

When a check fails the stage ranks all 100 as before: the result is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kb_mcp.index.fts import head_text
from kb_mcp.search import definition
from kb_mcp.search import prior as path_prior
from kb_mcp.search.adjust import Candidate
from kb_mcp.search.freshness import LEG_TIE, as_of_date, day, may_pass
from kb_mcp.search.fuse import RRF_K, LegHit
from kb_mcp.store import documents as rows

# Documents ranked when the shortlist may prove the head (at least the ``head`` the caller
# reads). Over the bench perf 100k index (200 SciFact / NFCorpus / CMRC2018 queries, top_k
# 10, thread CPU, load 6-8): proved for 192 / 182 / 192 queries at 12, 192 / 178 / 192
# at 20, 192 / 169 / 192 at 30; CPU p50 / p95 within noise of each other (SciFact 11.2 /
# 19.5 ms at 12, 12.0 / 18.9 at 20, 13.0 / 20.3 at 30). 20 keeps room above the head.
SHORTLIST_DOCUMENTS = 20


def shortlist_size(
    legs: Mapping[str, Sequence[LegHit]],
    query: str,
    head: int,
    plain: bool,
    related: bool,
) -> int | None:
    """How many of the keyword leg's documents to rank, or None to rank all of them.

    ``head``: the leading documents the caller reads (its ``top_k``, the floors');
    ``plain``: no extra rules and no not-yet-embedded stand-ins; ``related``: whether a
    candidate's document has a relation. None unless the keyword leg is the only leg, and
    no rule but the definition rule (``proves`` checks it) can promote or look across
    candidates."""
    keyword = legs.get("keyword")
    size = max(SHORTLIST_DOCUMENTS, head)
    if set(legs) != {"keyword"} or keyword is None or len(keyword) <= size:
        return None
    if not plain or related or as_of_date(query) is not None:
        return None
    if path_prior.wanted_classes(query):
        return None  # a promotion could lift a document from below
    return size


def proves(
    order: Sequence[Candidate],
    lowest: float,
    keyword: Sequence[LegHit],
    size: int,
    weight: float,
    read: PassageReads,
    names: frozenset[str] = frozenset(),
) -> bool:
    """Whether ``order`` (the first ``size`` documents ranked alone, ``lowest`` their lowest
    score before the order passes) is the head of ranking all of ``keyword``.

    ``read`` reads what the recency check needs of the documents below, dates first:
    only those newer than the oldest shortlisted one can pass it. ``names``: the
    identifiers the question spells (``definition.named_identifiers``); a document below
    defining one would be promoted, so none may."""
    if len(order) != size or lowest <= weight / (RRF_K + size + 1):
        return False
    if names and not _none_defines(names, [hit.chunk_id for hit in keyword[size:]], read):
        return False
    exposed = _exposed(keyword, size)
    dates = read.dates([chunk_id for chunk_id, _score in exposed])
    oldest = min(day(c.date) for c in order)
    newer = [(cid, score) for cid, score in exposed if day(dates.get(cid)) > oldest]
    heads = read.heads([chunk_id for chunk_id, _score in newer])
    for chunk_id, score in newer:
        found = heads.get(chunk_id)
        if found is None:
            continue  # deleted since the leg ran: the full ranking drops it too
        below = Candidate(
            key=str(chunk_id),
            score=0.0,
            date=found.doc_date or found.updated_at,
            topic=head_text(found.title, found.heading_path),
            evidence={"keyword": score},
        )
        if any(may_pass(c, below) for c in order):
            return False
    return True


def _none_defines(names: frozenset[str], chunk_ids: Sequence[int], read: PassageReads) -> bool:
    """Whether no passage of ``chunk_ids`` defines one of ``names`` (the definition rule
    would promote it). Questions naming a camelCase word ("mRNA", "siRNA") are common in
    SciFact, and code definitions rare in most passages."""
    for found in read.texts(chunk_ids).values():
        if definition.defines_any(names, head_text(found.title, found.heading_path), found.text):
            return False
    return True


@dataclass(frozen=True, slots=True)
class PassageReads:
    """The store reads ``proves`` needs: chunk ids → dates, chunk ids → passage heads."""

    dates: Callable[[Sequence[int]], Mapping[int, str]]
    heads: Callable[[Sequence[int]], Mapping[int, rows.PassageHead]]
    texts: Callable[[Sequence[int]], Mapping[int, rows.PassageHead]]  # heads with their text


def _exposed(keyword: Sequence[LegHit], size: int) -> list[tuple[int, float]]:
    """The chunks below the shortlist scoring at least ``LEG_TIE`` of its lowest bm25: the
    only ones the recency pass could move into it (``near_tied``)."""
    floor = LEG_TIE["keyword"] * min(hit.score for hit in keyword[:size])
    return [(hit.chunk_id, hit.score) for hit in keyword[size:] if hit.score >= floor]
