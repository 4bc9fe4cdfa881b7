"""Folder sync: walk → decide per file → read → convert → chunk → the one ingestion path.

Change detection is cheap first: a file whose size and mtime match the last sync is not
opened. Otherwise its bytes are hashed, and an unchanged hash refreshes the recorded
state only. A file's record is found by the keyed hash of its path (``store/paths``: the
stored path is redacted, so it cannot be the key). Files are committed in small batches,
so an interrupted sync keeps what it did and the next one resumes where it stopped.
Reading a file is a boundary: whatever a
reader raises for one file (a ``KbError`` or any other exception, in this process or in a
worker), that file is recorded as failed with its reason (shown by ``list``) and the
reader environment it failed in, and the rest of the folder syncs. A failed file is read
again when it changes, when a sync runs in another reader environment (a reader
installed, upgraded or chosen: ``readers.environment``), and by every sync when it could
not be opened (``due_for_retry``). Files
that vanished lose their chunks from every index; files beyond the per-source cap or in
folders that could not be listed are still present and are left alone.

Work is split for speed and bounded memory (issue 10): one file is read, converted,
chunked and its index rows derived without the database (``ingest/filework``), in
reader processes ahead of the one writer (``ingest/readahead``: what they hold in
flight is capped by files and bytes; a large file is read in the writer, one at a
time; a PDF is converted in a process of its own under a time and memory bound). This
module is the writer's side: batches, their transactions, and the sync's bookkeeping.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from kb_mcp.chunk.markdown import DEFAULT_BUDGET_CHARS
from kb_mcp.ingest import filework, readers, skipped
from kb_mcp.ingest.fetch.mirror import CrawlOutcome
from kb_mcp.ingest.filework import FileWork, failure_reason, gc_paused, is_bounded, utc_now
from kb_mcp.ingest.pipeline import PendingRows, remove_location, store_document
from kb_mcp.ingest.readahead import indexed_hash, read_ahead, reader_pool, stat_unchanged
from kb_mcp.ingest.sources import FolderSource
from kb_mcp.ingest.walk import SKIPPED_EXAMPLES, FoundFile, WalkResult, walk_folder
from kb_mcp.relations import relink
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

Progress = Callable[[int, int, str], None]
# A batch is read, then committed, after this many files, seconds of reading or bytes of
# files, whichever comes first: an interrupted sync redoes at most one batch. Its write
# transaction holds only the writing (issue 11: a transaction held while files were read
# kept other writers waiting up to 1.3 s per batch in the long concurrency run).
BATCH_FILES = 500
BATCH_SECONDS = 1.0
BATCH_BYTES = 8 * 1024 * 1024


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
    skipped_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    crawl: CrawlOutcome | None = None  # a web source's crawl, when the sync fetched


@dataclass(frozen=True, slots=True)
class Estimate:
    source: str
    files: int
    bytes: int
    chunks: int
    over_cap: int
    skipped: dict[str, int]


def _record_failure(
    db: Database,
    source_id: int,
    found: FoundFile,
    reason: str,
    now: str,
    pending: PendingRows | None = None,
    failed_under: str | None = None,
) -> None:
    """Keep the failure visible, with the reader environment it failed in (None: retry
    it on every sync); any document the file held before is unlinked."""
    if pending is not None:
        pending.flush(db.conn)  # a removal reads the mentions it takes back
    path = db.paths.of(found.rel)
    remove_location(db, source_id, path.key)
    with db.write() as conn:
        rows.upsert_location(
            conn,
            source_id,
            path,
            None,
            state="failed",
            reason=reason,
            size=found.size,
            mtime_ns=found.mtime_ns,
            seen_at=now,
            failed_under=failed_under,
        )


def apply_file(
    db: Database,
    source_id: int,
    work: FileWork,
    previous: rows.LocationState | None,
    pending: PendingRows | None = None,
    *,
    environment: str,
) -> str:
    """Write what ``filework.read_file`` found; returns added / updated / unchanged / failed.

    ``pending``: the batch's FTS rows, written when the caller flushes it (inside the
    same transaction, before it commits). ``environment``: the sync's
    ``readers.environment``, kept with a failure."""
    found = work.found
    if work.failure is not None:
        under = None if work.transient else environment
        _record_failure(db, source_id, found, work.failure, work.now, pending, under)
        return "failed"
    state = {
        "size": found.size,
        "mtime_ns": found.mtime_ns,
        "file_hash": work.file_hash,
        "seen_at": work.now,
        "state": "indexed",
        "reason": work.note,
    }
    path = db.paths.of(found.rel)
    if work.doc is None:  # same bytes under a new mtime: refresh the recorded state only
        state["reason"] = previous.reason  # not converted again, so the old note holds
        with db.write() as conn:
            rows.upsert_location(conn, source_id, path, previous.document_id, **state)
        return "unchanged"
    if isinstance(work.chunks, (list, tuple)):
        stored = store_document(
            db, source_id, path, work.doc, work.chunks, work.derived, pending, **state
        )
    else:  # chunks made as they are stored: a failure there is still this file's alone
        if pending is not None:
            pending.flush(db.conn)  # not inside the savepoint, which may roll back
        try:
            with db.write(), db.savepoint():
                stored = store_document(
                    db, source_id, path, work.doc, work.chunks, work.derived, **state
                )
        except Exception as exc:
            reason = failure_reason(exc)
            _record_failure(db, source_id, found, reason, work.now, pending, environment)
            return "failed"
    if previous is None or previous.document_id is None:
        return "added"
    return "unchanged" if stored.outcome == "unchanged" else "updated"


def sync_file(
    db: Database,
    source_id: int,
    root: Path,
    found: FoundFile,
    previous: rows.LocationState | None,
    pdf_mode: str = "layout",
) -> str:
    """Bring one file's rows up to date; returns added / updated / unchanged / failed
    (``failed`` also for a file that failed before and has not changed since).

    ``root`` must be resolved already.
    """
    if stat_unchanged(found, previous):
        # A failed file stays failed here: a sync decides its retries (``due_for_retry``).
        return "failed" if previous.state == "failed" else "unchanged"
    read = (
        filework.read_bounded if is_bounded(found) else filework.read_file
    )  # a PDF: in a bounded process
    work = read(root, found, indexed_hash(previous), utc_now(), pdf_mode)
    return apply_file(db, source_id, work, previous, environment=readers.environment(pdf_mode))


def due_for_retry(previous: rows.LocationState, environment: str) -> bool:
    """Whether a failed file is read again though it did not change: it failed in another
    reader environment (the cause may have gone with it), or for a cause outside the
    readers (``failed_under`` NULL: it could not be opened, or failed before the column)."""
    return previous.state == "failed" and previous.failed_under != environment


def _with_retries(
    known: dict[str, rows.LocationState], environment: str
) -> dict[str, rows.LocationState]:
    """``known`` with each failed file ``due_for_retry`` recorded without its size and
    mtime, so every later step (the unchanged count, the read-ahead) reads it as a file
    that changed."""
    return {
        rel: dataclasses.replace(p, size=None, mtime_ns=None)
        if due_for_retry(p, environment)
        else p
        for rel, p in known.items()
    }


def _by_raw_path(
    recorded: dict[str, rows.LocationState], keys: dict[str, str]
) -> dict[str, rows.LocationState]:
    """The recorded state of each walked file (``keys``: raw path → its key), by its raw
    path (``FoundFile.rel``): the rest of the sync and its readers look files up by path."""
    return {rel: recorded[key] for rel, key in keys.items() if key in recorded}


def _vanished(
    db: Database,
    recorded: dict[str, rows.LocationState],
    found: set[str],
    beyond_cap: tuple[str, ...],
    unreadable_dirs: tuple[str, ...],
) -> list[str]:
    """Keys of recorded files that are really gone (``found``: the walked files' keys;
    not capped out, not in an unlistable folder). A path stored redacted cannot be placed
    in a folder: while some folder could not be listed, such a file is kept, as one
    inside it would be."""
    present = found | {db.paths.key(rel) for rel in beyond_cap}
    gone = []
    for key, state in recorded.items():
        if key in present:
            continue
        if unreadable_dirs:
            path = db.paths.raw_if_shown(state.path, key)
            if path is None or any(path.startswith(d.rstrip("/") + "/") for d in unreadable_dirs):
                continue
        gone.append(key)
    return gone


def _apply(
    db: Database,
    source_id: int,
    found: FoundFile,
    work: FileWork | None,
    previous: rows.LocationState | None,
    pending: PendingRows,
    environment: str,
) -> str:
    if work is None:  # size and mtime as recorded, and not due for a retry
        return "failed" if previous and previous.state == "failed" else "unchanged"
    return apply_file(db, source_id, work, previous, pending, environment=environment)


def _count_unchanged(
    files: tuple[FoundFile, ...],
    known: dict[str, rows.LocationState],
    report: SyncReport,
    progress: Progress | None,
) -> list[FoundFile]:
    """Count the files whose size and mtime are as recorded; return the others, in order.

    A counted file is not opened, written or batched: a no-change re-sync of 10k files
    spent a third of its time passing each through the write loop one by one.
    """
    stale = []
    for found in files:
        previous = known.get(found.rel)
        if not stat_unchanged(found, previous):
            stale.append(found)
            continue
        # A failed file not due for a retry (``_with_retries``) stays failed.
        if previous.state == "failed":
            report.failed += 1
        else:
            report.unchanged += 1
        if progress:
            progress(report.failed + report.unchanged, len(files), found.rel)
    return stale


def _next_batch(
    items: Iterator[tuple[FoundFile, FileWork | None]],
    should_stop: Callable[[], bool] | None,
) -> tuple[list[tuple[FoundFile, FileWork | None]], bool]:
    """The next files to commit together, read before any write begins; and whether a
    stop was asked for (checked before each file, while no write transaction is open).

    A batch ends after ``BATCH_FILES`` files, ``BATCH_SECONDS`` of reading or
    ``BATCH_BYTES`` of file sizes, and right after a file over ``filework.LARGE_FILE_BYTES`` (so
    such a file is in memory alone, as in ``read_ahead``): an interrupted sync redoes at
    most one batch, and memory stays bounded.
    """
    batch: list[tuple[FoundFile, FileWork | None]] = []
    size = 0
    batch_end = time.monotonic() + BATCH_SECONDS
    while len(batch) < BATCH_FILES and size < BATCH_BYTES and time.monotonic() < batch_end:
        if should_stop and should_stop():
            return batch, True
        item = next(items, None)
        if item is None:
            break
        batch.append(item)
        if item[1] is not None:
            size += item[0].size
            if item[0].size > filework.LARGE_FILE_BYTES:
                break
    return batch, False


def _page_cache(
    db: Database, batch: list[tuple[FoundFile, FileWork | None]]
) -> AbstractContextManager[None]:
    """The larger page cache (``Database.bulk_cache``) for a batch of small files;
    SQLite's default for a batch holding a large file (written alone, ``_next_batch``):
    its pages would fill the cache, ``BULK_CACHE_KIB`` more resident memory on top of
    the file's text, which issue 10 bounds at 250 MB."""
    large = any(f.size > filework.LARGE_FILE_BYTES for f, work in batch if work is not None)
    return nullcontext() if large else db.bulk_cache()


