"""An open library's state, shared by the services ``Library`` owns.

Why a module of its own: writing, folders, lookup, entities, the catalog, health and
the views all read the same database and indexes and share four steps (derived data
brought up to date, values kept per data version, a source by its name, background work
woken after a change). Opening them once here lets each service be a small class over
this state with no reference back to ``Library`` (so nothing forms a cycle with it),
and lets ``library.py`` read as the list of what the library does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from kb_mcp.embed.active import ActiveVectors, EmbedderFactory
from kb_mcp.errors import InvalidInput, NotFound
from kb_mcp.fsutil import remove_stale_temps
from kb_mcp.graph.enrich import ExtractorFactory, GraphEnrichment
from kb_mcp.home import DB_FILE
from kb_mcp.index import keyword_store
from kb_mcp.index.graph import GraphIndex
from kb_mcp.ingest import agent, synclock
from kb_mcp.ingest.redate import StoredDates
from kb_mcp.ingest.reredact import StoredRedaction
from kb_mcp.library.linking import Linking
from kb_mcp.relations.relink import StoredRelations
from kb_mcp.rerank.factory import ActiveReranker
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.open import open_database

_T = TypeVar("_T")


class LibraryState:
    """One library's home folder, database, indexes, vectors and LLM pass, opened once."""

    def __init__(
        self,
        settings: Settings,
        *,
        make_embedder: EmbedderFactory | None = None,
        make_extractor: ExtractorFactory | None = None,
    ) -> None:
        """Open (or create) the library, clearing what a crashed process left behind.

        Temp files of interrupted atomic writes go (only stale, unlocked ones: another
        process may be writing), and a source left ``syncing`` by a sync whose process
        is gone becomes ``error`` (a live sync keeps its state: ``ingest/synclock.py``).
        No embedder is built here: that happens at the first use of vectors, so opening
        (and the MCP handshake) never waits for a model.
        """
        self.settings = settings
        self.home = settings.home
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput(
                f"cannot use {self.home} as the library folder: {exc.strerror or exc}",
                hint="pass --home DIR (or set KB_MCP_HOME) to a folder you can write",
            ) from exc
        for folder in (self.home, self.home / agent.DOCS_DIR, self.home / agent.ORIGINALS_DIR):
            remove_stale_temps(folder)
        self.db = open_database(settings, self.home / DB_FILE)
        self.fts = keyword_store.reader(self.db)
        self.graph = GraphIndex(self.db)
        self.redaction = StoredRedaction(self.db, self.home)
        self.dates = StoredDates(self.db)
        self.relations = StoredRelations(self.db)
        self.vectors = ActiveVectors(self.db, settings, make_embedder)
        self._memos: dict[str, tuple[int, object]] = {}  # see memo
        self._memo_lock = threading.Lock()
        self.enrichment = GraphEnrichment(self.db, settings, make_extractor, prepare=self.ready)
        self.reranker = ActiveReranker(settings)  # built at the first search that reranks
        self.links = Linking(self.db, self.fts.refresh_segment)
        synclock.recover_interrupted(self.db)

    def ready(self) -> None:
        """Bring derived data up to date before it is used: the FTS representation, then
        the stored text's redaction rules (``ingest/reredact.py``), then the entity graph
        (``index/graph.py``: built from the chunks by another extractor, or before it
        existed), then the documents' dates (``ingest/redate.py``) and the document
        relations, which read them (``relations/relink.py``). Lazy, so opening a library (and
        the MCP handshake) never waits for them; one check each once done."""
        self.fts.ensure_current()
        self.redaction.ensure_current()
        self.graph.ensure_current()
        self.dates.ensure_current()
        self.relations.ensure_current()

    def chunks_changed(self) -> None:
        """Wake the background work that follows the chunks: linking, embedding and the
        LLM pass."""
        self.links.wanted.set()
        self.vectors.chunks_changed()
        self.enrichment.wanted.set()

    def source_id(self, name: str) -> int:
        """The id of the source named ``name``; NotFound listing the known sources."""
        source = rows.get_source(self.db.conn, name)
        if source is None:
            known = [s.name for s in rows.list_sources(self.db.conn)]
            raise NotFound(
                f"no source named {name!r}",
                hint="known sources: " + (", ".join(known) if known else "none yet"),
            )
        return source.id

    def memo(self, key: str, compute: Callable[[], _T]) -> _T:
        """``compute()``, kept until any connection commits (``Database.change_stamp``).

        Trigger: counting every source's documents, chunks and failures read the whole
        index (``bench web`` at 100k chunks: ~100 ms of the library page's ~200 ms on the
        loaded 2-core machine; ``store/counts.py`` now costs ~10 ms of CPU), and a person
        reloads that page while nothing changed. Outcome: the counts run once per data
        version for the whole process. A commit
        between the stamp and the computation only makes the next call recompute.
        """
        stamp = self.db.change_stamp()
        with self._memo_lock:
            kept = self._memos.get(key)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        value = compute()
        with self._memo_lock:
            self._memos[key] = (stamp, value)
        return value
