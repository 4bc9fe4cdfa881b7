"""Folder sync: walk → decide per file → read → convert → chunk → the one ingestion path.

Change detection is cheap first: a file whose size and mtime match the last sync is not
opened. Otherwise its bytes are hashed, and an unchanged hash refreshes the recorded
state only. Files are committed in small batches, so an interrupted sync keeps what it
did and the next one resumes where it stopped. A file that fails to read is recorded as
failed with its reason (shown by ``list``) and is not retried until it changes. Files
that vanished lose their chunks from every index; files beyond the per-source cap or in
folders that could not be listed are still present and are left alone.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.code import split_code
from kb_mcp.chunk.markdown import DEFAULT_BUDGET_CHARS, split_markdown
from kb_mcp.errors import KbError
from kb_mcp.ingest import readers
from kb_mcp.ingest.frontmatter import meta_date, meta_list, split_frontmatter
from kb_mcp.ingest.pipeline import remove_location, store_document, text_hash
from kb_mcp.ingest.policy import check_readable
from kb_mcp.ingest.sources import FolderSource
from kb_mcp.ingest.status import classify_status
from kb_mcp.ingest.walk import FoundFile, walk_folder
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

Progress = Callable[[int, int, str], None]
# A batch commits after this many files or seconds, whichever comes first: an interrupted
# sync redoes at most one batch, and other writers wait at most about a second.
BATCH_FILES = 500
BATCH_SECONDS = 1.0


@dataclass(slots=True)
class SyncReport:
    source: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    over_cap: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Estimate:
    source: str
    files: int
    bytes: int
    chunks: int
    over_cap: int
    skipped: dict[str, int]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _mtime_date(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).date().isoformat()


def prepare_file(
    rel: str, converted: readers.Converted, mtime_ns: int, now: str
) -> tuple[rows.NewDocument, list[Chunk]]:
    """A converted file → the document row and chunks the ingestion path stores.

    Title: frontmatter ``title``, else the reader's, else the file name. Date:
    frontmatter ``date`` / ``updated``, else the file's mtime. Identity: the text hash,
    so identical text in two sources is one document.
    """
    text = converted.markdown
    meta = split_frontmatter(text).meta if converted.kind == "markdown" else {}
    title = str(meta.get("title") or converted.title or PurePosixPath(rel).name).strip()
    if converted.kind == "code":
        chunks = split_code(text, converted.language)
    else:
        chunks = split_markdown(text)
    digest = text_hash(text)
    doc = rows.NewDocument(
        doc_key="f-" + digest[:16],
        title=title,
        uri=None,
        kind=converted.kind,
        language=converted.language,
        text=text,
        content_hash=digest,
        doc_date=meta_date(meta, "date", "updated") or _mtime_date(mtime_ns),
        tags=meta_list(meta, "tags"),
        created_at=now,
        updated_at=now,
        supersedes=meta_list(meta, "supersedes"),
        status=classify_status(title, meta),
    )
    return doc, chunks


def _record_failure(db: Database, source_id: int, found: FoundFile, reason: str, now: str) -> None:
    """Keep the failure visible; any document the file held before is unlinked."""
    remove_location(db, source_id, found.rel)
    with db.write() as conn:
        rows.upsert_location(
            conn,
            source_id,
            found.rel,
            None,
            state="failed",
            reason=reason,
            size=found.size,
            mtime_ns=found.mtime_ns,
            seen_at=now,
        )


def sync_file(
    db: Database,
    source_id: int,
    root: Path,
    found: FoundFile,
    previous: rows.LocationState | None,
) -> str:
    """Bring one file's rows up to date; returns added / updated / unchanged / failed
    (``failed`` also for a file that failed before and has not changed since).

    ``root`` must be resolved already.
    """
    if previous and (previous.size, previous.mtime_ns) == (found.size, found.mtime_ns):
        # A file that failed stays failed (and is not retried) until it changes.
        return "failed" if previous.state == "failed" else "unchanged"
    now = utc_now()
    try:
        real = check_readable(found.path, root, root_is_resolved=True)
        data = readers.read_capped(real, readers.MAX_BYTES)
    except KbError as exc:
        _record_failure(db, source_id, found, exc.message, now)
        return "failed"
    file_hash = hashlib.sha256(data).hexdigest()
    state = {
        "size": found.size,
        "mtime_ns": found.mtime_ns,
        "file_hash": file_hash,
        "seen_at": now,
        "state": "indexed",
        "reason": None,
    }
    if previous and previous.file_hash == file_hash and previous.state == "indexed":
        with db.write() as conn:
            rows.upsert_location(conn, source_id, found.rel, previous.document_id, **state)
        return "unchanged"
    try:
        converted = readers.convert_bytes(data, readers.format_key(found.path))
    except KbError as exc:
        _record_failure(db, source_id, found, exc.message, now)
        return "failed"
    doc, chunks = prepare_file(found.rel, converted, found.mtime_ns, now)
    stored = store_document(db, source_id, found.rel, doc, chunks, **state)
    return (
        "added"
        if previous is None or previous.document_id is None
        else ("unchanged" if stored.outcome == "unchanged" else "updated")
    )


def _vanished(
    known: dict[str, rows.LocationState],
    found: set[str],
    beyond_cap: set[str],
    unreadable_dirs: tuple[str, ...],
) -> list[str]:
    """Recorded paths that are really gone (not capped out, not in an unlistable folder)."""
    gone = []
    for path in known:
        if path in found or path in beyond_cap:
            continue
        if any(path.startswith(d.rstrip("/") + "/") for d in unreadable_dirs):
            continue
        gone.append(path)
    return gone


def sync_folder(
    db: Database,
    source: FolderSource,
    source_id: int,
    *,
    max_files: int,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SyncReport:
    """Sync one folder source; safe to interrupt at any point and run again."""
    started = time.monotonic()
    report = SyncReport(source.name)
    root = Path(source.root)
    walk = walk_folder(
        root, accept=readers.is_supported, ignore_globs=source.ignore, max_files=max_files
    )
    report.over_cap, report.skipped = walk.over_cap, dict(walk.skipped)
    known = rows.source_locations(db.conn, source_id)
    root = root.resolve()
    done = 0
    stopped = False
    while done < len(walk.files) and not stopped:
        # Files are committed in small batches: one transaction per file would spend most
        # of the time committing, one per sync would hold the write lock for minutes.
        batch_end = time.monotonic() + BATCH_SECONDS
        with db.write():
            for found in walk.files[done : done + BATCH_FILES]:
                if should_stop and should_stop():
                    stopped = True
                    break
                outcome = sync_file(db, source_id, root, found, known.get(found.rel))
                setattr(report, outcome, getattr(report, outcome) + 1)
                done += 1
                if progress:
                    progress(done, len(walk.files), found.rel)
                if time.monotonic() > batch_end:
                    break
    if not stopped:
        found_paths = {f.rel for f in walk.files}
        for path in _vanished(known, found_paths, set(walk.beyond_cap), walk.unreadable_dirs):
            remove_location(db, source_id, path)
            report.removed += 1
    report.failures = rows.failed_locations(db.conn, source_id)
    report.seconds = time.monotonic() - started
    return report


def estimate_folder(source: FolderSource, *, max_files: int) -> Estimate:
    """What a sync of ``source`` would read, with the same filters the sync applies."""
    walk = walk_folder(
        Path(source.root),
        accept=readers.is_supported,
        ignore_globs=source.ignore,
        max_files=max_files,
    )
    chunks = sum(max(1, -(-f.size // DEFAULT_BUDGET_CHARS)) for f in walk.files)
    return Estimate(
        source.name, len(walk.files), walk.total_bytes, chunks, walk.over_cap, dict(walk.skipped)
    )
