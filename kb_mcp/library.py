"""The ``Library`` facade: every capability of kb-mcp is one method here.

The MCP tools, the CLI and the bench are thin adapters over this class; none of them
reaches past it into the store or the indexes. The library is synchronous (as apsw is);
the server calls it from worker threads. It owns the lifecycles of the database and the
indexes, and it never prints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kb_mcp import grep as grep_mod
from kb_mcp import limits, views
from kb_mcp.chunk import split_document
from kb_mcp.cite import format_cite, parse_cite
from kb_mcp.doctor import run_checks
from kb_mcp.embed.active import NO_EMBEDDER, ActiveVectors, EmbedderFactory
from kb_mcp.errors import InvalidInput, KbError, NotFound, Refused, SearchTimedOut
from kb_mcp.fsutil import atomic_write, remove_stale_temps
from kb_mcp.graph.enrich import EnrichReport, ExtractorFactory, GraphEnrichment
from kb_mcp.index import graph, vectors
from kb_mcp.index.fts import FtsIndex
from kb_mcp.index.graph import GraphIndex
from kb_mcp.ingest import agent, readers, sources, sync, synclock
from kb_mcp.ingest.pipeline import (
    Outcome,
    Stored,
    redact_document,
    remove_location,
    store_document,
    text_hash,
)
from kb_mcp.ingest.policy import check_readable
from kb_mcp.ingest.relink import StoredRelations
from kb_mcp.ingest.reredact import StoredRedaction
from kb_mcp.ingest.status import classify_status
from kb_mcp.ingest.sync import utc_now
from kb_mcp.reader import read_document
from kb_mcp.redact import redact
from kb_mcp.results import (
    AddResult,
    AuditLog,
    DoctorReport,
    DocumentEntry,
    DocumentView,
    EntityLink,
    EntityView,
    FailedFile,
    NearDuplicate,
    Neighbour,
    Overview,
    ReadResult,
    ReindexReport,
    SourceInfo,
    SourceListing,
    VectorState,
)
from kb_mcp.search.engine import (
    SearchRequest,
    SearchResult,
    check_legs,
    plan_search,
    run_search,
)
from kb_mcp.search.graph import entity_choices, lookup_entities
from kb_mcp.search.query import parse_query
from kb_mcp.search.related import described_relations
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.counts import source_counts
from kb_mcp.store.db import Database, QueryTimeout

# The reason of a search's keyword fallback while the server loads the local model (about
# a second after start; waiting for it took searches past their deadline: issue 10).
MODEL_LOADING = (
    "the embedding model is still loading (once, just after the server starts); "
    "keyword results until it is ready"
)

if TYPE_CHECKING:  # imported when vectors are used: keyword-only start-up stays lean
    from kb_mcp.embed.base import Embedder
    from kb_mcp.embed.queue import EmbedReport, Progress
    from kb_mcp.index.vectors import VectorIndex
    from kb_mcp.search.vector import VectorLeg

_T = TypeVar("_T")

DB_FILE = "kb.db"
NEAR_DUPLICATES_SHOWN = 10
ENTITY_CITES = 5  # mentions `entities` shows per entity, heaviest first
ENTITY_NEIGHBOURS = 10
# Links between neighbours kept for a drawn entity: every shown string is redacted on the
# way out (bench web, 100k chunks: ~1,800 strings for the 10 entities of a page with all
# 45 pairs of 10 neighbours each); the heaviest 12 still show the clusters.
ENTITY_LINKS = 12


class Library:
    """One knowledge library: a home folder with ``kb.db`` and ``docs/``."""

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
        self.db = Database(self.home / DB_FILE)
        self.fts = FtsIndex(self.db)
        self.graph = GraphIndex(self.db)
        self.redaction = StoredRedaction(self.db, self.home)
        self.relations = StoredRelations(self.db)
        self._vectors = ActiveVectors(self.db, self.home, settings, make_embedder)
        self._memos: dict[str, tuple[int, object]] = {}  # see _memo
        self._memo_lock = threading.Lock()
        self._enrichment = GraphEnrichment(self.db, self.home, settings, make_extractor)
        synclock.recover_interrupted(self.db, self.home)

    def _ready(self) -> None:
        """Bring derived data up to date before it is used: the FTS representation, then
        the stored text's redaction rules (``ingest/reredact.py``), then the entity graph
        (``index/graph.py``: built from the chunks by another extractor, or before it
        existed), then the document relations (``ingest/relink.py``). Lazy, so opening a
        library (and the MCP handshake) never waits for them; one check each once done."""
        self.fts.ensure_current()
        self.redaction.ensure_current()
        self.graph.ensure_current()
        self.relations.ensure_current()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -------------------------------------------------------------------------

    def add_document(
        self,
        title: str,
        content: str,
        source_uri: str,
        tags: list[str] | None = None,
        *,
        by_agent: bool = True,
    ) -> AddResult:
        """Store text under the identity of ``source_uri``: created, replaced or unchanged.

        Title, content, uri and tags are redacted before anything is stored. Refused when
        it comes from an agent and agent writes are off; nothing is changed on any error.
        """
        if by_agent and not self.settings.allow_agent_writes:
            raise Refused(
                "agent writes are off in this library, so add_document is disabled",
                hint="the user can enable them with `kb-mcp serve --allow-agent-writes`, "
                "KB_MCP_ALLOW_AGENT_WRITES=1, or allow_agent_writes = true in "
                f"{self.home / 'config.toml'}",
            )
        tags = list(tags or [])
        content = content.replace("\r\n", "\n").replace("\r", "\n")  # as files are decoded
        agent.validate_fields(
            title,
            content,
            source_uri,
            tags,
            max_title_chars=self.settings.max_title_chars,
            max_document_bytes=self.settings.max_document_bytes,
        )
        clean_title, clean_body, clean_uri = redact(title), redact(content), redact(source_uri)
        clean_tags = [redact(t).text for t in tags]
        doc_key = agent.doc_key_for_uri(source_uri)
        existing = rows.get_document(self.db.conn, doc_key)
        now = utc_now()
        doc = agent.AgentDocument(
            doc_key=doc_key,
            title=clean_title.text.strip(),
            uri=clean_uri.text,
            tags=tuple(clean_tags),
            content=clean_body.text,
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        stored = self._store_agent_document(doc, write_file=True)
        if stored.outcome is not Outcome.UNCHANGED:
            self._chunks_changed()
        redactions = clean_title.count + clean_body.count + clean_uri.count
        kinds = tuple(sorted({*clean_title.kinds, *clean_body.kinds, *clean_uri.kinds}))
        return AddResult(doc_key, stored.outcome.value, doc.title, stored.chunks, redactions, kinds)

    def _store_agent_document(self, doc: agent.AgentDocument, *, write_file: bool) -> Stored:
        """Index ``doc`` and (when asked) write its file, in one transaction.

        The file is written inside the database transaction: if writing it fails the
        rows roll back, so the index never holds a document its file does not.
        """
        self._ready()
        record = rows.NewDocument(
            doc_key=doc.doc_key,
            title=doc.title,
            uri=doc.uri,
            kind=doc.kind,
            language=None,
            text=doc.content,
            content_hash=text_hash(doc.content),
            doc_date=doc.doc_date,
            tags=doc.tags,
            created_at=doc.created_at,
            updated_at=doc.updated_at,
            supersedes=doc.supersedes,
            status=classify_status(doc.title, {}),
        )
        record = redact_document(record)  # a hand-edited docs/ file too (issue 7 item 1)
        with self.db.write() as conn:
            kind = "agent" if doc.source == agent.AGENT_SOURCE else "upload"
            source_id = rows.ensure_source(conn, doc.source, kind, doc.created_at)
            existing = rows.get_document(conn, doc.doc_key)
            same = (record.content_hash, record.title, record.tags, record.doc_date, record.kind)
            if existing is not None and same == (
                existing.content_hash,
                existing.title,
                existing.tags,
                existing.doc_date,
                existing.kind,
            ):
                chunks = len(rows.chunk_ids(conn, existing.id))
                return Stored(Outcome.UNCHANGED, existing.doc_key, chunks)
            stored = store_document(
                self.db,
                source_id,
                f"{doc.doc_key}.md",
                record,
                split_document(record.text, doc.kind),
                seen_at=doc.updated_at,
            )
            if write_file:
                data = agent.render_agent_file(doc).encode("utf-8")
                atomic_write(agent.agent_file(self.home, doc.doc_key), data)
        return stored

    def import_file(self, path: str | Path) -> AddResult:
        """Import one file as an upload: converted to Markdown under ``docs/``, original kept.

        Identity is the file's resolved path, so importing it again replaces it. The text
        is redacted like an agent document's; sensitive files are refused unread.
        """
        source_path = Path(path).expanduser()
        resolved = check_readable(source_path, source_path.resolve().parent)
        data = readers.read_capped(resolved, readers.MAX_BYTES)
        try:
            converted = sync.convert_file_bytes(  # a PDF bounded, as pdf_mode says
                data, readers.format_key(resolved), self.settings.pdf_mode
            )
        except KbError as exc:
            raise type(exc)(
                f"cannot read {source_path.name}: {exc.message}", hint=exc.hint
            ) from exc
        body = redact(converted.markdown)
        doc_key = agent.doc_key_for_upload(resolved)
        existing = rows.get_document(self.db.conn, doc_key)
        now = utc_now()
        doc = agent.AgentDocument(
            doc_key=doc_key,
            title=redact(converted.title or resolved.name).text,
            uri=resolved.name,
            tags=(),
            content=body.text,
            created_at=existing.created_at if existing else now,
            updated_at=now,
            source=agent.UPLOAD_SOURCE,
            kind=converted.kind,
        )
        original = self.home / agent.ORIGINALS_DIR / f"{doc_key}{resolved.suffix.lower()}"
        atomic_write(original, data)
        stored = self._store_agent_document(doc, write_file=True)
        self._chunks_changed()
        return AddResult(
            doc_key, stored.outcome.value, doc.title, stored.chunks, body.count, body.kinds
        )

    def reindex(self, *, rebuild: bool = False) -> ReindexReport:
        """Bring the index in line with the files; with ``rebuild`` drop every derived row first.

        Files are the truth: agent documents are re-read from ``<home>/docs/``. A plain
        reindex commits document by document, so it never holds the write lock for the
        whole run and other writers (a sync, add_document) get in between (issue 7 item
        18). A rebuild runs in one transaction, so readers see the old index until it
        commits; other writers wait, and past the busy timeout get ``Conflict``.
        """
        self._ready()  # docs/ files re-redacted first: a rebuild reads them
        if not rebuild:
            return self._reindex_files(rebuild=False)
        with self.db.write() as conn:
            vectors.forget_all(conn)  # chunk ids start over: no vector may survive
            graph.forget_all(conn)
            self._enrichment.forget(conn)
            rows.delete_everything(conn)
            self.fts.invalidate()
            self.fts.ensure_current()
            return self._reindex_files(rebuild=True)

    def _reindex_files(self, *, rebuild: bool) -> ReindexReport:
        """Re-store every agent file, drop what vanished, sync the folders; the report."""
        failed: list[str] = []
        seen = set()
        for path in sorted((self.home / agent.DOCS_DIR).glob("*.md")):
            try:
                doc = agent.parse_agent_file(path)
            except KbError as exc:  # one unreadable file must not stop a rebuild
                failed.append(f"{path.name}: {exc.message}")
                continue
            seen.add(f"{doc.doc_key}.md")
            self._store_agent_document(doc, write_file=False)
        for name in (agent.AGENT_SOURCE, agent.UPLOAD_SOURCE):
            source = rows.get_source(self.db.conn, name)
            if source is not None:
                self._drop_vanished_agent_docs(source.id, seen)
        for report in self.sync():
            failed += [f"{report.source}/{path}: {reason}" for path, reason in report.failures]
        documents, chunks = rows.document_total(self.db.conn)
        return ReindexReport(rebuild, documents, chunks, tuple(failed))

    def _drop_vanished_agent_docs(self, source_id: int, seen: set[str]) -> None:
        for _doc, path, _note in rows.list_documents(self.db.conn, source_id, 1_000_000, 0):
            if path not in seen:
                remove_location(self.db, source_id, path)

    # --- folder sources ------------------------------------------------------------------

    def folder_sources(self) -> list[sources.FolderSource]:
        """Registered folders plus the ones the ``folders`` setting names."""
        return sources.folder_sources(self.home, self.settings.folders)

    def estimate_folder(self, path: str | Path, ignore: Sequence[str] = ()) -> sync.Estimate:
        """What syncing ``path`` would read (files, bytes, chunks), before anything is stored."""
        root = Path(path).expanduser().resolve()
        candidate = sources.FolderSource(root.name, str(root), tuple(ignore))
        return sync.estimate_folder(candidate, max_files=self.settings.max_files_per_source)

    def add_folder(
        self, path: str | Path, name: str | None = None, ignore: Sequence[str] = ()
    ) -> sources.FolderSource:
        """Register a folder as a source (``sync`` ingests it)."""
        return sources.register_folder(self.home, Path(path), name, ignore)

    def remove_source(self, name: str) -> int:
        """Forget a folder source and every document only it held; returns how many paths."""
        if name == agent.AGENT_SOURCE:
            raise Refused(
                "the agent source cannot be removed: it holds the documents agents added",
                hint=f"delete single files under {self.home / agent.DOCS_DIR}, then reindex",
            )
        registered = {s.name for s in sources.load_registry(self.home)}
        row = rows.get_source(self.db.conn, name)
        if name not in registered and row is None:
            raise NotFound(f"no source named {name!r}")
        if name in registered:
            sources.unregister_folder(self.home, name)
        return self._drop_source_rows(row) if row else 0

    def _drop_source_rows(self, row: rows.SourceRow) -> int:
        paths = list(rows.source_locations(self.db.conn, row.id))
        with self.db.write() as conn:
            for path in paths:
                remove_location(self.db, row.id, path)
            rows.delete_source(conn, row.id)
        self._chunks_changed()
        return len(paths)

    def sync(
        self,
        source: str | None = None,
        progress: sync.Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        wait: bool = True,
    ) -> list[sync.SyncReport]:
        """Sync folder sources (all, or the one named); resumable and safe to repeat.

        One sync per source at a time, across processes: a source another sync holds is
        waited for (``wait``, the default) or skipped, with no report (``wait=False``).
        Each source ends ``idle``, or ``error`` with the reason, whatever happens.
        """
        self._ready()
        folders = self.folder_sources()
        if source is not None:
            folders = [f for f in folders if f.name == source]
            if not folders:
                self._source_id(source)  # raises NotFound listing the known sources
                raise InvalidInput(f"source {source!r} is not a folder source; nothing to sync")
        else:
            self._drop_unlisted_folders({f.name for f in folders})
        reports = (self._sync_one(folder, progress, should_stop, wait) for folder in folders)
        try:
            return [report for report in reports if report is not None]
        finally:
            self._chunks_changed()

    def _sync_one(
        self,
        folder: sources.FolderSource,
        progress: sync.Progress | None,
        should_stop: Callable[[], bool] | None,
        wait: bool,
    ) -> sync.SyncReport | None:
        """Sync one folder under its source lock; None when another sync holds it."""

        def waiting(pid: int | None) -> None:
            if progress:
                progress(0, 0, f"waiting for another sync of {folder.name} (pid {pid})")

        with synclock.source_lock(self.home, folder.name) as lock:
            if not synclock.acquire(lock, wait=wait, should_stop=should_stop, on_wait=waiting):
                return None
            with self.db.write() as conn:
                source_id = rows.ensure_source(
                    conn, folder.name, "folder", utc_now(), folder.root, folder.ignore
                )
                rows.set_sync_state(conn, source_id, "syncing", None, None)
            # Trigger: any exception, ours or not, even KeyboardInterrupt. Why: a source
            # left "syncing" looked busy forever (issue 7 item 9). Outcome: "error" with
            # the reason, then the exception goes on; "idle" only after a clean return.
            state, error, synced_at = "error", synclock.INTERRUPTED, None
            try:
                report = sync.sync_folder(
                    self.db,
                    folder,
                    source_id,
                    max_files=self.settings.max_files_per_source,
                    progress=progress,
                    should_stop=should_stop,
                    pdf_mode=self.settings.pdf_mode,
                )
                state, error, synced_at = "idle", None, utc_now()
                return report
            except Exception as exc:
                error = sync.failure_reason(exc)
                raise
            finally:
                with self.db.write() as conn:
                    rows.set_sync_state(conn, source_id, state, error, synced_at)

    def _drop_unlisted_folders(self, listed: set[str]) -> None:
        """Folder rows whose source is no longer registered or configured go."""
        for row in rows.list_sources(self.db.conn):
            if row.kind == "folder" and row.name not in listed:
                self._drop_source_rows(row)

    # --- vectors -------------------------------------------------------------------------

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

    def warm_vectors(self) -> None:
        """Load the codes of the signature search would use, so the first search does not."""
        self._vectors.warm()

    def vector_state(self) -> VectorState:
        """Which vectors a search can use now, and the embedder for its query vector."""
        return self._vectors.state()

    def _vector_leg(self) -> VectorLeg | None:
        """The search engine's vector leg (None: ``--embedder none``), from ``vector_state``."""
        if self.settings.embedder == "none":
            return None
        from kb_mcp.search.vector import EmbeddedLeg, UnusableLeg, coverage_state

        state = self.vector_state()
        if not state.usable:
            return UnusableLeg(state.reason or "no vectors yet")
        loading = getattr(state.embedder, "loading", None)  # the local model has it
        if loading is not None and loading():
            return UnusableLeg(MODEL_LOADING)
        ready = coverage_state(state.embedded, state.pending)
        if not ready.usable:
            return UnusableLeg(ready.reason or "")
        assert state.index is not None and state.embedder is not None
        assert state.signature_id is not None
        return EmbeddedLeg(self.db, state.index, state.embedder, state.signature_id, ready)

    def _chunks_changed(self) -> None:
        self._vectors.chunks_changed()
        self._enrichment.wanted.set()

    # --- the LLM pass over the graph -----------------------------------------------------

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

    # --- reading -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int | None = None,
        mode: str = "auto",
        source: str | None = None,
        legs: Sequence[str] | None = None,
    ) -> SearchResult:
        """Ranked, cited passages, one per document; empty (with a reason) when none match.

        ``legs`` names the legs to run (any of keyword, vector, graph) instead of the
        mode's plan, so each leg's contribution can be measured.
        """
        top_k = self.settings.search_top_k if top_k is None else limits.TOP_K.check(top_k)
        named = check_legs(legs) if legs is not None else None
        request = SearchRequest(
            query, top_k, mode, source, named, self.settings.relations
        ).validated()
        source_id = self._source_id(source) if source else None
        # A lazy index rebuild is proportional to the library, not to the query: it runs
        # before the deadline starts, or a large library could never finish upgrading.
        self._ready()
        wants_vectors = "vector" in named if named is not None else mode != "keyword"
        leg = self._vector_leg() if wants_vectors else None
        self._embed_question(leg, request)
        try:
            with self.db.deadline(self.settings.search_timeout_ms):
                result = run_search(self.db, self.fts, request, source_id, leg, graph=self.graph)
        except QueryTimeout as exc:
            raise SearchTimedOut(
                f"search took longer than {self.settings.search_timeout_ms} ms and was stopped",
                hint="use fewer or more specific words",
            ) from exc
        if leg is not None and leg.embed_seconds:  # the leg is this search's own
            result = replace(result, embed_ms=round(leg.embed_seconds * 1000, 2))
        return result

    def _embed_question(self, leg: VectorLeg | None, request: SearchRequest) -> None:
        """Embed the question before the database deadline starts, when the plan runs
        the vector leg: the deadline covers the database work only, and the embedding
        has its own budget of the same length (``search/vector.py`` says why)."""
        from kb_mcp.search.vector import EmbeddedLeg

        if isinstance(leg, EmbeddedLeg) and "vector" in plan_search(request, leg).legs:
            leg.embed_question(request.query, self.settings.search_timeout_ms / 1000)

    def entities(
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
        limit = self.settings.grep_max_matches if max_matches is None else max_matches
        limits.MAX_MATCHES.check(limit)
        compiled = grep_mod.compile_pattern(pattern, is_regex=regex, ignore_case=ignore_case)
        self._ready()  # grep must never match text stored under older rules
        source_id = self._source_id(source) if source else None
        matches, truncated, timed_out, scanned = grep_mod.grep_texts(
            rows.iter_texts(self.db.conn, source_id),
            compiled,
            path_glob=path_glob,
            max_matches=limit,
            timeout_s=self.settings.grep_timeout_ms / 1000,
        )
        return grep_mod.GrepResult(pattern, tuple(matches), truncated, timed_out, scanned)

    def read(
        self, doc: str, start_line: int | None = None, end_line: int | None = None
    ) -> ReadResult:
        """A document, or a line range of it, by id, cite string, uri or path."""
        for name, line in (("start_line", start_line), ("end_line", end_line)):
            if line is not None:
                limits.LINE.check(line, name=name)
        self._ready()
        return read_document(self.db, doc, start_line, end_line)

    def _source_id(self, name: str) -> int:
        source = rows.get_source(self.db.conn, name)
        if source is None:
            known = [s.name for s in rows.list_sources(self.db.conn)]
            raise NotFound(
                f"no source named {name!r}",
                hint="known sources: " + (", ".join(known) if known else "none yet"),
            )
        return source.id

    def overview(self) -> Overview:
        """The library: sources with counts, sync state and vector coverage, index health
        (vectors: which model, embedded / pending, the last failure), search modes."""
        conn = self.db.conn
        counts = self._memo("source_counts", lambda: source_counts(conn))
        state = self.vector_state()
        health_row = self._vectors.configured_row() or (
            vectors.signature_row(conn, state.signature_id) if state.signature_id else None
        )
        covered = (
            self._memo(f"coverage:{health_row.id}", lambda: vectors.coverage(conn, health_row.id))
            if health_row
            else {}
        )
        sources = tuple(
            SourceInfo(
                s.name,
                s.kind,
                s.root,
                *counts.get(s.id, (0, 0, 0)),
                s.sync_state,
                s.synced_at,
                s.sync_error,
                *(covered.get(s.id, (0, 0)) if health_row else (None, None)),
            )
            for s in rows.list_sources(conn)
        )
        documents, chunks = rows.document_total(conn)
        pairs, examples = rows.near_duplicate_pairs(conn, NEAR_DUPLICATES_SHOWN)
        health = {
            "keyword_index": "current" if self.fts.is_current() else "pending migration",
            "stored_redaction": "current" if self.redaction.is_current() else "pending upgrade",
            "vectors": _describe_vectors(state),
            "embed_pending": state.pending if self.settings.embedder != "none" else 0,
            "embed_failed_documents": self._memo(
                "failed_documents", lambda: vectors.failed_documents(conn)
            ),
            "embed_error": (health_row.last_error if health_row else None)
            or self._vectors.last_error,
            "failed_files": sum(s.failed for s in sources),
            "near_duplicate_pairs": pairs,
        }
        modes = ("keyword", "vector", "hybrid", "grep") if state.usable else ("keyword", "grep")
        return Overview(
            str(self.home),
            sources,
            documents,
            chunks,
            modes,
            health,
            tuple(NearDuplicate(*pair) for pair in examples),
        )

    def doctor(self) -> DoctorReport:
        """Health checks of the home, database, index, folders, optional extras, vectors."""
        failed = sum(f for _, _, f in source_counts(self.db.conn).values())
        return run_checks(
            self.settings,
            self.db,
            self.fts,
            self.folder_sources(),
            failed,
            embedder=self.embedder(),
            vector_state=self.vector_state(),
            graph_llm=self._enrichment.status(),
        )

    def list_source(self, source: str, limit: int = 50, offset: int = 0) -> SourceListing:
        """One source's entries, one per path, newest first, a page at a time.

        ``total`` counts the same rows the pages hold, so paging to ``total`` covers every
        path exactly once (a document held at two paths is listed at both).
        """
        limits.LIST_LIMIT.check(limit)
        limits.OFFSET.check(offset)
        source_id = self._source_id(source)
        self._ready()
        page = rows.list_documents(self.db.conn, source_id, limit, offset)
        total = rows.count_listed(self.db.conn, source_id)  # counts what is paged: paths
        entries = tuple(
            DocumentEntry(d.doc_key, d.title, d.uri or path, d.doc_date, d.updated_at, note)
            for d, path, note in page
        )
        return SourceListing(source, entries, total, offset)

    # --- a person's views (the web view, issue 12) ---------------------------------------

    def failed_files(self, limit: int = 200) -> tuple[FailedFile, ...]:
        """Folder files the last syncs could not index, with the reader's reason."""
        return self._memo(f"failed_files:{limit}", lambda: views.failed_files(self.db, limit))

    def _memo(self, key: str, compute: Callable[[], _T]) -> _T:
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

    def source_names(self) -> tuple[str, ...]:
        """Every source's name (a search scope), without the counts ``overview`` adds."""
        return tuple(s.name for s in rows.list_sources(self.db.conn))

    def query_terms(self, query: str) -> tuple[str, ...]:
        """The words and CJK phrases the keyword leg searches for (what a view highlights)."""
        parsed = parse_query(query)
        return (*parsed.terms, *parsed.phrases)


def _describe_vectors(state: VectorState) -> str:
    """One line for ``list``: the model in use and its coverage, or why there is none."""
    if state.usable and state.signature is not None:
        return (
            f"{state.signature.describe()}: {state.embedded:,} passages embedded, "
            f"{state.pending:,} pending"
        )
    return f"off: {state.reason}" if state.reason == NO_EMBEDDER else f"not usable: {state.reason}"
