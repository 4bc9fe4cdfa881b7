"""When document relations are stored, matched again, and forgotten (issue 9).

Detection (``ingest/relations.detect_relations``) reads one document alone; matching a
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

All of it runs inside the caller's write transaction (``ingest/pipeline.py``).
"""

from __future__ import annotations

import dataclasses
import functools

import apsw

from kb_mcp.ingest import references as refs
from kb_mcp.ingest import relations as detect
from kb_mcp.store import documents as rows
from kb_mcp.store import meta
from kb_mcp.store import relations as store
from kb_mcp.store.db import Database

VERSION_KEY = "relations_version"
BACKFILL_BATCH = 500


# ``doc_names`` of a document's (id, title, names, date), kept: every match runs over
# the whole library, and these run inside write transactions. Rebuilding them per call
# was 75 ms of a 600-document library's write lock each time (issue 11's long run).
_doc_names = functools.lru_cache(maxsize=1 << 16)(refs.doc_names)


def _names(conn: apsw.Connection, only: int | None = None) -> list[refs.DocNames]:
    """How each document (or only document ``only``) can be referred to."""
    return [
        _doc_names(doc_id, title, names, doc_date)
        for doc_id, title, names, doc_date in store.candidates(conn, only)
    ]


def _outcome(found: list[int]) -> tuple[int | None, str]:
    if len(found) == 1:
        return found[0], store.RESOLVED
    return None, (store.AMBIGUOUS if found else store.PENDING)


def _match(
    reference: str, kind: str, stated_by: int, names: list[refs.DocNames], held: set[int]
) -> tuple[int | None, str]:
    """Where a reference stated by ``stated_by`` points, among ``names`` (never at the
    stating document itself, unless the reference is ``SELF``; never at a document in
    ``held``, the user's sources, when the stater is not in it)."""
    if reference == detect.SELF:
        return stated_by, store.RESOLVED
    stater = next((n for n in names if n.document_id == stated_by), None)
    others = [
        n
        for n in names
        if n.document_id != stated_by and (stated_by in held or n.document_id not in held)
    ]
    return _outcome(refs.match_reference(reference, others, kind == detect.UPDATES, stater))


def _may_name(row: store.RelationRow, names: list[refs.DocNames]) -> bool:
    """Whether ``row``'s reference could point at one of ``names`` (a cheap pre-check)."""
    if row.reference == detect.SELF:
        return False
    if row.reference.startswith(refs.DATED):
        return True  # cheap to re-match: a date compare per document
    return refs.is_relative(row.reference) or bool(
        refs.match_reference(row.reference, names, row.kind == detect.UPDATES)
    )


def record_relations(
    conn: apsw.Connection,
    document_id: int,
    doc: rows.NewDocument,
    detected: list[detect.Detected] | None = None,
) -> None:
    """Detect and match ``doc``'s relations, then re-match the rows it may answer.

    ``detected``: what ``detect_relations`` found in ``doc``, when a reader process ran
    it already (``ingest/derive``). Most documents state nothing and are named by
    nothing: then this costs one scan of the relation rows, never a scan of the titles.
    """
    store.delete_stated_by(conn, document_id)
    if detected is None:
        detected = detect.detect_relations(
            doc.title, doc.text, doc.kind, doc.doc_date, doc.supersedes
        )
    existing = store.all_relations(conn)
    if not detected and not existing:
        return
    mine = _names(conn, only=document_id)
    answered = [r for r in existing if _may_name(r, mine)]
    if not detected and not answered:
        return
    names, held = _names(conn), store.user_held(conn)
    for item in detected:
        other, state = _match(item.reference, item.kind, document_id, names, held)
        store.insert_relation(
            conn, document_id, item, reverse=item.reverse, other=other, state=state
        )
    for row in answered:
        store.set_other(conn, row, *_match(row.reference, row.kind, row.stated_by, names, held))


def forget_document(conn: apsw.Connection, document_id: int) -> None:
    """Before ``document_id`` is deleted: its rows go; rows naming it, and ambiguous rows
    it was one of the candidates of, are re-matched without it.

    Most removals touch no row: then this costs one scan of the relation rows and the
    names of this one document, never the names of the whole library. (Measured in a
    server over 10k files holding 7 pending rows, issue 10 "Freshness": the sync after
    an edit took 1.3-1.9 s and after a delete 2.0-2.8 s against 0.49 s after an
    addition, nearly all of it naming every document; so edits and deletes reached
    search seconds after additions, and it held the write lock 155 ms a file in a
    600-document library, issue 11.)
    """
    store.delete_stated_by(conn, document_id)
    rows_ = store.all_relations(conn)
    if not rows_:
        return
    gone = _names(conn, only=document_id)
    affected = [
        row
        for row in rows_
        if document_id in (row.from_id, row.to_id)
        or (row.state == store.AMBIGUOUS and _may_name(row, gone))
    ]
    if not affected:
        return
    left = [n for n in _names(conn) if n.document_id != document_id]
    held = store.user_held(conn)
    for row in affected:
        matched = _match(row.reference, row.kind, row.stated_by, left, held)
        store.set_other(conn, row, *matched)


class StoredRelations:
    """Relations of documents stored before this version of the rules: detected again.

    The rows are derived data (``RELATIONS_VERSION`` in ``ingest/relations.py``): a
    database from before the table, or from older rules, has its rows redone by the
    first reader, in one transaction (so a crash redoes all of it), never before the
    MCP handshake. A library without a cue costs one detection per document.
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
        with self.db.write() as conn:
            if meta.get(conn, VERSION_KEY) != wanted:  # another process may have done it
                store.delete_all(conn)
                after = 0
                while batch := rows.documents_after(conn, after, BACKFILL_BATCH):
                    for found in batch:
                        record_relations(conn, found.id, _as_new(conn, found))
                    after = batch[-1].id
                meta.put(conn, VERSION_KEY, wanted)
        self._current = True
        return True


def _as_new(conn: apsw.Connection, found: rows.DocumentRow) -> rows.NewDocument:
    fields = {
        f.name: getattr(found, f.name)
        for f in dataclasses.fields(rows.NewDocument)
        if hasattr(found, f.name)
    }
    return rows.NewDocument(**fields, supersedes=store.supersedes_of(conn, found.id))
