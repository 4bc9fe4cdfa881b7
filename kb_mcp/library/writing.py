"""Writing: agent documents and uploads in, and the index rebuilt from the files.

Why cut here: these are the writes whose truth is a file under ``<home>/docs/`` (an
agent's text, an upload converted to Markdown) and the reindex that re-reads those
files; each stores its rows and writes its file in one transaction. Folder sources,
whose truth is the user's folder, are ``folders.py``; the reindex ends by syncing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kb_mcp.chunk import split_document
from kb_mcp.errors import KbError, Refused
from kb_mcp.fsutil import atomic_write
from kb_mcp.index import graph, keyword_store, vector_store
from kb_mcp.ingest import agent, readers
from kb_mcp.ingest.filework import convert_file_bytes, utc_now
from kb_mcp.ingest.pipeline import (
    Outcome,
    Stored,
    redact_document,
    remove_location,
    rewrite_in_place,
    store_document,
    text_hash,
)
from kb_mcp.ingest.policy import check_readable
from kb_mcp.ingest.sync import Progress, SyncReport
from kb_mcp.library.results import AddResult, ReindexReport
from kb_mcp.library.state import LibraryState
from kb_mcp.redact import redact
from kb_mcp.relations import relink
from kb_mcp.store import documents as rows
from kb_mcp.text.status import classify_status

# Documents read per statement while a rebuild on a shared library re-derives them.
REBUILD_BATCH = 500


class Writing:
    """Agent documents, uploads and reindexing (``library.writing``)."""

    def __init__(self, state: LibraryState, sync: Callable[..., list[SyncReport]]) -> None:
        """``sync(progress=…)`` syncs every folder source: the last step of a reindex."""
        self.settings = state.settings
        self.home = state.home
        self.db = state.db
        self.fts = state.fts
        self._enrichment = state.enrichment
        # The state's shared steps, under the names the methods below call them by.
        self._ready = state.ready
        self._chunks_changed = state.chunks_changed
        self._link_pending = state.links.run
        self.sync = sync

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
        """Store text under the identity of ``source_uri``: created, replaced or unchanged.

        Title, content, uri and tags are redacted before anything is stored. Refused when
        it comes from an agent and agent writes are off; nothing is changed on any error.
        ``link``: run the linking phase before returning (``ingest/links``); the server
        passes False and links in the background.
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
            if link:
                self._link_pending()
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
        relink.prepare(self.db)
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
                self.db.paths.of(f"{doc.doc_key}.md"),
                record,
                split_document(record.text, doc.kind),
                seen_at=doc.updated_at,
            )
            if write_file:
                data = agent.render_agent_file(doc).encode("utf-8")
                atomic_write(agent.agent_file(self.home, doc.doc_key), data)
        return stored

    def import_file(self, path: str | Path, *, link: bool = True) -> AddResult:
        """Import one file as an upload: converted to Markdown under ``docs/``, original kept.

        Identity is the file's resolved path, so importing it again replaces it. The text
        is redacted like an agent document's; sensitive files are refused unread.
        """
        source_path = Path(path).expanduser()
        resolved = check_readable(source_path, source_path.resolve().parent)
        data = readers.read_capped(resolved, readers.MAX_BYTES)
        try:
            converted = convert_file_bytes(  # a PDF bounded, as pdf_mode says
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
            uri=redact(resolved.name).text,  # a file name may hold a secret too
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
        if link:
            self._link_pending()
        return AddResult(
            doc_key, stored.outcome.value, doc.title, stored.chunks, body.count, body.kinds
        )

    def reindex(self, *, rebuild: bool = False, progress: Progress | None = None) -> ReindexReport:
        """Bring the index in line with the files; with ``rebuild`` drop every derived row first.

        On SQLite files are the truth: agent documents are re-read from ``<home>/docs/``
        (on PostgreSQL, the database's copy: ``_reindex_shared``). A plain
        reindex commits document by document, so it never holds the write lock for the
        whole run and other writers (a sync, add_document) get in between (issue 7 item
        18). A rebuild runs in one transaction, so readers see the old index until it
        commits; other writers wait, and past the busy timeout get ``Conflict``.
        """
        if self.db.engine != "sqlite":
            return self._reindex_shared(rebuild=rebuild, progress=progress)
        self._ready()  # docs/ files re-redacted first: a rebuild reads them
        if not rebuild:
            return self._reindex_files(rebuild=False, progress=progress)
        with self.db.write() as conn:
            vector_store.forget_all(conn)  # chunk ids start over: no vector may survive
            graph.forget_all(conn)
            self._enrichment.forget(conn)
            rows.delete_everything(conn)
            self.fts.invalidate()
            self.fts.ensure_current()
            return self._reindex_files(rebuild=True, progress=progress)

    def _reindex_shared(self, *, rebuild: bool, progress: Progress | None) -> ReindexReport:
        """A reindex of a library other homes share (PostgreSQL): the database's own copy
        of each document's text is the truth, not this home's files.

        This home's ``docs/`` holds only the agent documents written from here, and a
        teammate's folders are on their machine: rebuilding from this home's files, as
        on SQLite, would drop both. So agent documents and every other machine's folder
        documents are left as the database holds them; this machine's folder sources
        (``sync``: the folders this home lists) are synced from disk. With ``rebuild``
        the derived rows of every document (passages, both keyword indexes, vectors,
        the entity graph) are dropped and made again from its stored text, in one
        transaction: other writers wait (past the busy timeout, ``Conflict``), and so do
        keyword searches, since emptying the keyword tables locks them until the commit;
        the vectors are embedded again afterwards, as after a rebuild on SQLite.
        Documents keep their ids and relations; their passages get new ids.

        Which folders are this machine's is ``sync``'s to say (``library/folders.py``);
        a sync reads a file again when its size or time changed, so an unchanged file of
        this machine is re-derived from its stored text too, not re-read.
        """
        self._ready()
        if rebuild:
            with self.db.write() as conn:
                vector_store.forget_all(conn)
                graph.forget_all(conn)
                self._enrichment.forget(conn)
                keyword_store.reset(conn)
                after = 0
                while batch := rows.documents_after(conn, after, REBUILD_BATCH):
                    for doc in batch:
                        rewrite_in_place(
                            conn, doc, text=doc.text, title=doc.title, uri=doc.uri, tags=doc.tags
                        )
                    after = batch[-1].id
            self._chunks_changed()
        failed: list[str] = []
        for report in self.sync(progress=progress):
            failed += [f"{report.source}/{path}: {reason}" for path, reason in report.failures]
        documents, chunks = rows.document_total(self.db.conn)
        return ReindexReport(rebuild, documents, chunks, tuple(failed))

    def _reindex_files(self, *, rebuild: bool, progress: Progress | None) -> ReindexReport:
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
        for report in self.sync(progress=progress):
            failed += [f"{report.source}/{path}: {reason}" for path, reason in report.failures]
        documents, chunks = rows.document_total(self.db.conn)
        return ReindexReport(rebuild, documents, chunks, tuple(failed))

    def _drop_vanished_agent_docs(self, source_id: int, seen: set[str]) -> None:
        for _doc, path, _note in rows.list_documents(self.db.conn, source_id, 1_000_000, 0):
            if path not in seen:  # a ``<doc_key>.md`` path: shown as it is
                remove_location(self.db, source_id, self.db.paths.key(path))
