"""The graph leg: a question's names → entities → up to two hops → the passages naming them.

This is the leg that answers what no single passage says: "which channel handles
incidents for the Search Cluster?" finds the passage saying Team Atlas runs the Search
Cluster (the question names the cluster), and through the relation Search Cluster —
Team Atlas, the passage listing Team Atlas's channel, which shares no word with the
question.

Seeds are the stored entities the question spells: its words, adjacent pairs and
triples of words (``Blob Store`` → ``blobstore``), and the sub-runs of its CJK runs,
matched on ``graph/resolve.entity_key``; a word that matches nothing exactly may match a
key fuzzily (``graph/resolve.best_fuzzy``). A seed scores its IDF over mentions. Each
hop follows the heaviest relations of the best entities of the hop before, scaled by
the relation's strength (co-mentions over the geometric mean of both entities' mention
counts) and ``HOP_DECAY``. A passage scores the sum, over the entities it mentions, of
entity score × mention weight.

The graph is not scoped to a source: the seed legs (keyword, vector) are, and a join may
well lead into another source (the team page lives in the wiki, the service in the code).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from kb_mcp.graph.resolve import best_fuzzy, entity_key
from kb_mcp.index.graph import EntityRow, GraphIndex
from kb_mcp.search.fuse import LegHit
from kb_mcp.text.lexicon import STOPWORDS

MAX_HOPS = 2
SEED_FACTOR = 0.1
WEAK_KINDS = frozenset({"name", "acronym", "term", "cjk"})
EXPAND_WEAK_SEEDS = False
HOP_DECAY = 0.5
FRONTIER = 8  # entities expanded from at each hop
NEIGHBOURS = 20  # relations followed from each
MENTIONS_READ = 200  # passages read per entity, heaviest mentions first
MAX_SEED_WORDS = 24  # a question's words considered (pairs and triples of these)
# An entity mentioned in more than this share of passages is a hub ("API", "Python"):
# it still seeds, but is not expanded through (every passage is two hops from a hub).
HUB_SHARE = 0.05
HUB_MIN = 50
LOOKUP_CUTOFF = 80.0  # rapidfuzz WRatio a person's query must reach to list an entity

_TOKEN = re.compile(r"[#@]?[^\s\"'`()\[\]{},;:!?]+")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")


@dataclass(frozen=True, slots=True)
class Reached:
    """An entity the leg reached, how far from the question, and its score."""

    entity: EntityRow
    hops: int
    score: float


def question_keys(text: str) -> tuple[list[str], list[str]]:
    """The keys a question could name: (exact candidates, words worth a fuzzy match).

    Words (stopwords alone are skipped), adjacent pairs and triples, CJK sub-runs of 2-8
    characters.
    """
    words = [w.strip(".") for w in _TOKEN.findall(text)][:MAX_SEED_WORDS]
    words = [w for w in words if w]
    keys: list[str] = []
    fuzzy: list[str] = []
    for i, word in enumerate(words):
        if word.lower() not in STOPWORDS:
            keys.append(entity_key(word))
            fuzzy.append(entity_key(word))
        for n in (2, 3):
            group = words[i : i + n]
            if len(group) == n and not all(w.lower() in STOPWORDS for w in group):
                keys.append(entity_key(" ".join(group)))
    for run in _CJK_RUN.findall(text):
        for size in range(2, min(8, len(run)) + 1):
            keys.extend(run[i : i + size] for i in range(len(run) - size + 1))
    return [k for k in dict.fromkeys(keys) if len(k) >= 2], list(dict.fromkeys(fuzzy))


def seeds(graph: GraphIndex, text: str) -> list[EntityRow]:
    """The stored entities the question names, exactly or (single words) fuzzily."""
    keys, fuzzy = question_keys(text)
    found = {e.norm: e for e in graph.by_norms(keys)}
    guessed = []
    for word in fuzzy:
        if word in found or len(word) < 6:
            continue
        match = best_fuzzy(word, graph.norms_with_prefix(word[:3]))
        if match is not None:
            guessed.append(match)
    for entity in graph.by_norms(guessed):
        found.setdefault(entity.norm, entity)
    return sorted(found.values(), key=lambda e: e.norm)


def expands(entity: EntityRow) -> bool:
    """Whether a seed is specific enough to follow: an identifier, id, handle, tag, a
    multi-word name or a CJK term of three characters or more, not a single capitalised
    word ("Slack", "Monday") or an acronym, whose neighbours are whatever else the
    passages mentioning them mention (golden2 dev multi_hop 0.49 → 0.56)."""
    if not EXPAND_WEAK_SEEDS and entity.kind in WEAK_KINDS:
        return " " in entity.name or any(len(run) >= 3 for run in _CJK_RUN.findall(entity.name))
    return True


def _idf(entity: EntityRow, chunks: int) -> float:
    return math.log(1.0 + chunks / max(1, entity.mentions))


def reach(graph: GraphIndex, text: str) -> list[Reached]:
    """Seeds, then up to ``MAX_HOPS`` hops over relations; best score per entity."""
    chunks = max(1, graph.chunk_count())
    hub = max(HUB_MIN, HUB_SHARE * chunks)
    reached = {e.id: Reached(e, 0, _idf(e, chunks)) for e in seeds(graph, text)}
    frontier = [r for r in reached.values() if expands(r.entity)]
    for hop in range(1, MAX_HOPS + 1):
        frontier = sorted(
            (r for r in frontier if r.entity.mentions <= hub), key=lambda r: (-r.score, r.entity.id)
        )[:FRONTIER]
        found: dict[int, float] = {}
        for source in frontier:
            for other, _label, weight in graph.neighbours(source.entity.id, NEIGHBOURS):
                if other in reached:
                    continue
                carried = source.score * weight / math.sqrt(max(1, source.entity.mentions))
                found[other] = max(found.get(other, 0.0), carried)
        rows = {e.id: e for e in graph.get(sorted(found))}
        nxt = []
        for entity_id, carried in found.items():
            entity = rows.get(entity_id)
            if entity is None:
                continue
            strength = carried / math.sqrt(max(1, entity.mentions))
            reached[entity_id] = Reached(entity, hop, strength * HOP_DECAY)
            nxt.append(reached[entity_id])
        frontier = nxt
    return list(reached.values())


def graph_leg(graph: GraphIndex, text: str, passages: int) -> list[LegHit]:
    """Up to ``passages`` passages ranked by the entities they mention; [] when the
    question names no stored entity."""
    scores: dict[int, float] = {}
    for r in reach(graph, text):
        factor = SEED_FACTOR if r.hops == 0 else 1.0
        if factor == 0.0:
            continue
        for chunk_id, weight in graph.mentions_of(r.entity.id, MENTIONS_READ):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + factor * r.score * weight
    ranked = sorted(scores.items(), key=lambda cs: (-cs[1], cs[0]))[:passages]
    return [LegHit(cid, rank, score) for rank, (cid, score) in enumerate(ranked, start=1)]


def lookup_entities(
    graph: GraphIndex, query: str | None, limit: int, choices: Mapping[int, str] | None = None
) -> list[EntityRow]:
    """Entities for a person: those ``query`` names (its key exactly first, then fuzzy
    matches of names and keys, best first), or the most mentioned without a query.
    ``choices`` is ``entity_choices(graph)`` when the caller keeps it between lookups."""
    if not query or not query.strip():
        return graph.most_mentioned(limit)
    key = entity_key(query)
    exact = graph.by_norms([key])
    scored = process.extract(
        f"{key} {query.casefold()}",
        entity_choices(graph) if choices is None else choices,
        scorer=fuzz.WRatio,
        limit=limit * 2,
        score_cutoff=LOOKUP_CUTOFF,
    )
    ids = [e.id for e in exact] + [entity_id for _c, _s, entity_id in scored]
    unique = list(dict.fromkeys(ids))[:limit]
    return graph.get(unique)


def entity_choices(graph: GraphIndex) -> dict[int, str]:
    """What a fuzzy lookup compares a query with: ``"<key> <name casefolded>"`` per entity.

    Reading and folding every name is ~45 ms of CPU at 30k entities (``bench web``,
    100k chunks) of a lookup's ~110 ms, and the same for every lookup until the graph
    changes, so ``Library`` keeps it per data version.
    """
    return {entity_id: f"{norm} {name.casefold()}" for entity_id, norm, name in graph.all_names()}
