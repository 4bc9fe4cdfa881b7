"""When document relations are stored, matched again, and forgotten (issue 9).

Detection (``relations/detect.detect_relations``) reads one document alone; matching a
reference to a document depends on what the library holds. So the result must not
depend on ingest order, and every change of the library re-matches what it could change:

- a document stored: its own relations are detected and matched; every other row whose
  reference could name the new document is matched again (a pending one resolves, a
  resolved one may become ambiguous);
- a document removed: the rows it stated go; rows naming it are matched again without
  it (pending, or another document's now).

A document only an agent wrote (held by the ``agent`` source alone: ``add_document``,
``add-text``) names only documents of that source: text an agent was steered into
writing must not mark the user's own files (folders, uploads) as corrected, superseded
or withdrawn (issue 11, docs/security.md). Such a reference stays ``pending``. The
user's documents may name any document.

All of it runs inside the caller's write transaction: the linking phase's
(``ingest/links.py``) for a stored document, the keyword phase's (``ingest/pipeline.py``)
for a removed one. Which
documents a reference can name, and which rows a document can answer, are looked up in
``relations/name_index`` (kept current from ``names_log``), never scanned: a stored document
that states nothing and is named by nothing costs a few indexed reads, whatever the size
of the library (issue 10 ingest). The backfill after a rules change commits in bounded
batches (``StoredRelations``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import apsw

from kb_mcp.relations import detect
from kb_mcp.relations import references as refs
from kb_mcp.relations.name_index import NameIndex, names_for, reference_keys, warm
from kb_mcp.store import documents as rows
from kb_mcp.store import meta
from kb_mcp.store import relations as store
from kb_mcp.store.db import Database

VERSION_KEY = "relations_version"
# Where an unfinished backfill stopped: "<rules version>:<last document id done>".
CURSOR_KEY = "relations_cursor"
# A backfill transaction ends after this many documents or seconds, whichever comes
# first (as ``ingest/reredact``): other writers wait at most about that long.
BACKFILL_BATCH = 500
BACKFILL_SECONDS = 1.0
_BACKFILL_READ = 50  # documents read (with their text) at a time


def _outcome(found: list[int]) -> tuple[int | None, str]:
    if len(found) == 1:
        return found[0], store.RESOLVED
    return None, (store.AMBIGUOUS if found else store.PENDING)


def _match(
    index: NameIndex, reference: str, kind: str, stated_by: int, without: int | None = None
) -> tuple[int | None, str]:
    """Where a reference stated by ``stated_by`` points (never at the stating document
    itself, unless the reference is ``SELF``; never at a document a user's source holds,
    when the stater is held by none; never at ``without``, a document being removed).

    ``match_reference`` runs over the documents the index returns for the reference, a
    superset of what it can return over the whole library: the same answer."""
    keys = reference_keys(reference)
    if keys is None:
        return stated_by, store.RESOLVED
    docs = index.documents
    stater = docs.names.get(stated_by)
    anyone = stated_by in docs.held
    others = [
        docs.names[doc]
        for doc in sorted(docs.candidates(keys, stater))
        if doc not in (stated_by, without) and (anyone or doc not in docs.held)
    ]
    return _outcome(refs.match_reference(reference, others, kind == detect.UPDATES, stater))


def _open_side(row: store.RelationRow) -> tuple[int | None, str]:
    return (row.from_id if row.reverse else row.to_id), row.state


def _rematch(
    conn: apsw.Connection,
    index: NameIndex,
    found: Iterable[store.RelationRow],
    without: int | None = None,
) -> None:
    """Match ``found`` again; a row whose outcome changed is written."""
    for row in found:
        matched = _match(index, row.reference, row.kind, row.stated_by, without)
        if matched != _open_side(row):
            store.set_other(conn, row, *matched)


def prepare(db: Database) -> None:
    """Before a writer's first transaction: the name index read outside it (``warm``)."""
    warm(db.conn)


