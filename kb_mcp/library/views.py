"""What a person's views need beyond the five tools: failed files with their reasons, the
audit log's tail, and a document with its frontmatter, relation links and entities.

Read-only, and shaped for the web view (``web/``): ``library.views``. The text here
comes from stored rows (already redacted on the way in); adapters redact it again on
the way out, as they redact every tool result.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from kb_mcp.cite import parse_cite
from kb_mcp.home import AUDIT_FILE
from kb_mcp.library.results import (
    AuditEntry,
    AuditLog,
    DocumentView,
    FailedFile,
    ReadResult,
    RelationLink,
    ToolCalls,
)
from kb_mcp.library.state import LibraryState
from kb_mcp.relations.change import Change, describe
from kb_mcp.search.query import parse_query
from kb_mcp.store import counts
from kb_mcp.store import documents as rows
from kb_mcp.store import relations as relation_rows
from kb_mcp.store.db import Database
from kb_mcp.text.frontmatter import split_frontmatter

AUDIT_TAIL_BYTES = 256 << 10  # the log's tail: ~2,500 calls of ~100 bytes
DOCUMENT_ENTITIES = 40
ENTITY_CHUNKS = 2_000  # chunks of one document looked at for its entities (SQL variables)


class Views:
    """A person's views of one library (``library.views``)."""

    def __init__(self, state: LibraryState, read: Callable[[str], ReadResult]) -> None:
        """``read``: a whole document by id, cite string, uri or path (``Lookup.read``)."""
        self.home = state.home
        self.db = state.db
        self.graph = state.graph
        self._memo = state.memo
        self._read = read

    def failed_files(self, limit: int = 200) -> tuple[FailedFile, ...]:
        """Folder files the last syncs could not index, with the reader's reason; kept
        until the database changes (``LibraryState.memo``)."""
        return self._memo(f"failed_files:{limit}", lambda: failed_files(self.db, limit))

    def audit_log(self, shown: int = 100, window: int = 2_000) -> AuditLog:
        """The newest ``shown`` tool calls of the audit log (tool, duration, outcome; newest
        first), and each tool's calls, errors, median and max time over the newest
        ``window`` (as far as the log's tail reaches)."""
        entries = audit_tail(self.home, window)
        by_tool: dict[str, list[AuditEntry]] = {}
        for entry in entries:
            by_tool.setdefault(entry.tool, []).append(entry)
        tools = tuple(
            ToolCalls(
                tool,
                len(calls),
                sum(c.outcome != "ok" for c in calls),
                round(statistics.median(c.duration_ms for c in calls), 1),
                max(c.duration_ms for c in calls),
            )
            for tool, calls in sorted(by_tool.items())
        )
        return AuditLog(entries[:shown], tools, len(entries))

    def document_view(self, doc: str) -> DocumentView:
        """A whole document (as ``read``) with its frontmatter, relation links and
        entities; a cite string (``doc#L12-L40``) names the document and the lines it
        cites."""
        citation = parse_cite(doc)
        read = self._read(citation.doc if citation else doc)
        cited = (citation.start_line, citation.end_line) if citation else None
        found = rows.get_document(self.db.conn, read.doc)
        split = split_frontmatter(read.text) if read.kind == "markdown" else None
        front = split.meta if split else {}
        links = _relation_links(self.db, found.id, read.doc) if found else ()
        entities: tuple[tuple[str, str, float], ...] = ()
        if found is not None:
            chunk_ids = rows.chunk_ids(self.db.conn, found.id)[:ENTITY_CHUNKS]
            entities = tuple(
                (e.name, e.kind, weight)
                for e, weight in self.graph.in_chunks(chunk_ids, DOCUMENT_ENTITIES)
            )
        shown = {str(k): _scalar(v) for k, v in front.items()}
        body_line = split.body_start_line if split and split.meta else 1
        return DocumentView(read, shown, links, entities, cited, body_line)

    def query_terms(self, query: str) -> tuple[str, ...]:
        """The words and CJK phrases the keyword leg searches for (what a view
        highlights)."""
        parsed = parse_query(query)
        return (*parsed.terms, *parsed.phrases)


def failed_files(db: Database, limit: int) -> tuple[FailedFile, ...]:
    """Failed folder files of every source, source by source, path order, at most ``limit``."""
    return tuple(FailedFile(*row) for row in counts.failed_files(db.conn, limit))


def audit_tail(home: Path, limit: int) -> tuple[AuditEntry, ...]:
    """The newest ``limit`` audit lines, newest first; a missing log is no calls yet.

    Only the log's last ``AUDIT_TAIL_BYTES`` are read, so a year of calls costs what a
    day does. Lines that do not parse (a torn last write) are skipped.
    """
    try:
        with open(home / AUDIT_FILE, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - AUDIT_TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return ()
    lines = data.decode("utf-8", "replace").splitlines()
    if len(data) == AUDIT_TAIL_BYTES:
        lines = lines[1:]  # the first line may be cut
    entries: list[AuditEntry] = []
    for line in reversed(lines):
        if len(entries) >= limit:
            break
        try:
            item = json.loads(line)
            entries.append(
                AuditEntry(
                    str(item["ts"]),
                    str(item["tool"]),
                    float(item["duration_ms"]),
                    str(item["outcome"]),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return tuple(entries)


def _scalar(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _relation_links(db: Database, document_id: int, doc_key: str) -> tuple[RelationLink, ...]:
    """As ``reader.document_relations`` words them, with the other document kept apart."""
    links = []
    for view in relation_rows.views_for(db.conn, [doc_key]):
        incoming = view.to_key == doc_key
        other = view.from_key if incoming else view.to_key
        change = Change(view.kind, incoming, other, other, view.effective)
        evidence = f"{view.stated_by_key}#L{view.start_line}-L{view.end_line}"
        found = rows.get_document(db.conn, other)
        links.append(
            RelationLink(describe(change), other, evidence, found.title if found else None)
        )
    for row in relation_rows.open_references(db.conn, document_id):
        text = f"{row.kind} {row.reference!r}: {row.state} (L{row.start_line})"
        links.append(RelationLink(text, None, None))
    return tuple(links)
