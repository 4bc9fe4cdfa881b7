"""Rows of ``doc_relations``: what documents state about one another (issue 9).

SQL only, in the dialect SQLite and PostgreSQL share; a list is read in id order
(``ORDER BY id``, the order SQLite's table scan gave unasked, at no cost there), since
PostgreSQL returns an updated row after the others. Detection and matching are
``relations/detect.py``, the orchestration (when a relation is stored, re-matched or
forgotten) is ``ingest/pipeline.py``. A row is ``resolved`` when its reference names
exactly one document, else ``pending`` (none yet) or ``ambiguous`` (several): the open
side is NULL and the row has no effect on search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apsw

RESOLVED, PENDING, AMBIGUOUS = "resolved", "pending", "ambiguous"


@dataclass(frozen=True, slots=True)
class Statement:
    """What a document states about another: the kind of change, the reference as
    written, when it takes effect, the evidence and its lines, how it was detected.

    The one definition of these fields: ``relations/detect.Detected`` is a statement as
    detection finds it, ``RelationRow`` one as stored (here, the bottom layer both use).
    """

    kind: str
    reference: str
    effective: str | None
    evidence: str
    start_line: int
    end_line: int
    detected: str


@dataclass(frozen=True, slots=True)
class RelationRow(Statement):
    """A stored statement: its row id, the stating document, both sides (the open one
    NULL until resolved) and the match state."""

    id: int
    stated_by: int
    from_id: int | None
    to_id: int | None
    state: str

    @property
    def reverse(self) -> bool:
        """Whether the stating document is the one changed (``superseded_by``)."""
        return self.to_id == self.stated_by and self.from_id != self.stated_by


@dataclass(frozen=True, slots=True)
class RelationView:
    """A resolved relation as search and read show it: both documents by key."""

    kind: str
    from_key: str
    to_key: str
    stated_by_key: str
    effective: str | None
    evidence: str
    start_line: int
    end_line: int
    detected: str


_STATEMENT = "kind, reference, effective, evidence, start_line, end_line, detected"
_COLS = f"{_STATEMENT}, id, stated_by, from_id, to_id, state"  # RelationRow's field order


def insert_relation(
    conn: apsw.Connection,
    stated_by: int,
    stated: Statement,
    *,
    reverse: bool,
    other: int | None,
    state: str,
) -> None:
    """Store what ``stated_by`` states; ``reverse``: ``other`` is the changing side."""
    from_id, to_id = (other, stated_by) if reverse else (stated_by, other)
    conn.execute(
        f"INSERT INTO doc_relations({_STATEMENT}, stated_by, from_id, to_id, state) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            stated.kind,
            stated.reference,
            stated.effective,
            stated.evidence,
            stated.start_line,
            stated.end_line,
            stated.detected,
            stated_by,
            from_id,
            to_id,
            state,
        ),
    )


def set_other(conn: apsw.Connection, row: RelationRow, other: int | None, state: str) -> None:
    """Point the open side of ``row`` at ``other`` (None: pending or ambiguous)."""
    column = "from_id" if row.reverse else "to_id"
    conn.execute(
        f"UPDATE doc_relations SET {column} = ?, state = ? WHERE id = ?",  # fixed names
        (other, state, row.id),
    )


def delete_stated_by(conn: apsw.Connection, document_id: int) -> None:
    conn.execute("DELETE FROM doc_relations WHERE stated_by = ?", (document_id,))


def delete_all(conn: apsw.Connection) -> None:
    conn.execute("DELETE FROM doc_relations")


def supersedes_of(conn: apsw.Connection, document_id: int) -> tuple[str, ...]:
    """The ``supersedes:`` references a document was stored with (``supersessions``)."""
    rows = conn.execute(
        "SELECT supersedes FROM supersessions WHERE document_id = ? ORDER BY id",
        (document_id,),
    )
    return tuple(r[0] for r in rows)


def all_relations(conn: apsw.Connection) -> list[RelationRow]:
    return [RelationRow(*r) for r in conn.execute(f"SELECT {_COLS} FROM doc_relations ORDER BY id")]


def open_references(conn: apsw.Connection, document_id: int) -> list[RelationRow]:
    """The rows ``document_id`` states that match no document, or several."""
    return [
        RelationRow(*r)
        for r in conn.execute(
            f"SELECT {_COLS} FROM doc_relations WHERE stated_by = ? AND state != 'resolved' "
            "ORDER BY id",
            (document_id,),
        )
    ]


def user_held(conn: apsw.Connection, only: int | None = None) -> set[int]:
    """Documents (or only document ``only``) with a location in a source the user
    controls (a folder, an upload), as opposed to the ``agent`` source alone (text handed
    over by ``add_document``)."""
    sql = (
        "SELECT DISTINCT l.document_id FROM locations l JOIN sources s ON s.id = l.source_id "
        "WHERE s.kind != 'agent' AND l.document_id "
    )
    if only is None:
        return {r[0] for r in conn.execute(sql + "IS NOT NULL")}
    return {r[0] for r in conn.execute(sql + "= ?", (only,))}


def state_counts(conn: apsw.Connection) -> list[tuple[str, int]]:
    """(state, rows) per state (resolved, pending, ambiguous …), in state order."""
    return conn.execute(
        "SELECT state, count(*) FROM doc_relations GROUP BY state ORDER BY 1"
    ).fetchall()


def statements(conn: apsw.Connection, only: int | None = None) -> list[tuple[int, str, str, int]]:
    """Every row's (or only row ``only``'s) fixed fields: id, kind, reference, stater."""
    sql = "SELECT id, kind, reference, stated_by FROM doc_relations"
    if only is None:
        return conn.execute(sql + " ORDER BY id").fetchall()
    return conn.execute(sql + " WHERE id = ?", (only,)).fetchall()


def relations_by_id(conn: apsw.Connection, ids: Iterable[int]) -> list[RelationRow]:
    """The rows with these ids that exist, in id order."""
    found = []
    for rid in sorted(set(ids)):
        row = conn.execute(f"SELECT {_COLS} FROM doc_relations WHERE id = ?", (rid,)).fetchone()
        if row is not None:
            found.append(RelationRow(*row))
    return found


def relations_naming(conn: apsw.Connection, document_id: int) -> list[RelationRow]:
    """The rows whose open side points at ``document_id`` (it stated none of them)."""
    return [
        RelationRow(*r)
        for r in conn.execute(
            f"SELECT {_COLS} FROM doc_relations WHERE stated_by != ? AND "
            "(from_id = ? OR to_id = ?) ORDER BY id",
            (document_id,) * 3,
        )
    ]


def candidates(
    conn: apsw.Connection, only: int | None = None
) -> list[tuple[int, str, tuple[str, ...], str | None]]:
    """Every document (or only ``only``): id, title, the names it is held under (uri,
    key, paths), its date."""
    # Two statements each, not ``?1 IS NULL OR id = ?1``: SQLite cannot use an index
    # for that OR, so naming one document scanned every document and location, once per
    # document a sync stored (a quarter of ``relink.record_relations`` on the bench perf
    # corpus, cProfile; issue 10).
    if only is None:
        docs = conn.execute("SELECT id, title, uri, doc_key, doc_date FROM documents ORDER BY id")
    else:
        docs = conn.execute(
            "SELECT id, title, uri, doc_key, doc_date FROM documents WHERE id = ?", (only,)
        )
    found: dict[int, tuple[str, list[str]]] = {}
    dates: dict[int, str | None] = {}
    for doc_id, title, uri, key, doc_date in docs:
        found[doc_id] = (title, [n for n in (uri, key) if n])
        dates[doc_id] = doc_date
    if only is None:
        paths = conn.execute(
            "SELECT document_id, path FROM locations WHERE document_id IS NOT NULL ORDER BY id"
        )
    else:
        paths = conn.execute(
            "SELECT document_id, path FROM locations WHERE document_id = ? ORDER BY id", (only,)
        )
    for doc_id, path in paths:
        if doc_id in found:
            found[doc_id][1].append(path)
    return [
        (doc_id, title, tuple(names), dates[doc_id]) for doc_id, (title, names) in found.items()
    ]


def views_for(conn: apsw.Connection, doc_keys: Sequence[str]) -> list[RelationView]:
    """The resolved relations that touch any of ``doc_keys`` (either side)."""
    if not doc_keys:
        return []
    marks = ",".join("?" * len(doc_keys))
    rows = conn.execute(
        "SELECT r.kind, f.doc_key, t.doc_key, s.doc_key, COALESCE(r.effective, f.doc_date), "
        "r.evidence, "
        "r.start_line, r.end_line, r.detected FROM doc_relations r "
        "JOIN documents f ON f.id = r.from_id JOIN documents t ON t.id = r.to_id "
        "JOIN documents s ON s.id = r.stated_by "
        f"WHERE r.state = 'resolved' AND (f.doc_key IN ({marks}) OR t.doc_key IN ({marks})) "
        "ORDER BY r.id",
        (*doc_keys, *doc_keys),
    )
    return [RelationView(*r) for r in rows]


def related_chunks(conn: apsw.Connection) -> dict[int, str]:
    """Chunk id → document key, for the chunks of every document on either side of a
    resolved relation (what ``views_for`` can find, and a few more)."""
    return dict(
        conn.execute(
            "SELECT c.id, d.doc_key FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.id IN (SELECT from_id FROM doc_relations WHERE state = 'resolved' UNION "
            "SELECT to_id FROM doc_relations WHERE state = 'resolved')"
        ).fetchall()
    )


def partners(conn: apsw.Connection) -> dict[str, frozenset[str]]:
    """Document key → the keys of the documents a resolved relation links it to."""
    found: dict[str, set[str]] = {}
    for one, other in conn.execute(
        "SELECT f.doc_key, t.doc_key FROM doc_relations r JOIN documents f ON f.id = r.from_id "
        "JOIN documents t ON t.id = r.to_id WHERE r.state = 'resolved'"
    ):
        found.setdefault(one, set()).add(other)
        found.setdefault(other, set()).add(one)
    return {key: frozenset(keys) for key, keys in found.items()}


def snapshot(conn: apsw.Connection) -> list[tuple]:
    """Every row by document keys, sorted: equal before and after a rebuild."""
    rows: Iterable[tuple] = conn.execute(
        "SELECT s.doc_key, f.doc_key, t.doc_key, r.kind, r.reference, r.effective, "
        "r.evidence, r.start_line, r.end_line, r.detected, r.state FROM doc_relations r "
        "JOIN documents s ON s.id = r.stated_by LEFT JOIN documents f ON f.id = r.from_id "
        "LEFT JOIN documents t ON t.id = r.to_id"
    )
    return sorted(rows, key=lambda r: tuple(str(v) for v in r))
