"""Stored text brought under today's redaction rules, lazily, once per rules version.

Trigger: the rules improve (``redact/version.RULES_VERSION`` goes up) while a library
still holds text redacted under the old ones: folder files are not re-read while their
mtime and hash are unchanged, agent documents and uploads are never re-read, and grep
matches against whatever is stored. Outcome, at the first use of such a library:

- every document's text, title, uri and tags are redacted again in place (``redact`` is
  idempotent and keeps every line where it was, so line numbers and cites stay exact); a
  document that changed is re-chunked and re-indexed under its old id and key;
- an agent document's or upload's Markdown file under ``docs/`` is rewritten (atomically,
  inside the same transaction as its rows) when its redacted form differs;
- every folder file's recorded size / mtime / hash is cleared, so the next sync re-reads
  it and redacts the *raw* text with the new rules (re-redacting a redacted text is the
  best the in-place step can do: an old marker may hide context a new rule needs); the
  same for its path (``store/paths``): the shown path and the failure reason are
  re-redacted in place now, and the sync stores the path redacted from the raw one;
- the FTS index is optimized, so a removed term leaves its segments, not only its
  vocabulary; ``secure_delete`` zeroes the pages the old text leaves free.

Like the FTS rebuild (``index/fts.py``) this runs on first use, never before the MCP
handshake, behind a lock so concurrent first users wait for one run. Unlike it, it
commits in batches of documents (a library's worth of text in one transaction would hold
the write lock for long): the last document done is recorded in ``meta`` with each batch,
so a run killed half-way is resumed by the next one, and the version is written only by
the batch that finds nothing left. Another process doing the same at the same time takes
turns with this one batch by batch (``BEGIN IMMEDIATE``), each batch starting where the
other's stopped, so no document is done twice at once and none is skipped.

Measured on a 17,300-chunk library (2,500 files, 300 agent documents, 2 cores shared):
see ``docs/architecture.md``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import apsw

from kb_mcp.errors import KbError
from kb_mcp.fsutil import atomic_write
from kb_mcp.index import keyword_store
from kb_mcp.ingest import agent
from kb_mcp.ingest.pipeline import redact_text, rewrite_in_place
from kb_mcp.redact.version import RULES_VERSION
from kb_mcp.store import documents as rows
from kb_mcp.store import meta
from kb_mcp.store.db import Database, secure_delete

VERSION_KEY = "redact_rules_version"
CURSOR_KEY = "redact_rules_cursor"  # id of the last document an unfinished run did
# A batch commits after this many documents or seconds, whichever comes first.
BATCH_DOCUMENTS = 500
BATCH_SECONDS = 1.0


def stored_version(conn: apsw.Connection) -> int | None:
    """The rules version the stored text was redacted under (None: from before versions)."""
    value = meta.get(conn, VERSION_KEY)
    return int(value) if value is not None and value.isdigit() else None


def is_due(conn: apsw.Connection) -> bool:
    """Whether stored text predates today's rules. A newer version (a database a later
    kb-mcp wrote) is left alone: these rules cannot redact more than that one's."""
    version = stored_version(conn)
    return version is None or version < RULES_VERSION


@dataclasses.dataclass(slots=True)
class RunReport:
    """What one run did (this process's share, when another process helped)."""

    documents: int = 0
    changed: int = 0
    files_rewritten: int = 0
    folder_files_to_reread: int = 0
    paths_changed: int = 0
    seconds: float = 0.0


def _redacted_fields(doc: rows.DocumentRow) -> tuple[str, str, str | None, tuple[str, ...]]:
    return (
        redact_text(doc.text),
        redact_text(doc.title),
        redact_text(doc.uri) if doc.uri is not None else None,
        tuple(redact_text(tag) for tag in doc.tags),
    )