def sync_folder(
    db: Database,
    source: FolderSource,
    source_id: int,
    *,
    max_files: int,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    pdf_mode: str = "layout",
    uri_of: Mapping[str, str] | None = None,
) -> SyncReport:
    """Sync one folder source; safe to interrupt at any point and run again.

    ``pdf_mode``: the ``pdf_mode`` setting (``layout`` or ``text``). ``uri_of``: the URI
    each file stands for (a web source's mirror: file name → page URL), which its document
    is cited by instead of the file's path."""
    started = time.monotonic()
    report = SyncReport(source.name)
    root = Path(source.root)
    with gc_paused():
        walk = walk_source(source, max_files=max_files)
        report.over_cap, report.skipped = walk.over_cap, dict(walk.skipped)
        report.skipped_paths = dict(walk.skipped_paths)
        with db.write() as conn:
            rows.set_skipped(conn, source_id, skipped.summary(walk))
        environment = readers.environment(pdf_mode)
        recorded = _with_retries(rows.source_locations(db.conn, source_id), environment)
        keys = {f.rel: db.paths.key(f.rel) for f in walk.files}
        known = _by_raw_path(recorded, keys)
        stale = _count_unchanged(walk.files, known, report, progress)
    root = root.resolve()
    done = len(walk.files) - len(stale)
    stopped = False
    if stale:
        relink.prepare(db)  # the names of the library read before the first batch
    # PDFs after every other file is committed (issue 22): the text of a folder is
    # keyword-searchable before the first conversion starts, and the conversions (about
    # 0.65 s of CPU a page) do not take the cores from the text readers meanwhile.
    groups = (
        tuple(f for f in stale if not is_bounded(f)),
        tuple(f for f in stale if is_bounded(f)),
    )
    with reader_pool(len(stale)) as pool, gc_paused():
        for group in groups:
            items = read_ahead(root, group, known, pool, pdf_mode)
            while group and not stopped:
                batch, stopped = _next_batch(items, should_stop)
                if not batch:
                    break
                # Only writing happens inside the transaction: the batch was read (in this
                # process, the reader pool or a bounded PDF process) before it began, so other
                # writers never wait on a reader, only on the rows themselves (issue 11).
                with _page_cache(db, batch), db.write() as conn:
                    pending = PendingRows()
                    for found, work in batch:
                        if uri_of is not None and work is not None and work.doc is not None:
                            uri = uri_of.get(found.rel)
                            work = dataclasses.replace(
                                work, doc=dataclasses.replace(work.doc, uri=uri)
                            )
                        previous = known.get(found.rel)
                        outcome = _apply(db, source_id, found, work, previous, pending, environment)
                        setattr(report, outcome, getattr(report, outcome) + 1)
                        done += 1
                        if progress:
                            progress(done, len(walk.files), found.rel)
                    pending.flush(conn)  # not on an exception: the batch rolls back whole
                del batch, pending
                # The collector is paused while batches are read and written (the workers'
                # results are unpickled here, ~300k small tuples for 1,168 files, and each
                # automatic collection scanned all the batch held): what a batch left
                # behind is collected once, when it is done. Young generations only: nothing
                # was promoted while the collector was paused.
                gc.collect(1)
    # A stop asked for before the end (the loop may have had no file to check it at)
    # leaves vanished files alone: the walk may not be the whole truth of a stopped sync.
    stopped = stopped or bool(should_stop and should_stop())
    if not stopped:
        found_keys = set(keys.values())
        vanished = _vanished(db, recorded, found_keys, walk.beyond_cap, walk.unreadable_dirs)
        if vanished:
            relink.prepare(db)
        for key in vanished:
            remove_location(db, source_id, key)
            report.removed += 1
    report.failures = rows.failed_locations(db.conn, source_id)
    report.seconds = time.monotonic() - started
    return report


def walk_source(
    source: FolderSource, *, max_files: int, examples: int | None = SKIPPED_EXAMPLES
) -> WalkResult:
    """The walk a sync of ``source`` makes: its ignore patterns and ``.gitignore`` choice,
    and every file whose format or content is text (``readers.is_readable``).
    ``examples``: skipped paths named per reason (None: all)."""
    return walk_folder(
        Path(source.root),
        accept=readers.is_readable,
        known_format=readers.is_supported,
        ignore_globs=source.ignore,
        max_files=max_files,
        gitignore=source.gitignore,
        examples=examples,
    )


def estimate_folder(source: FolderSource, *, max_files: int) -> Estimate:
    """What a sync of ``source`` would read, with the same filters the sync applies."""
    walk = walk_source(source, max_files=max_files)
    chunks = sum(max(1, -(-f.size // DEFAULT_BUDGET_CHARS)) for f in walk.files)
    return Estimate(
        source.name, len(walk.files), walk.total_bytes, chunks, walk.over_cap, dict(walk.skipped)
    )
