"""Entities: what ``kb-mcp entities`` and the web view's entity pages show.

Why cut here: the entity graph is read here as a person browses it (an entity, its
heaviest mentions as cites, its neighbours, the links between them for a picture), not
as a search leg ranks passages with it (``search/graph.py``). Its rows are
``index/graph.py``'s; the LLM pass that adds to them is ``graph/enrich.py``.
"""

from __future__ import annotations

from kb_mcp import limits
from kb_mcp.cite import format_cite
from kb_mcp.errors import InvalidInput
from kb_mcp.library.results import EntityLink, EntityView, Neighbour
from kb_mcp.library.state import LibraryState
from kb_mcp.relations.read import described_relations
from kb_mcp.search.graph import entity_choices, lookup_entities
from kb_mcp.store import documents as rows

ENTITY_CITES = 5  # mentions `entities` shows per entity, heaviest first
ENTITY_NEIGHBOURS = 10
# Links between neighbours kept for a drawn entity: every shown string is redacted on the
# way out (bench web, 100k chunks: ~1,800 strings for the 10 entities of a page with all
# 45 pairs of 10 neighbours each); the heaviest 12 still show the clusters.
ENTITY_LINKS = 12


class Entities:
    """Entities and their mentions (``library.entities``)."""

    def __init__(self, state: LibraryState) -> None:
        self.settings = state.settings
        self.db = state.db
        self.graph = state.graph
        # The state's shared steps, under the names the methods below call them by.
        self._ready = state.ready
        self._memo = state.memo

    def find(
        self, query: str | None = None, limit: int = 20, *, drawn: int = 0
    ) -> list[EntityView]:
        """Entities ``query`` names (fuzzily), or the most mentioned: kind, aliases,
        mention count, their heaviest mentions as cites, and their neighbours; the first
        ``drawn`` also carry the links between their neighbours (for a picture)."""
        limits.TOP_K.check(limit, name="limit")
        if query is not None and not query.isascii():
            try:
                query.encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate: no entity can be named so
                raise InvalidInput(
                    f"the query is not valid text (character {exc.start + 1} is half of a "
                    "UTF-16 pair)",
                    hint="send the name as ordinary Unicode text",
                ) from exc
        self._ready()
        views = []
        choices = (
            self._memo("entity_choices", lambda: entity_choices(self.graph)) if query else None
        )
        for entity in lookup_entities(self.graph, query, limit, choices):
            mentioned = self.graph.mentions_of(entity.id, ENTITY_CITES)
            found = rows.passages(self.db.conn, [cid for cid, _w in mentioned])
            shown = [p for p in (found.get(cid) for cid, _w in mentioned) if p is not None]
            cites = tuple(format_cite(p.doc_key, p.start_line, p.end_line) for p in shown)
            linked = self.graph.neighbours(entity.id, ENTITY_NEIGHBOURS)
            others = {e.id: e for e in self.graph.get([other for other, _l, _w in linked])}
            neighbours = tuple(
                Neighbour(others[o].norm, others[o].name, others[o].kind, label, weight)
                for o, label, weight in linked
                if o in others
            )
            links = tuple(
                EntityLink(others[a].norm, others[b].norm, label, weight)
                for a, b, label, weight in (
                    self.graph.links_among(list(others), ENTITY_LINKS) if len(views) < drawn else ()
                )
            )
            views.append(
                EntityView(
                    entity.norm,
                    entity.name,
                    entity.kind,
                    entity.aliases,
                    entity.mentions,
                    cites,
                    neighbours,
                    described_relations(self.db.conn, [p.doc_key for p in shown])
                    if self.settings.relations
                    else {},
                    links,
                )
            )
        return views
