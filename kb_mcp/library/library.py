"""``Library``: one open knowledge library and the services it owns.

The MCP tools, the CLI, the web view and the bench are thin adapters over these
services; none of them reaches past them into the store or the indexes. The library is
synchronous (as apsw is); the server calls it from worker threads. It owns the
lifecycles of the database and the indexes, and it never prints.

``Library`` declares no capability of its own: each is a method of the service of its
concept, an attribute named after it (``library.lookup.search(q)``), with its docstring
there. In data-flow order: writing agent documents and uploads, folder sources and
sync, the linking phase, vectors and the LLM pass, search / grep / read, entities, what
the library holds, health and a person's views.
"""

from __future__ import annotations

from kb_mcp.embed.active import EmbedderFactory
from kb_mcp.graph.enrich import ExtractorFactory
from kb_mcp.library.catalog import Catalog
from kb_mcp.library.entities import Entities
from kb_mcp.library.folders import Folders
from kb_mcp.library.health import Health
from kb_mcp.library.lookup import Lookup
from kb_mcp.library.state import LibraryState
from kb_mcp.library.views import Views
from kb_mcp.library.writing import Writing
from kb_mcp.settings import Settings


class Library:
    """One knowledge library: a home folder with ``kb.db`` and ``docs/``.

    Services: ``writing`` (add_document, import_file, reindex), ``folders`` (sources,
    estimate, add, remove, sync), ``links`` (the linking phase), ``vectors``
    (``embed/active.py``: the embedder, embedding runs, the vector index and state),
    ``enrichment`` (``graph/enrich.py``: the LLM pass), ``lookup`` (search, grep, read),
    ``entities``, ``catalog`` (overview, list_source, source_names), ``health``
    (``doctor``) and ``views`` (a person's views). The opened state they share is
    ``settings``, ``home``, ``db`` and the indexes.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        make_embedder: EmbedderFactory | None = None,
        make_extractor: ExtractorFactory | None = None,
    ) -> None:
        """Open (or create) the library, clearing what a crashed process left behind
        (``LibraryState``); no embedder is built until vectors are first used."""
        state = LibraryState(settings, make_embedder=make_embedder, make_extractor=make_extractor)
        self.settings = settings
        self.home = state.home
        self.db = state.db
        self.fts = state.fts
        self.graph = state.graph
        self.redaction = state.redaction
        self.dates = state.dates
        self.relations = state.relations
        self.links = state.links
        self.vectors = state.vectors
        self.enrichment = state.enrichment
        self.folders = Folders(state)
        self.writing = Writing(state, self.folders.sync)
        self.lookup = Lookup(state)
        self.entities = Entities(state)
        self.catalog = Catalog(state)
        self.health = Health(state)
        self.views = Views(state, self.lookup.read)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
