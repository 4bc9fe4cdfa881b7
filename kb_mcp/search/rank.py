"""The ranking stage: the legs' passages → per-document ranks → weighted RRF → factor
rules → order passes. Everything a search does after its legs and before its floors.

Its cost is per candidate document (a passage row, a ``Candidate``, each rule), so it is
kept to what the question can use (issue 10: at 100k chunks it was 6–10 ms of a 17 ms
search): rules whose trigger the question lacks are not built, a passage's changelog date
is read only for an as-of question, relations are read only when a candidate has any,
the supersession dates only when the library has a supersession, and when the keyword
leg's scores prove the head of the answer only its first documents are ranked
(``search/shortlist.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kb_mcp.index.fts import FtsIndex, head_text
from kb_mcp.limits import TOP_K
from kb_mcp.search import definition, shortlist
from kb_mcp.search import prior as path_prior
from kb_mcp.search.adjust import Adjustment, Candidate, Rule, apply_rules
from kb_mcp.search.freshness import as_of_date, demotion_rule, reorder, section_date
from kb_mcp.search.fuse import FusedHit, LegHit, fuse_rankings
from kb_mcp.search.related import changes_for
from kb_mcp.search.relations import (
    Change,
    asks_about_past,
    concerned_only,
    order_pass,
    relation_rule,
)
from kb_mcp.search.stats import UnitStats
from kb_mcp.store import documents as rows
from kb_mcp.store import relations as relation_rows
from kb_mcp.store.db import Database

# Documents each leg ranks, whatever ``top_k`` is: the adjustments reorder this fixed set
# and the answer is its head, so a document's rank never depends on ``top_k`` (issue 7
# item 12: the candidate set used to grow with top_k, and so could the ranking).
CANDIDATE_DOCUMENTS = TOP_K.maximum
# Not a leg one can ask for: it stands in for the vector leg's rank of a keyword result
# whose passage has no vector yet (``_not_yet_embedded``).
UNEMBEDDED_LEG = "not yet embedded"


@dataclass(frozen=True, slots=True)
class Ranking:
    """Candidates in their final order, with the fused hits and passages behind them.

    ``order`` may hold only the head of the candidates (``search/shortlist.py``): at least
    the answer's ``top_k`` and the passages the floors read, in the order all of them
    would have."""

    order: list[Candidate]
    fused: dict[str, FusedHit]
    found: dict[int, rows.PassageRow]
    keyword_top: int | None  # chunk id of the keyword leg's best passage
    changes: dict[str, list[Change]] = field(default_factory=dict)

    def passage(self, key: str) -> rows.PassageRow:
        return self.found[self.fused[key].chunk_id]

    def tops(self) -> list[rows.PassageRow]:
        """The passages the lexical floor reads: the answer's first, and the keyword leg's
        best (in hybrid they can differ, and the floor asks whether the words exist)."""
        first = [self.passage(self.order[0].key)] if self.order else []
        if self.keyword_top is not None:
            first.append(self.found[self.keyword_top])
        return first

    def leading(self, count: int) -> list[rows.PassageRow]:
        """The answer's first ``count`` passages, then the keyword leg's best if not among them."""
        first = [self.passage(c.key) for c in self.order[:count]]
        if self.keyword_top is not None and all(p.chunk_id != self.keyword_top for p in first):
            first.append(self.found[self.keyword_top])
        return first


@dataclass(frozen=True, slots=True)
class RankInputs:
    """What ranks the legs' passages, besides the passages: the question and its rules."""

    query: str
    weights: Mapping[str, float]  # leg → RRF weight
    rules: Sequence[Rule] = ()  # extra factor rules from the caller
    use_relations: bool = True
    stats: UnitStats | None = None  # with it, relations act only when they concern the question
    unembedded: Collection[int] = ()  # keyword candidates without a vector yet
    head: int = CANDIDATE_DOCUMENTS  # leading documents the caller reads (answer, floors)
    shortlist: bool = True  # off: rank every candidate (to check the shortlist changes nothing)


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


def _candidate(
    fused: FusedHit,
    passage: rows.PassageRow,
    superseders: Mapping[str, str],
    dated_sections: bool,
) -> Candidate:
    """``dated_sections``: read the changelog date of the passage's section (only the
    as-of pass looks at it, and parsing headings for dates was a tenth of the stage)."""
    entry = section_date(passage.heading_path, passage.doc_date) if dated_sections else None
    return Candidate(
        key=passage.doc_key,
        score=fused.score,
        date=passage.doc_date or passage.updated_at,
        section_date=entry,
        superseded_on=passage.superseded_on,
        superseded_by=superseders.get(passage.doc_key),
        status=passage.status,
        topic=head_text(passage.title, passage.heading_path),
        path=passage.path,
        evidence={c.leg: c.leg_score for c in fused.contributions},
    )


def prior_rule(query: str) -> Rule:
    """The path prior (``search/prior.py``: docs and code above tests, fixtures, vendored
    and generated files and changelogs, unless the question asks for them) as a factor
    rule on the fused score."""
    requested = path_prior.requested_classes(query)
    wanted = path_prior.wanted_classes(query)

    def by_path(candidate: Candidate) -> Adjustment | None:
        found = path_prior.path_adjustment(candidate.path, requested, wanted)
        if found is None:
            return None
        what = path_prior.REASONS[found.path_class]
        reason = f"promoted: {what}, asked for" if found.factor > 1 else f"demoted: {what}"
        return Adjustment(reason, found.factor)

    return by_path


