"""The linking phase: a stored document's entities, relations and near-duplicates, recorded
after it is keyword-searchable (issue 22 item 2).

Trigger: every file, upload and agent document took one path, and that path extracted the
entities of each chunk, detected the relations the document states, matched them to
other documents by name and looked for near-copies before the document was searchable.
On a real 10,000-file folder that was about 30 % of the readers' CPU (entities and
relations) and 40 % of the writer's (graph rows), all of it between a file and its first
keyword hit.

Outcome: the keyword phase (``ingest/pipeline.store_document``) stores the document, its
chunks, their FTS rows and its location, and puts the document in ``link_queue``, in one
transaction. This phase comes after it and works from what is stored, the document row
and its chunk rows:

- computing, a function of one document read in one snapshot (``compute``): each
  chunk's entities (``graph/extract.extract``, as the graph's rebuild and removal do),
  the relations it states (``relations/detect.detect_relations``) and the scores of its
  same-titled near-copies (``ingest/dedup``). It runs in worker processes
  (``readahead.reader_pool``: every core) that read the rows themselves, so the writer
  neither reads texts for them nor pickles texts to them (on PostgreSQL, in this
  process), and never inside a write transaction: writers in every process wait for one;
- writing, in the one writer: the graph rows (``index/graph.PendingMentions``), the
  near-duplicate pairs (each while its other document is still stored: one may have been
  removed or rewritten since the snapshot), the relation rows with their matching
  (``relations/relink.record_relations``, which reads the names the library holds then),
  and the queue entry's deletion, in one transaction per group of documents.

So a ``kill -9`` anywhere loses nothing and doubles nothing: a document is either queued
with none of these rows, or recorded and unqueued. A queue entry names one version of its
document (its id is never reused): a result computed for an entry that is gone (the
document was removed or rewritten meanwhile, or another process linked it first) is
dropped, and the entry's current version is linked by a later round. The result does not
depend on the order documents are linked in (the graph's counts add, matching is
order-free, a near-duplicate pair is found from either side), so the library ends as the
one path left it. Removal stays in the keyword phase: a removed document's rows go with
it at once, whether it was linked or not.

Who runs it: ``kb-mcp add`` / ``sync`` / ``add-text`` after the keyword phase, saying so;
``library.folders.sync`` and ``add_document`` by default; ``kb-mcp serve`` in a background thread
(``server/background.BackgroundLinker``), so an agent's ``add_document`` returns before it.
Search never waits for it: a document not linked yet has no entities and no relations,
which search reads as absent. The rules' versions keep their own re-runs, which leave
queued documents to this phase (``index/graph.rebuild``, ``relations/relink``).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass

import apsw

from kb_mcp.graph.extract import Extraction, extract
from kb_mcp.index import graph
from kb_mcp.ingest import dedup
from kb_mcp.ingest.readahead import reader_pool
from kb_mcp.relations import relink
from kb_mcp.relations.detect import Detected, detect_relations
from kb_mcp.store import documents as rows
from kb_mcp.store import link_queue as queue
from kb_mcp.store import relations as stored_relations
from kb_mcp.store.db import Database, read_snapshot

Progress = Callable[[int, int, str], None]
# Documents computed together (one task for a worker) and written in one transaction.
GROUP_DOCUMENTS = 64
# The same on a PostgreSQL library, smaller: its writers in every process wait for one
# such transaction (the change stamp's lock, store/postgres/database.py), and each of its
# statements is a round trip, about 5 per document: linking 200 queued notes on the
# loaded 2-core machine, pg_stat_activity showed a transaction of 64 open 0.33 s at
# most, one of 8 about 40 ms.
SHARED_GROUP_DOCUMENTS = 8
# A document with more chunks is linked in the writer, this many chunks at a time, so its
# entities never all exist at once (a 50 MB log's held 80 MB, issue 10).
LARGE_CHUNKS = 1_000
# Relations are detected in a document's opening (its title, frontmatter and first
# ``detect.HEADING_LINES`` lines): the text is read this far, which holds the whole text
# of any file read whole (``filework.LARGE_FILE_BYTES``).
OPENING_CHARS = 4 * 1024 * 1024
_IN_FLIGHT_PER_WORKER = 2  # groups computed ahead of the writer, per worker
# The library lock of the linking phase: one process links a library at a time
# (``library.links``, library/linking.py), beside the embedding and LLM-pass locks.
LOCK_NAME = "links"


@dataclass(frozen=True, slots=True)
class Linked:
    """What one queued document links to, computed from its stored rows."""

    entry: int  # its ``link_queue`` id: written only while that entry is still there
    document_id: int
    chunk_ids: tuple[int, ...]
    extractions: tuple[Extraction, ...]  # per chunk, in chunk order
    relations: tuple[Detected, ...]
    near: tuple[tuple[int, float], ...]  # its same-titled near-copies and their scores


@dataclass(frozen=True, slots=True)
class LinkReport:
    """One run: documents linked in it, still queued at its end, its seconds."""

    linked: int
    pending: int
    seconds: float


def describe(conn: apsw.Connection) -> str:
    """Where the phase stands, as ``list``, ``doctor`` and the web view say it:
    ``current`` or ``1,204 of 9,834 documents pending``."""
    pending = queue.pending_count(conn)
    if not pending:
        return "current"
    return f"{pending:,} of {rows.document_count(conn):,} documents pending"


# --- computing: pure functions of a stored document --------------------------------------


def _detected(conn: apsw.Connection, document_id: int, fields: tuple) -> tuple[Detected, ...]:
    title, text, kind, doc_date = fields
    supersedes = stored_relations.supersedes_of(conn, document_id)
    return tuple(detect_relations(title, text, kind, doc_date, supersedes))


def _near(conn: apsw.Connection, document_id: int, fields: tuple) -> tuple[tuple[int, float], ...]:
    title, text = fields[0], fields[1]
    return dedup.near_duplicates(conn, document_id, title, text[: dedup.COMPARED_CHARS])


def compute(conn: apsw.Connection, entries: Sequence[tuple[int, int]]) -> list[Linked]:
    """What each ``(entry, document_id)`` links to, read from ``conn`` in one snapshot;
    an entry this snapshot does not hold (gone, or not committed yet) is left out, so
    what is read is always the version the entry names. No writes."""
    found = []
    with read_snapshot(conn):
        live = queue.live_entries(conn, [entry for entry, _doc in entries])
        for entry, document_id in entries:
            fields = (
                rows.document_opening(conn, document_id, OPENING_CHARS) if entry in live else None
            )
            if fields is None:
                continue
            code = fields[2] == "code"
            chunks = rows.chunks_in_order(conn, document_id)
            found.append(
                Linked(
                    entry,
                    document_id,
                    tuple(c[0] for c in chunks),
                    tuple(extract(text, path, code=code) for _c, _o, path, text in chunks),
                    _detected(conn, document_id, fields),
                    _near(conn, document_id, fields),
                )
            )
    return found


_WORKER_CONNECTIONS: dict[str, apsw.Connection] = {}


def compute_in_worker(path: str, entries: Sequence[tuple[int, int]]) -> list[Linked]:
    """``compute`` in a reader worker process, over its own read-only connection."""
    conn = _WORKER_CONNECTIONS.get(path)
    if conn is None:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        conn.set_busy_timeout(30_000)
        _WORKER_CONNECTIONS[path] = conn
    return compute(conn, entries)


# --- writing -----------------------------------------------------------------------------


def _record(conn: apsw.Connection, linked: Linked) -> None:
    """A document's near-duplicates and relations, and its entry gone (its graph rows are
    written by the caller)."""
    dedup.record_near_duplicates(conn, linked.document_id, linked.near)
    relink.record_relations(conn, linked.document_id, list(linked.relations))
    queue.done(conn, linked.entry)


def write(db: Database, group: Sequence[Linked]) -> int:
    """Record ``group`` in one transaction, each document only while its queue entry is
    still there; how many were recorded."""
    with db.write() as conn:
        live = queue.live_entries(conn, [item.entry for item in group])
        todo = [item for item in group if item.entry in live]
        mentions = graph.PendingMentions()
        for item in todo:
            mentions.add(conn, zip(item.chunk_ids, item.extractions, strict=True))
        mentions.flush(conn)
        for item in todo:
            _record(conn, item)
        return len(todo)


def _link_large(db: Database, entry: int, document_id: int) -> int:
    """Link a document of many chunks in this process, ``LARGE_CHUNKS`` at a time, in one
    transaction; 1 when it was recorded."""
    with db.write() as conn:
        if not queue.live_entries(conn, [entry]):
            return 0
        fields = rows.document_opening(conn, document_id, OPENING_CHARS)
        code = fields[2] == "code"
        ids: list[int] = []
        ordinal = -1
        while part := rows.chunks_in_order(conn, document_id, ordinal, LARGE_CHUNKS):
            graph.add_extracted(
                conn, [(cid, extract(text, path, code=code)) for cid, _o, path, text in part]
            )
            ids += [c[0] for c in part]
            ordinal = part[-1][1]
        detected = _detected(conn, document_id, fields)
        near = _near(conn, document_id, fields)
        _record(conn, Linked(entry, document_id, tuple(ids), (), detected, near))
        return 1


def _groups(
    db: Database, should_stop: Callable[[], bool] | None
) -> Iterator[list[tuple[int, int]] | tuple[int, int]]:
    """The queue in entry order: groups of small documents to compute anywhere, and each
    large one alone (a tuple). Entries queued during the run are reached too."""
    size = GROUP_DOCUMENTS if db.engine == "sqlite" else SHARED_GROUP_DOCUMENTS
    after = 0
    while not (should_stop and should_stop()):
        page = queue.entries_after(db.conn, after, 4 * GROUP_DOCUMENTS)
        if not page:
            return
        after = page[-1][0]
        small = [(entry, doc) for entry, doc, chunks in page if chunks <= LARGE_CHUNKS]
        for start in range(0, len(small), size):
            yield small[start : start + size]
        yield from ((entry, doc) for entry, doc, chunks in page if chunks > LARGE_CHUNKS)


def _computed(
    db: Database,
    groups: Iterator[list[tuple[int, int]] | tuple[int, int]],
    pool: ProcessPoolExecutor | None,
) -> Iterator[list[Linked] | tuple[int, int]]:
    """Each group computed (in the pool, ahead of the writer, when there is one)."""
    if pool is None:
        for group in groups:
            yield group if isinstance(group, tuple) else compute(db.conn, group)
        return
    ahead: deque[Future[list[Linked]] | tuple[int, int]] = deque()
    limit = _IN_FLIGHT_PER_WORKER * (os.cpu_count() or 1)
    path = str(db.path)
    for group in groups:
        if not isinstance(group, tuple):
            group = pool.submit(compute_in_worker, path, group)
        ahead.append(group)
        while len(ahead) > limit:
            yield _result(ahead.popleft())
    while ahead:
        yield _result(ahead.popleft())


def _result(item: Future[list[Linked]] | tuple[int, int]) -> list[Linked] | tuple[int, int]:
    return item if isinstance(item, tuple) else item.result()


def link_pending(
    db: Database,
    *,
    should_stop: Callable[[], bool] | None = None,
    progress: Progress | None = None,
) -> LinkReport:
    """Link every queued document (see the module docstring); stops between groups when
    ``should_stop()`` says so. Safe to run in several processes at once: each document is
    recorded once, by whichever writes it first."""
    started = time.monotonic()
    total = queue.pending_count(db.conn)
    linked = 0
    if total:
        relink.prepare(db)  # the names of the library read before the first transaction
        # Inside a caller's transaction (``reindex --rebuild``) the workers could not see
        # the rows it wrote: computed here then.
        # The workers read the SQLite file (``compute_in_worker``); on PostgreSQL this
        # process computes (what would let workers help: opening the store's URL there).
        alone = db.conn.in_transaction or db.engine != "sqlite"
        workers = nullcontext() if alone else reader_pool(total)
        with workers as pool:
            for item in _computed(db, _groups(db, should_stop), pool):
                linked += _link_large(db, *item) if isinstance(item, tuple) else write(db, item)
                if progress:
                    progress(linked, max(total, linked), "entities and relations")
                if should_stop and should_stop():
                    break
    return LinkReport(linked, queue.pending_count(db.conn), time.monotonic() - started)