def _rewrite_agent_file(path: Path) -> bool:
    """Re-redact one ``docs/`` file through the agent-file code; True if it was rewritten.

    A file that cannot be parsed is left alone (``reindex`` reports it); its rows are
    still re-redacted.
    """
    if not path.is_file():
        return False
    try:
        doc = agent.parse_agent_file(path)
    except KbError:
        return False
    clean = dataclasses.replace(
        doc,
        title=redact_text(doc.title),
        uri=redact_text(doc.uri),
        tags=tuple(redact_text(tag) for tag in doc.tags),
        content=redact_text(doc.content),
    )
    if clean == doc:
        return False
    atomic_write(path, agent.render_agent_file(clean).encode("utf-8"))
    return True


def _redo_document(
    conn: apsw.Connection, home: Path, doc: rows.DocumentRow, report: RunReport
) -> None:
    text, title, uri, tags = _redacted_fields(doc)
    if (text, title, uri, tags) != (doc.text, doc.title, doc.uri, doc.tags):
        rewrite_in_place(conn, doc, text=text, title=title, uri=uri, tags=tags)
        report.changed += 1
    for path in rows.agent_file_paths(conn, doc.id):
        # Inside the transaction: if the write fails, the rows roll back with it.
        report.files_rewritten += _rewrite_agent_file(home / agent.DOCS_DIR / path)


def _run_batch(
    db: Database, home: Path, report: RunReport, batch_documents: int = BATCH_DOCUMENTS
) -> bool:
    """One committed batch; True when the run is finished (the version is then written)."""
    with db.write() as conn:
        if not is_due(conn):  # another process finished it
            return True
        # PostgreSQL has no secure_delete: there ``db.compact()`` (VACUUM FULL) after
        # the run is what rewrites the tables' files without the removed text.
        zeroed = nullcontext() if keyword_store.on_postgres(conn) else secure_delete(conn)
        with zeroed:
            cursor = meta.get(conn, CURSOR_KEY)
            if cursor is None:  # the first batch of a run
                report.folder_files_to_reread = rows.forget_folder_file_state(conn)
                report.paths_changed = rows.relabel_locations(conn, redact_text)
            after = int(cursor or 0)
            ends_at = time.monotonic() + BATCH_SECONDS
            batch = rows.documents_after(conn, after, batch_documents)
            for doc in batch:
                _redo_document(conn, home, doc, report)
                report.documents += 1
                after = doc.id
                if time.monotonic() > ends_at:
                    break
            if batch:
                meta.put(conn, CURSOR_KEY, str(after))
                return False
            keyword_store.optimize(conn)
            meta.delete(conn, CURSOR_KEY)
            meta.put(conn, VERSION_KEY, str(RULES_VERSION))
            return True


def upgrade(db: Database, home: Path, batch_documents: int = BATCH_DOCUMENTS) -> RunReport:
    """Re-redact everything stored under older rules; safe to interrupt and run again."""
    started = time.monotonic()
    report = RunReport()
    while not _run_batch(db, home, report, batch_documents):
        pass
    if report.changed or report.paths_changed:  # a secret may linger in page slack: rewrite
        keyword_store.purge_removed(db)
        db.compact()
    report.seconds = time.monotonic() - started
    return report


class StoredRedaction:
    """Keeps one library's stored text under today's rules; users call ``ensure_current()``."""

    def __init__(self, db: Database, home: Path) -> None:
        self.db = db
        self.home = home
        self._lock = threading.Lock()
        self._current = False

    def ensure_current(self) -> RunReport | None:
        """Run the upgrade if it is due; its report, or None when nothing was due.

        Lock-guarded like ``FtsIndex.ensure_current``: concurrent first users wait for
        one run; after that it is one boolean check. Call after the FTS index is current
        (the upgrade re-indexes the chunks it rewrites).
        """
        if self._current:
            return None
        with self._lock:
            if self._current:
                return None
            report = upgrade(self.db, self.home) if is_due(self.db.conn) else None
            self._current = True
            return report

    def is_current(self) -> bool:
        return self._current or not is_due(self.db.conn)