def _passage_tokens(
    fts: FtsIndex, fused: Mapping[str, FusedHit], found: Mapping[int, rows.PassageRow]
) -> Callable[[str], set[str] | None]:
    """Document key → the index tokens of its passage in this ranking (cached), or None."""
    cache: dict[str, set[str]] = {}

    def present(key: str) -> set[str] | None:
        if key not in fused:
            return None
        if key not in cache:
            p = found[fused[key].chunk_id]
            cache[key] = set(fts.tokens(f"{head_text(p.title, p.heading_path)}\n{p.text}"))
        return cache[key]

    return present


def related_chunks(db: Database, fts: FtsIndex) -> dict[int, str]:
    """Chunk id → document key for the documents with a resolved relation, per data
    version: a search whose candidates hold none of them reads no relations."""
    return fts.per_version("related_chunks", lambda: relation_rows.related_chunks(db.conn))


def linked(db: Database, fts: FtsIndex, chunk_ids: Collection[int]) -> bool:
    """Whether a resolved relation links two of the documents of ``chunk_ids``: only then
    can it move one relative to the other (``search/shortlist.py``)."""
    related = related_chunks(db, fts)
    keys = {related[c] for c in chunk_ids if c in related}
    if not keys:
        return False
    partners = fts.per_version("partners", lambda: relation_rows.partners(db.conn))
    return any(not partners.get(key, frozenset()).isdisjoint(keys) for key in keys)


def has_supersessions(db: Database, fts: FtsIndex) -> bool:
    """Whether any document says it supersedes another, per data version."""
    return fts.per_version("supersessions", lambda: rows.has_supersessions(db.conn))


def rank(
    db: Database, fts: FtsIndex, legs: Mapping[str, Sequence[LegHit]], inputs: RankInputs
) -> Ranking:
    """Legs → per-document ranks → weighted RRF → factor rules → order passes.

    With ``inputs.stats``, a correction or update acts only when it concerns what the
    question asks (``relations.concerned_only``); results still say what they are. Only
    the keyword leg's first documents are ranked when that proves the head of the whole
    ranking (``search/shortlist.py``)."""
    chunk_ids = {h.chunk_id for hits in legs.values() for h in hits}
    related = inputs.use_relations and linked(db, fts, chunk_ids)
    plain = not inputs.rules and not inputs.unembedded
    size = shortlist.shortlist_size(legs, inputs.query, inputs.head, plain, related)
    if size is not None and inputs.shortlist:
        keyword = legs["keyword"]
        ranking, lowest = _rank_all(db, fts, {"keyword": keyword[:size]}, inputs)
        weight = inputs.weights.get("keyword", 1.0)
        read = shortlist.PassageReads(
            lambda ids: rows.passage_dates(db.conn, ids),
            lambda ids: rows.passage_heads(db.conn, ids),
            lambda ids: rows.passage_heads(db.conn, ids, with_text=True),
        )
        names = definition.named_identifiers(inputs.query)
        if shortlist.proves(ranking.order, lowest, keyword, size, weight, read, names):
            return ranking
    return _rank_all(db, fts, legs, inputs)[0]


def _rank_all(
    db: Database, fts: FtsIndex, legs: Mapping[str, Sequence[LegHit]], inputs: RankInputs
) -> tuple[Ranking, float]:
    """``rank`` over every passage of ``legs``, and the lowest score a candidate had after
    the factor rules (before the order passes: ``shortlist.proves`` bounds with it)."""
    chunk_ids = list(dict.fromkeys(h.chunk_id for hits in legs.values() for h in hits))
    found = rows.passages(db.conn, chunk_ids, superseded=has_supersessions(db, fts))
    ranked = {name: documents_ranked(hits, found) for name, hits in legs.items()}
    if inputs.unembedded:
        ranked[UNEMBEDDED_LEG] = _not_yet_embedded(ranked, inputs.unembedded, found)
    group = {cid: p.doc_key for cid, p in found.items()}
    recency = {p.doc_key: p.doc_date or p.updated_at for p in found.values()}
    fused_hits = fuse_rankings(ranked, inputs.weights, recency=recency, group=group)
    fused = {str(f.key): f for f in fused_hits}
    superseded = [k for k, f in fused.items() if found[f.chunk_id].superseded_on]
    superseders = rows.superseders(db.conn, superseded)
    query = inputs.query
    as_of = as_of_date(query)
    changes: dict[str, list[Change]] = {}
    if inputs.use_relations and not related_chunks(db, fts).keys().isdisjoint(chunk_ids):
        changes = changes_for(db.conn, list(fused))
    past = asks_about_past(query)
    position = {key: i for i, key in enumerate(fused)}
    acting = changes
    if changes and inputs.stats is not None:
        stats = inputs.stats
        present = _passage_tokens(fts, fused, found)
        units = list(stats.tokens.values())
        acting = concerned_only(changes, units, present, stats.df, stats.chunks)
    rules = [demotion_rule(as_of)]
    if acting:  # without changes the relation rule moves nothing
        rules.append(relation_rule(acting, as_of, past, position))
    rules.append(prior_rule(query))
    if definition.named_identifiers(query):  # else the definition rule moves nothing
        text_of = lambda key: found[fused[key].chunk_id].text  # noqa: E731
        rules.append(definition.definition_rule(query, text_of))
    dated = as_of is not None
    order = apply_rules(
        (_candidate(f, found[f.chunk_id], superseders, dated) for f in fused.values()),
        (*rules, *inputs.rules),
    )
    lowest = min((c.score for c in order), default=float("inf"))
    order = reorder(order, as_of)
    if acting:
        order = order_pass(order, acting, as_of, past, position)
    keyword = ranked.get("keyword")
    top = keyword[0].chunk_id if keyword else None
    return Ranking(order, fused, found, top, changes), lowest
