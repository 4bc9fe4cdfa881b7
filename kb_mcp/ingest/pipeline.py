"""The one ingestion path: a prepared document at a location → rows and indexes.

Agent documents, uploads and folder files all end here. In one write transaction a
location (source + path or uri) is pointed at a document, the document's chunks are
stored and indexed, and whatever the location held before is unlinked, and deleted with
its chunks from every index once no other location holds it.

This is the keyword phase: what makes a document searchable, greppable, readable and
redacted, and nothing else. Its entities, the relations it states and its near-copies are
recorded by the linking phase after it (``ingest/links.py``), which the transaction that
stores a document queues it for; a removal takes all of them back here, at once.

Identity is the ``doc_key``: an agent document's key comes from its uri (an edit
replaces), a file's from its text (identical text in two sources is stored once, with
two locations).

Secrets go out on the way in (issue 7 item 1): every source's text, title and tags pass
through ``redact`` *before* chunking, so the documents row, the chunks, the FTS terms and
the headings only ever hold redacted text, and no chunk boundary can separate a
``password =`` from its value. ``redact`` keeps the number of lines (a PEM block becomes
marker lines), so line N of the stored text is still line N of the user's file and every
cite stays exact. The content hash is taken over the *redacted* text: the database then
holds no digest of a secret (a hash of raw text would let anyone holding ``kb.db`` test
guesses of a short password offline), and edits are still noticed, because a folder
file's change detection compares the hash of its raw bytes (``locations.file_hash``) and
a re-read whose redacted text is unchanged (a rotated secret) is correctly "unchanged".
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice

import apsw

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.stream import iter_chunks
from kb_mcp.index import docs_fts, graph, keyword_store, vector_store
from kb_mcp.index.columns import index_row
from kb_mcp.ingest.derive import Derived, derive, fts_rows_of
from kb_mcp.redact import redact
from kb_mcp.relations.relink import forget_document
from kb_mcp.store import documents as rows
from kb_mcp.store import link_queue
from kb_mcp.store.db import Database
from kb_mcp.store.paths import StoredPath

# A large file's chunks are stored, and their index copies made and written, this many
# at a time, so they never all exist at once.
LARGE_SLICE_CHUNKS = 1_000


class PendingRows:
    """The FTS rows of the documents stored in one write transaction, written together
    before it commits.

    Trigger: a document's FTS rows were inserted as it was stored, and the next statement
    that opened a statement savepoint (the location upsert) made FTS5 flush its pending
    terms into a new segment: one segment per document, merged again and again by
    automerge (the location upsert was 1 ms a file, 0.013 ms alone; cProfile of the bench
    perf corpus's writer). Outcome: a sync hands one of these to every document of a
    batch and flushes it before the batch commits, so FTS5 writes a segment per batch or
    per MiB of terms. The same rows result, in the same transaction. Flushed early by the
    caller before anything is removed in that transaction (removal takes rows back from
    the FTS index), and once ``MAX_PENDING_CHUNKS`` FTS rows wait (bounded memory).
    """

    MAX_PENDING_CHUNKS = 20_000

    def __init__(self) -> None:
        self._fts: list[tuple[int, str, str]] = []
        self._documents: list[tuple[int, str, str]] = []  # ``docs_fts`` rows

    def add(
        self,
        conn: apsw.Connection,
        fts_rows: Iterable[tuple[int, str, str]],
        document_row: tuple[int, str, str],
    ) -> None:
        self._fts.extend(fts_rows)
        self._documents.append(document_row)
        if len(self._fts) >= self.MAX_PENDING_CHUNKS:
            self.flush(conn)

    def flush(self, conn: apsw.Connection) -> None:
        """Write what waits. Call inside the ``db.write()`` the documents were stored in."""
        if self._fts:
            keyword_store.add_index_rows(conn, self._fts)
            self._fts = []
        if self._documents:
            keyword_store.add_documents(conn, self._documents)
            self._documents = []


class Outcome(StrEnum):
    CREATED = "created"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Stored:
    outcome: Outcome
    doc_key: str
    chunks: int


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def redact_text(text: str) -> str:
    """``text`` with every credential replaced by a marker, line count unchanged."""
    return redact(text).text


def redact_document(doc: rows.NewDocument) -> rows.NewDocument:
    """``doc`` with credentials out of its text, title, uri and tags; hash over the result.

    Call before chunking, and chunk the returned text: a chunk cut out of raw text could
    hold half a secret that no later redaction recognises. Idempotent, so text that was
    redacted already (an agent document) comes back unchanged.
    """
    text = redact_text(doc.text)
    return dataclasses.replace(
        doc,
        text=text,
        title=redact_text(doc.title),
        uri=None if doc.uri is None else redact_text(doc.uri),
        tags=tuple(redact_text(tag) for tag in doc.tags),
        content_hash=text_hash(text),
    )


def _index_document(
    conn: apsw.Connection,
    doc: rows.NewDocument,
    chunks: Iterable[Chunk],
    derived: Derived,
    pending: PendingRows | None,
) -> tuple[int, int]:
    """Store and index a new document; its id and how many chunks it has (known here,
    so not read back: a round trip per document on PostgreSQL)."""
    document_id = rows.insert_document(conn, doc)
    link_queue.enqueue_new(conn, document_id)
    if derived.fts_rows is None:  # a large file: chunks made, stored, indexed in slices
        return document_id, _index_in_slices(conn, document_id, doc, iter(chunks))
    else:
        chunks = list(chunks)
        ids = rows.insert_chunks(conn, document_id, chunks)
        copies = derived.fts_rows
        fts_rows = [(cid, head, body) for cid, (head, body) in zip(ids, copies, strict=True)]
        body = docs_fts.DocumentBody()
        body.add(row[2] for row in fts_rows)
        document_row = (document_id, docs_fts.head_copy(doc.title, _language(doc)), body.text())
        if pending is None:
            keyword_store.add_index_rows(conn, fts_rows)
            keyword_store.add_documents(conn, [document_row])
        else:
            pending.add(conn, fts_rows, document_row)
        return document_id, len(ids)


def _index_in_slices(
    conn: apsw.Connection, document_id: int, doc: rows.NewDocument, chunks: Iterator[Chunk]
) -> int:
    """Store and index ``LARGE_SLICE_CHUNKS`` chunks at a time, as ``chunks`` (a lazy
    ``chunk.stream.iter_chunks``) makes them: a large file's chunks and index copies
    never all exist at once (the rows are the same whatever the grouping; the
    document's own row holds the first ``docs_fts.BODY_CHARS`` of its copies). Returns
    how many chunks it stored."""
    body = docs_fts.DocumentBody()
    stored = 0
    while part := list(islice(chunks, LARGE_SLICE_CHUNKS)):
        ids = rows.insert_chunks(conn, document_id, part)
        stored += len(ids)
        copies = list(fts_rows_of(doc, part))
        keyword_store.add_index_rows(
            conn, ((cid, head, body) for cid, (head, body) in zip(ids, copies, strict=True))
        )
        body.add(copy for _head, copy in copies)
    head = docs_fts.head_copy(doc.title, _language(doc))
    keyword_store.add_documents(conn, [(document_id, head, body.text())])
    return stored


def _language(doc: rows.NewDocument) -> str | None:
    """The language a document's index rows name: a code file's, else none."""
    return doc.language if doc.kind == "code" else None


def _unindex_chunks(conn: apsw.Connection, document_id: int) -> None:
    """Take a document's chunks out of every index (keyword, vectors of every signature,
    the entity graph) and the document out of the documents' keyword index, before its
    rows are deleted, in the same transaction."""
    chunk_ids = rows.chunk_ids(conn, document_id)
    keyword_store.remove_chunks(conn, chunk_ids)
    keyword_store.remove_documents(conn, [document_id])
    vector_store.remove_chunks(conn, chunk_ids)
    graph.remove_chunks(conn, chunk_ids)


def _drop_if_orphan(conn: apsw.Connection, document_id: int) -> None:
    """Delete a document that no location holds any more, out of every index first."""
    if rows.document_location_count(conn, document_id) == 0:
        _unindex_chunks(conn, document_id)
        forget_document(conn, document_id)
        rows.delete_document(conn, document_id)


def _same(old: rows.DocumentRow, new: rows.NewDocument) -> bool:
    return (old.doc_key, old.content_hash, old.title, old.uri, old.doc_date, old.tags) == (
        new.doc_key,
        new.content_hash,
        new.title,
        new.uri,
        new.doc_date,
        new.tags,
    )


def store_document(
    db: Database,
    source_id: int,
    path: StoredPath,
    doc: rows.NewDocument,
    chunks: Iterable[Chunk],
    derived: Derived | None = None,
    pending: PendingRows | None = None,
    **location: object,
) -> Stored:
    """Point ``(source, path)`` at ``doc``; store and index it unless it is already there.

    ``path``: ``db.paths.of(raw path)``, redacted to be shown and keyed to be found.

    ``location`` carries the per-file state (size, mtime_ns, file_hash, seen_at). A
    document that other locations hold too keeps the metadata of its first holder (a
    deduplicated file is one document, whatever each copy's name or mtime). ``derived``
    is ``derive(doc, chunks)`` when a reader process computed it already (``chunks`` may
    then be a lazy iterator when it was derived with ``eager=False``); ``pending``
    collects the FTS rows of a batch of documents (the caller flushes it before commit).
    A stored document is queued for the linking phase (``ingest/links``), in this
    transaction.
    """
    with db.write() as conn:
        old_id = rows.location_document_id(conn, source_id, path.key)
        old = rows.get_document_by_id(conn, old_id) if old_id is not None else None
        shared = old is not None and rows.document_location_count(conn, old.id) > 1
        if old is not None and (_same(old, doc) or (shared and old.doc_key == doc.doc_key)):
            rows.upsert_location(conn, source_id, path, old.id, **location)
            return Stored(Outcome.UNCHANGED, old.doc_key, len(rows.chunk_ids(conn, old.id)))
        if pending is not None and old is not None:
            pending.flush(conn)  # a removal takes back the index rows it reads
        if old is not None:
            rows.delete_location(conn, source_id, path.key)
            _drop_if_orphan(conn, old.id)
        existing = rows.get_document(conn, doc.doc_key)
        if existing is not None and existing.content_hash != doc.content_hash:
            if pending is not None:
                pending.flush(conn)
            # Keys are derived from the uri or the text, so this means a stale row.
            _unindex_chunks(conn, existing.id)
            forget_document(conn, existing.id)
            rows.delete_document(conn, existing.id)
            existing = None
        if existing is None:
            if derived is None:
                chunks = list(chunks)
                derived = derive(doc, chunks)
            document_id, chunk_count = _index_document(conn, doc, chunks, derived, pending)
        else:
            document_id = existing.id
            chunk_count = len(rows.chunk_ids(conn, document_id))
        rows.upsert_location(conn, source_id, path, document_id, **location)
        outcome = Outcome.REPLACED if old is not None else Outcome.CREATED
        return Stored(outcome, doc.doc_key, chunk_count)


def remove_location(db: Database, source_id: int, key: str) -> bool:
    """Forget what the location whose path has ``key`` held (``db.paths.key(raw)``); the
    document goes once nothing holds it."""
    with db.write() as conn:
        document_id = rows.location_document_id(conn, source_id, key)
        rows.delete_location(conn, source_id, key)
        if document_id is not None:
            _drop_if_orphan(conn, document_id)
        return document_id is not None


def rewrite_in_place(
    conn: apsw.Connection,
    old: rows.DocumentRow,
    *,
    text: str,
    title: str,
    uri: str | None,
    tags: tuple[str, ...],
) -> int:
    """Give document ``old`` new text fields, re-chunked and re-indexed; its id,
    locations and dates stay. Returns its chunks. A document the linking phase has not
    reached yet is queued again (its chunks are new) and gets its entities there; a
    linked one gets them here, as it had them.

    For text whose lines did not move (``redact`` keeps every line where it was): a chunk
    of the new text covers the same lines as the old text's would. A folder file's key
    follows its text (``f-`` + hash, as ``filework.prepare_file`` makes it), so the next
    sync of the file finds it unchanged instead of storing it again; when another
    document has that key already, the old key stays and that sync merges the two. An
    agent document's key is its uri's and stays. Call inside ``db.write()``.
    """
    old_ids = rows.chunk_ids(conn, old.id)
    linked = not link_queue.is_queued(conn, old.id)
    if not linked:
        link_queue.enqueue(conn, old.id)  # a new entry: a result for the old chunks is dropped
    keyword_store.remove_chunks(conn, old_ids)
    keyword_store.remove_documents(conn, [old.id])
    graph.remove_chunks(conn, old_ids)
    rows.delete_chunks(conn, old.id)
    language = old.language if old.kind == "code" else None
    chunks = iter_chunks(text, old.kind, old.language)  # a large text: window by window
    stored = 0
    body = docs_fts.DocumentBody()
    while part := list(islice(chunks, LARGE_SLICE_CHUNKS)):
        ids = rows.insert_chunks(conn, old.id, part)
        pairs = list(zip(ids, part, strict=True))
        copies = [(cid, *index_row(title, c.heading_path, c.text, language)) for cid, c in pairs]
        keyword_store.add_index_rows(conn, copies)
        body.add(copy for _cid, _head, copy in copies)
        if linked:
            graph.add_chunks(
                conn, ((cid, c.heading_path, c.text) for cid, c in pairs), code=old.kind == "code"
            )
        stored += len(part)
    keyword_store.add_documents(conn, [(old.id, docs_fts.head_copy(title, language), body.text())])
    digest = text_hash(text)
    key = old.doc_key
    if key.startswith("f-") and rows.get_document(conn, "f-" + digest[:16]) is None:
        key = "f-" + digest[:16]
    rows.update_document_text(
        conn, old.id, doc_key=key, title=title, uri=uri, text=text, content_hash=digest, tags=tags
    )
    return stored
