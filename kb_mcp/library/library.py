"""The ``Library`` facade: every capability of kb-mcp is one method here.

The MCP tools, the CLI and the bench are thin adapters over this class; none of them
reaches past it into the store or the indexes. The library is synchronous (as apsw is);
the server calls it from worker threads. It owns the lifecycles of the database and the
indexes, and it never prints.

Each method is one line over a module of one concept, in data-flow order: the opened
state they share (``state.py``), writing agent documents and uploads (``writing.py``),
folder sources and sync (``folders.py``), vectors (``embed/active.py``) and the LLM pass
(``graph/enrich.py``), search / grep / read (``lookup.py``), entities (``entities.py``),
what the library holds (``catalog.py``), health (``doctor.py``) and a person's views
(``views.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp import grep as grep_mod
from kb_mcp import views
from kb_mcp.catalog import Catalog
from kb_mcp.cite import parse_cite
from kb_mcp.doctor import FILES_NAMED, run_checks
from kb_mcp.embed.active import EmbedderFactory
from kb_mcp.entities import Entities
from kb_mcp.folders import Folders
from kb_mcp.graph.enrich import EnrichReport, ExtractorFactory
from kb_mcp.home import DB_FILE
from kb_mcp.ingest import sources, sync
from kb_mcp.ingest.links import LinkReport
from kb_mcp.ingest.skipped import groups as skipped_groups
from kb_mcp.lookup import MODEL_LOADING, Lookup
from kb_mcp.results import (
    AddResult,
    AuditLog,
    DoctorReport,
    DocumentView,
    EntityView,
    FailedFile,
    LeftOut,
    Overview,
    ReadResult,
    ReindexReport,
    SourceListing,
    VectorBacklog,
    VectorState,
)
from kb_mcp.search.engine import SearchResult
from kb_mcp.search.query import parse_query
from kb_mcp.settings import Settings
from kb_mcp.state import LibraryState
from kb_mcp.store import documents as rows
from kb_mcp.store import link_queue
from kb_mcp.store.counts import source_counts
from kb_mcp.store.failures import storage_failure
from kb_mcp.writing import Writing

# ``storage_failure``: what the adapters ask in their last ``except`` (store/failures.py).
__all__ = ["DB_FILE", "MODEL_LOADING", "Library", "storage_failure"]

if TYPE_CHECKING:  # imported when vectors are used: keyword-only start-up stays lean
    from kb_mcp.embed.base import Embedder
    from kb_mcp.embed.queue import EmbedReport, Progress
    from kb_mcp.index.vectors import VectorIndex


class Library:
    """One knowledge library: a home folder with ``kb.db`` and ``docs/``."""

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
        self._vectors = state.vectors
        self._enrichment = state.enrichment
        self._reranker = state.reranker
        self._ready = state.ready
        self._memo = state.memo
        self._state = state
        self._folders = Folders(state)
        self._writing = Writing(state, self._folders.sync)
        self._lookup = Lookup(state)
        self._entities = Entities(state)
        self._catalog = Catalog(state)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing (writing.py) ------------------------------------------------------------

    def add_document(
        self,
        title: str,
        content: str,
        source_uri: str,
        tags: list[str] | None = None,
        *,
        by_agent: bool = True,
        link: bool = True,
    ) -> AddResult:
        """Store text under the identity of ``source_uri``: created, replaced or unchanged;
        ``link``: its entities and relations recorded before returning (else later)."""
        return self._writing.add_document(
            title, content, source_uri, tags, by_agent=by_agent, link=link
        )

    def import_file(self, path: str | Path, *, link: bool = True) -> AddResult:
        """Import one file as an upload: converted to Markdown under ``docs/``, original kept."""
        return self._writing.import_file(path, link=link)

    def reindex(
        self, *, rebuild: bool = False, progress: sync.Progress | None = None
    ) -> ReindexReport:
        """Bring the index in line with the files; with ``rebuild`` drop every derived row
        first. ``progress`` follows the folders' sync, the long part."""
        return self._writing.reindex(rebuild=rebuild, progress=progress)

    # --- folder sources (folders.py) -----------------------------------------------------

    def folder_sources(self) -> list[sources.FolderSource]:
        """Registered folders plus the ones the ``folders`` setting names."""
        return self._folders.folder_sources()

    def estimate_folder(
        self, path: str | Path, ignore: Sequence[str] = (), *, gitignore: bool = True
    ) -> sync.Estimate:
        """What syncing ``path`` would read (files, bytes, chunks), before anything is stored."""
        return self._folders.estimate_folder(path, ignore, gitignore=gitignore)

    def add_folder(
        self,
        path: str | Path,
        name: str | None = None,
        ignore: Sequence[str] = (),
        *,
        gitignore: bool = True,
    ) -> sources.FolderSource:
        """Register a folder as a source (``sync`` ingests it); ``gitignore``: whether its
        walk honours ``.gitignore`` files."""
        return self._folders.add_folder(path, name, ignore, gitignore=gitignore)

    def set_gitignore(self, name: str, gitignore: bool) -> sources.FolderSource:
        """Whether the folder source ``name`` honours ``.gitignore`` from its next sync on."""
        return self._folders.set_gitignore(name, gitignore)

    def left_out(self, name: str, *, skipped: bool = False) -> LeftOut:
        """A folder source's files that are not indexed: every failed one with its reason,
        and with ``skipped`` every path a walk made now leaves out, per reason."""
        return self._folders.left_out(name, skipped=skipped)

    def remove_source(self, name: str) -> int:
        """Forget a folder source and every document only it held; returns how many paths."""
        return self._folders.remove_source(name)

    def sync(
        self,
        source: str | None = None,
        progress: sync.Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        wait: bool = True,
        link: bool = True,
    ) -> list[sync.SyncReport]:
        """Sync folder sources (all, or the one named); resumable and safe to repeat.
        ``link``: the linking phase runs after the keyword phase (else later)."""
        return self._folders.sync(source, progress, should_stop, wait=wait, link=link)

    # --- the linking phase (ingest/links.py) ---------------------------------------------

    @property
    def links_wanted(self) -> threading.Event:
        """Set when documents may wait for linking; the server's linking thread waits on it."""
        return self._state.links_wanted

    def link_pending(
        self,
        *,
        should_stop: Callable[[], bool] | None = None,
        progress: sync.Progress | None = None,
        wait: bool = True,
    ) -> LinkReport | None:
        """Record the entities, relations and near-duplicates of every document stored
        since the last run (``ingest/links.py``); resumable. None when it stopped while
        another process's run held the library, or (``wait=False``) one does."""
        return self._state.link_pending(should_stop, progress, wait=wait)

    def links_pending(self) -> int:
        """Documents whose entities and relations are not recorded yet."""
        return link_queue.pending_count(self.db.conn)

    # --- vectors (embed/active.py) -------------------------------------------------------

    def embedder(self) -> Embedder | None:
        """The configured embedder (None: ``--embedder none``), built on first use."""
        return self._vectors.embedder()

    @property
    def vector_index(self) -> VectorIndex:
        """The library's one approximate-neighbour index (codes cached in memory)."""
        return self._vectors.index

    @property
    def embed_wanted(self) -> threading.Event:
        """Set when there may be chunks to embed; the background embedder waits on it."""
        return self._vectors.wanted

    def embed_pending(
        self,
        *,
        batch: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        progress: Progress | None = None,
        wait: bool = True,
    ) -> EmbedReport | None:
        """Embed every chunk that has no vector of the configured embedder yet.

        None when there is nothing to run: ``--embedder none``, or (``wait=False``)
        another process is embedding this signature right now. A provider failure ends
        the run with ``error`` set and the documents marked ``embed_pending``; the next
        run retries. See ``embed/active.py`` for the model-change policy.
        """
        return self._vectors.embed_pending(
            batch=batch, should_stop=should_stop, progress=progress, wait=wait
        )

    def vector_backlog(self, *, measure: bool = False) -> VectorBacklog | None:
        """The passages left to embed and how long they will take (None: no embedder);
        ``measure`` times two small batches now when the library has no rate of its own
        (``embed/active.py``)."""
        return self._vectors.backlog(measure=measure)

    def warm_vectors(self) -> None:
        """Load the codes of the signature search would use, so the first search does not."""
        self._vectors.warm()

    def vector_state(self) -> VectorState:
        """Which vectors a search can use now, and the embedder for its query vector."""
        return self._vectors.state()

    # --- the LLM pass over the graph (graph/enrich.py) -----------------------------------

    @property
    def graph_wanted(self) -> threading.Event:
        """Set when there may be chunks for the LLM pass; the background pass waits on it."""
        return self._enrichment.wanted

    def enrich_graph(
        self,
        *,
        should_stop: Callable[[], bool] | None = None,
        progress: Progress | None = None,
        wait: bool = True,
    ) -> EnrichReport | None:
        """Run the LLM extractor over the chunks it has not seen (``graph/enrich.py``).

        None when ``graph_extractor`` is ``heuristic``, or (``wait=False``) another
        process runs the pass for this model now. Failures keep the heuristic entities;
        the chunks are retried by a later pass, after a backoff.
        """
        self._ready()
        return self._enrichment.run(should_stop=should_stop, progress=progress, wait=wait)

    # --- reading (lookup.py, entities.py) ------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int | None = None,
        mode: str = "auto",
        source: str | None = None,
        legs: Sequence[str] | None = None,
    ) -> SearchResult:
        """Ranked, cited passages, one per document; empty (with a reason) when none match."""
        return self._lookup.search(query, top_k, mode, source, legs)

    @property
    def lookup(self) -> Lookup:
        """Search, grep and read, for the bench's deeper looks (``ranked``)."""
        return self._lookup

    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        source: str | None = None,
        path_glob: str | None = None,
        max_matches: int | None = None,
    ) -> grep_mod.GrepResult:
        """Lines of stored text matching ``pattern``, bounded by count and time."""
        return self._lookup.grep(
            pattern,
            regex=regex,
            ignore_case=ignore_case,
            source=source,
            path_glob=path_glob,
            max_matches=max_matches,
        )

    def read(
        self, doc: str, start_line: int | None = None, end_line: int | None = None
    ) -> ReadResult:
        """A document, or a line range of it, by id, cite string, uri or path."""
        return self._lookup.read(doc, start_line, end_line)

    def entities(
        self, query: str | None = None, limit: int = 20, *, drawn: int = 0
    ) -> list[EntityView]:
        """Entities ``query`` names (fuzzily), or the most mentioned, with their mentions
        as cites and their neighbours."""
        return self._entities.entities(query, limit, drawn=drawn)

    # --- what the library holds (catalog.py, doctor.py) ----------------------------------

    def overview(self) -> Overview:
        """The library: sources with counts, sync state and vector coverage, index health
        (vectors: which model, embedded / pending, the last failure), search modes."""
        return self._catalog.overview()

    def list_source(self, source: str, limit: int = 50, offset: int = 0) -> SourceListing:
        """One source's entries, one per path, newest first, a page at a time."""
        return self._catalog.list_source(source, limit, offset)

    def source_names(self) -> tuple[str, ...]:
        """Every source's name (a search scope), without the counts ``overview`` adds."""
        return self._catalog.source_names()

    def database_problems(self) -> list[str]:
        """What ``PRAGMA quick_check`` finds wrong with ``kb.db`` ([] when it is sound)."""
        return self.db.integrity_problems() or []

    def doctor(self) -> DoctorReport:
        """Health checks of the home, database, index, folders, optional extras, vectors."""

        def skipped() -> dict[str, dict[str, int]]:
            summaries = rows.skipped_summaries(self.db.conn)
            return {
                s.name: {g.reason: g.count for g in skipped_groups(summaries.get(s.id))}
                for s in rows.list_sources(self.db.conn)
            }

        return run_checks(
            self.settings,
            self.db,
            self.fts,
            self.folder_sources(),
            lambda: sum(f for _, _, f in source_counts(self.db.conn).values()),
            failed_first=lambda: views.failed_files(self.db, FILES_NAMED),
            skipped=skipped,
            embedder=self.embedder(),
            vector_state=self.vector_state,
            graph_llm=self._enrichment.status,
            reranker=self._reranker.get(),
        )

    # --- a person's views (the web view, issue 12; views.py) -----------------------------

    def failed_files(self, limit: int = 200) -> tuple[FailedFile, ...]:
        """Folder files the last syncs could not index, with the reader's reason."""
        return self._memo(f"failed_files:{limit}", lambda: views.failed_files(self.db, limit))

    def audit_log(self, shown: int = 100, window: int = 2_000) -> AuditLog:
        """The newest tool calls of the audit log (tool, duration, outcome; newest first)
        and per tool over the last ``window`` calls: calls, errors, median and max time."""
        return views.audit_log(self.home, shown, window)

    def document_view(self, doc: str) -> DocumentView:
        """A whole document (as ``read``) with its frontmatter, relations and entities;
        a cite string (``doc#L12-L40``) names the document and the lines it cites."""
        citation = parse_cite(doc)
        whole = self.read(citation.doc if citation else doc)
        cited = (citation.start_line, citation.end_line) if citation else None
        return views.document_view(self.db, self.graph, whole, cited)

    def query_terms(self, query: str) -> tuple[str, ...]:
        """The words and CJK phrases the keyword leg searches for (what a view highlights)."""
        parsed = parse_query(query)
        return (*parsed.terms, *parsed.phrases)
