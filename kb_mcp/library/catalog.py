"""The catalog: what the library holds, as the ``list`` tool and the library page show it.

Why cut here: these reads count and list rather than find (sources with their counts,
sync state and vector coverage, index health, one source's entries a page at a time),
and the whole-index counts among them are kept per data version (``LibraryState.memo``).
"""

from __future__ import annotations

from kb_mcp import limits
from kb_mcp.embed.active import NO_EMBEDDER
from kb_mcp.index import vector_store
from kb_mcp.ingest import links, skipped
from kb_mcp.ingest.sources import LOCAL_KINDS
from kb_mcp.library.results import (
    DocumentEntry,
    FailedFile,
    NearDuplicate,
    Overview,
    SourceInfo,
    SourceListing,
    VectorState,
)
from kb_mcp.library.state import LibraryState
from kb_mcp.search.vector import (
    BUILD_HINT,
    USABLE_COVERAGE,
    building_reason,
    percent,
    readiness,
)
from kb_mcp.store import documents as rows
from kb_mcp.store.counts import source_counts

NEAR_DUPLICATES_SHOWN = 10
# ``list`` checks the database file (``PRAGMA quick_check``) once per data version, for
# at most this long: quick_check read a 126 MB file in 0.5 s here (~250 MB/s), so files
# up to ~50 MB are checked whole. A larger file is not tried (the time would be spent
# for nothing after every commit): it says "not checked" and ``doctor`` checks it.
HEALTH_CHECK_MS = 200
HEALTH_CHECK_BYTES = 50_000_000
DAMAGED = "damaged"  # how a damaged database's health entry starts (the CLI's exit code)
FAILED_SHOWN = 10  # failed files named by a source's listing; `--failed` names them all


class Catalog:
    """What the library holds (``library.catalog``)."""

    def __init__(self, state: LibraryState) -> None:
        self.settings = state.settings
        self.home = state.home
        self.db = state.db
        self.fts = state.fts
        self.redaction = state.redaction
        self._vectors = state.vectors
        # The state's shared steps, under the names the methods below call them by.
        self._source_id = state.source_id
        self._ready = state.ready
        self._memo = state.memo
        self.vector_state = state.vectors.state

    def overview(self) -> Overview:
        """The library: sources with counts, sync state and vector coverage, index health
        (vectors: which model, embedded / pending, the last failure), search modes."""
        conn = self.db.conn
        counts = self._memo("source_counts", lambda: source_counts(conn))
        state = self.vector_state()
        health_row = self._vectors.configured_row() or (
            vector_store.signature_row(conn, state.signature_id) if state.signature_id else None
        )
        covered = (
            self._memo(
                f"coverage:{health_row.id}", lambda: vector_store.coverage(conn, health_row.id)
            )
            if health_row
            else {}
        )
        summaries = rows.skipped_summaries(conn)
        shared = self.db.engine != "sqlite"  # machines share it: say whose each folder is
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
                {g.reason: g.count for g in skipped.groups(summaries.get(s.id))},
                s.host if shared and s.kind in LOCAL_KINDS else None,
            )
            for s in rows.list_sources(conn)
        )
        documents, chunks = rows.document_total(conn)
        pairs, examples = rows.near_duplicate_pairs(conn, NEAR_DUPLICATES_SHOWN)
        health = {
            "database": self._memo("database", self._database_health),
            "keyword_index": "current" if self.fts.is_current() else "pending migration",
            "stored_redaction": "current" if self.redaction.is_current() else "pending upgrade",
            "vectors": describe_vectors(state),
            "embed_pending": state.pending if self.settings.embedder != "none" else 0,
            "embed_failed_documents": self._memo(
                "failed_documents", lambda: vector_store.failed_documents(conn)
            ),
            "embed_error": (health_row.last_error if health_row else None)
            or self._vectors.last_error,
            "failed_files": sum(s.failed for s in sources),
            "near_duplicate_pairs": pairs,
            "entities_and_relations": links.describe(conn),  # the linking phase
        }
        vector_modes = readiness(state).usable
        modes = ("keyword", "vector", "hybrid", "grep") if vector_modes else ("keyword", "grep")
        return Overview(
            str(self.home),
            sources,
            documents,
            chunks,
            modes,
            health,
            tuple(NearDuplicate(*pair) for pair in examples),
            None if self.db.engine == "sqlite" else self.db.where,
        )

    def _database_health(self) -> str:
        """``ok``, ``damaged: …`` with the fix, or ``not checked`` when the file is too
        large to check here (``HEALTH_CHECK_BYTES``, ``HEALTH_CHECK_MS``). Issue 20 item 4:
        one overwritten page left ``list`` saying healthy while grep and doctor failed."""
        # A PostgreSQL server's check reads its counters, not the pages: no size bound.
        on_file = self.db.engine == "sqlite"
        too_large = on_file and self.db.path.stat().st_size > HEALTH_CHECK_BYTES
        problems = None if too_large else self.db.integrity_problems(within_ms=HEALTH_CHECK_MS)
        if problems is None:
            return "not checked (too large to check on every list); `kb-mcp doctor` checks it"
        if not problems:
            return "ok"
        return f"{DAMAGED}: {problems[0]}; run `kb-mcp reindex --rebuild`"

    def list_source(self, source: str, limit: int = 50, offset: int = 0) -> SourceListing:
        """One source's entries, one per path, newest first, a page at a time, and what
        its last sync could not index (the first ``FAILED_SHOWN`` failed files, with their
        reasons) or left out (``SkippedGroup`` per reason, with how to read one).

        ``total`` counts the same rows the pages hold, so paging to ``total`` covers every
        path exactly once (a document held at two paths is listed at both).
        """
        limits.LIST_LIMIT.check(limit)
        limits.OFFSET.check(offset)
        source_id = self._source_id(source)
        self._ready()
        conn = self.db.conn
        page = rows.list_documents(conn, source_id, limit, offset)
        total = rows.count_listed(conn, source_id)  # counts what is paged: paths
        entries = tuple(
            DocumentEntry(d.doc_key, d.title, d.uri or path, d.doc_date, d.updated_at, note)
            for d, path, note in page
        )
        failed = rows.failed_locations(conn, source_id)
        return SourceListing(
            source,
            entries,
            total,
            offset,
            tuple(FailedFile(source, path, reason) for path, reason in failed[:FAILED_SHOWN]),
            len(failed),
            skipped.groups(rows.skipped_summaries(conn).get(source_id)),
        )

    def source_names(self) -> tuple[str, ...]:
        """Every source's name (a search scope), without the counts ``overview`` adds."""
        return tuple(s.name for s in rows.list_sources(self.db.conn))


def describe_vectors(state: VectorState) -> str:
    """One line for ``list`` and ``doctor``: the model in use and its coverage, whether
    the rest is being built now and what builds it, or why there are no vectors."""
    if state.reason == NO_EMBEDDER:
        return f"off: {state.reason}"
    total = state.embedded + state.pending
    unbuilt = state.reason == building_reason(state.embedded, total)  # no other problem
    if state.signature is None or not (state.usable or unbuilt):
        return f"not usable: {state.reason}"
    model = state.signature.describe()
    if not state.pending:
        return f"{model}: all {total:,} passages have vectors"
    how = "being built now" if state.building else f"waiting: {BUILD_HINT}"
    line = f"{model}: vectors for {state.embedded:,} of {total:,} passages "
    line += f"({percent(state.embedded, total)} %), {how}"
    if not readiness(state).usable:
        line += f"; vector and hybrid search from {round(USABLE_COVERAGE * 100)} %"
    return line