def record_relations(
    conn: apsw.Connection, document_id: int, detected: list[detect.Detected]
) -> None:
    """Record and match ``detected`` (what ``detect_relations`` found in the document),
    then re-match the rows the document may answer. Call once the document and its
    location are stored (a reference may name the file): the linking phase
    (``ingest/links``) and the backfill below.
    """
    store.delete_stated_by(conn, document_id)
    index = names_for(conn)
    if not detected and not index.statements.rows:
        return
    mine = index.documents.names.get(document_id)
    answered = set() if mine is None else index.statements.answerable_by(mine, index.documents)
    for item in detected:
        other, state = _match(index, item.reference, item.kind, document_id)
        store.insert_relation(
            conn, document_id, item, reverse=item.reverse, other=other, state=state
        )
    if answered:
        _rematch(conn, index, store.relations_by_id(conn, answered))


def forget_document(conn: apsw.Connection, document_id: int) -> None:
    """Before ``document_id`` is deleted: its rows go; rows naming it, and ambiguous rows
    it may be one of the candidates of, are re-matched without it.

    Most removals touch no row: then this costs a few indexed reads, never the names of
    the library. (Measured in a server over 10k files holding 7 pending rows, issue 10
    "Freshness": naming every document made the sync after a delete take 2.0-2.8 s
    against 0.49 s after an addition, and held the write lock 155 ms a file in a
    600-document library, issue 11.)
    """
    store.delete_stated_by(conn, document_id)
    index = names_for(conn)
    if not index.statements.rows:
        return
    affected = {row.id: row for row in store.relations_naming(conn, document_id)}
    gone = index.documents.names.get(document_id)
    if gone is not None:
        maybe = index.statements.answerable_by(gone, index.documents) - affected.keys()
        for row in store.relations_by_id(conn, maybe):
            if row.state == store.AMBIGUOUS:
                affected[row.id] = row
    _rematch(conn, index, affected.values(), without=document_id)


class StoredRelations:
    """Relations of documents stored before this version of the rules: detected again.

    The rows are derived data (``RELATIONS_VERSION`` in ``relations/detect.py``): a
    database from before the table, or from older rules, has its rows redone by the
    first reader, never before the MCP handshake, in transactions of at most
    ``BACKFILL_BATCH`` documents or ``BACKFILL_SECONDS``, each recording where it
    stopped (``CURSOR_KEY``): a crash resumes there, and the version is written only
    with the last batch, so a half-done backfill is never taken for a current one. A
    document a sync stores meanwhile is matched under today's rules already (redoing it
    is harmless). A library without a cue costs one detection per document.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._current = False

    def ensure_current(self) -> bool:
        """Redo every row when the stored version is not today's; whether it ran."""
        if self._current:
            return False
        wanted = str(detect.RELATIONS_VERSION)
        if meta.get(self.db.conn, VERSION_KEY) == wanted:
            self._current = True
            return False
        while not self._backfill_batch(wanted):
            pass
        self._current = True
        return True

    def _backfill_batch(self, wanted: str) -> bool:
        """Redo the next documents in one transaction; whether the backfill is done."""
        with self.db.write() as conn:
            if meta.get(conn, VERSION_KEY) == wanted:  # another process finished it
                return True
            version, _, done = (meta.get(conn, CURSOR_KEY) or "").partition(":")
            if version == wanted:
                after = int(done)
            else:  # a fresh start (or one under other rules): the old rows go first
                store.delete_all(conn)
                after = 0
            ends_at, count = time.monotonic() + BACKFILL_SECONDS, 0
            while count < BACKFILL_BATCH and time.monotonic() < ends_at:
                batch = rows.documents_after(conn, after, _BACKFILL_READ)
                if not batch:
                    meta.put(conn, VERSION_KEY, wanted)
                    meta.delete(conn, CURSOR_KEY)
                    return True
                for found in batch:
                    record_relations(conn, found.id, _detected(conn, found))
                after, count = batch[-1].id, count + len(batch)
            meta.put(conn, CURSOR_KEY, f"{wanted}:{after}")
            return False


def _detected(conn: apsw.Connection, found: rows.DocumentRow) -> list[detect.Detected]:
    supersedes = store.supersedes_of(conn, found.id)
    return detect.detect_relations(found.title, found.text, found.kind, found.doc_date, supersedes)
