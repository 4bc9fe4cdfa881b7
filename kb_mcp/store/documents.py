"""Rows of sources, documents, locations and chunks: insert, replace, delete, get.

Rows, not formats: this module knows nothing of Markdown, frontmatter or FTS. Every
function takes the connection of the caller's transaction (``db.write()``) or, for
reads, any connection; parameters are always bound. The SQL is the dialect SQLite and
PostgreSQL share (``store/postgres/dialect.py``), as in every rows module of ``store/``.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import apsw

from kb_mcp.chunk import Chunk
from kb_mcp.store.paths import StoredPath


@dataclass(frozen=True, slots=True)
class SourceRow:
    id: int
    name: str
    kind: str
    root: str | None
    ignore_globs: tuple[str, ...]
    created_at: str
    synced_at: str | None
    sync_state: str
    sync_error: str | None
    # The machine that registered a folder source (``store/host.py``); None for the
    # agent's and uploads' sources, and for folders recorded before hosts were.
    host: str | None = None


@dataclass(frozen=True, slots=True)
class DocumentRow:
    id: int
    doc_key: str
    title: str
    uri: str | None
    kind: str
    language: str | None
    text: str
    content_hash: str
    doc_date: str | None
    tags: tuple[str, ...]
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class NewDocument:
    """What the ingestion path hands the store for one document."""

    doc_key: str
    title: str
    uri: str | None
    kind: str
    language: str | None
    text: str
    content_hash: str
    doc_date: str | None
    tags: tuple[str, ...]
    created_at: str
    updated_at: str
    supersedes: tuple[str, ...] = ()
    status: str = "current"
    # A large file's whole text as UTF-8, stored in place of ``text``, which then holds
    # only its opening (``ingest/large``: the text is never one string, issue 10).
    utf8: bytes | bytearray | None = None


@dataclass(frozen=True, slots=True)
class PassageRow:
    """A chunk with what a citation needs: its document, location and line span."""

    chunk_id: int
    doc_key: str
    title: str
    path: str | None
    source: str | None
    heading_path: tuple[str, ...]
    start_line: int
    end_line: int
    text: str
    doc_date: str | None
    updated_at: str
    superseded_on: str | None  # date of the earliest document that supersedes this one
    status: str
    kind: str = "markdown"  # the document's reader kind: markdown, code, pdf, html, …


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_SOURCE_COLS = (
    "id, name, kind, root, ignore_globs, created_at, synced_at, sync_state, sync_error, host"
)
_DOC_COLS = (
    "id, doc_key, title, uri, kind, language, text, content_hash, doc_date, tags, created_at, "
    "updated_at"
)


def _shown_as(alias: str) -> str:
    """SQL for how document ``alias`` is shown: its uri, else its first location's path,
    else its id. One definition, so grep, "did you mean" and lists name documents alike."""
    return (
        f"COALESCE({alias}.uri, (SELECT path FROM locations WHERE document_id = {alias}.id "
        f"ORDER BY id LIMIT 1), {alias}.doc_key)"
    )


def _source(row: tuple) -> SourceRow:
    return SourceRow(*row[:4], tuple(json.loads(row[4])), *row[5:])


def _document(row: tuple) -> DocumentRow:
    return DocumentRow(*row[:9], tuple(json.loads(row[9])), *row[10:])


# --- sources -----------------------------------------------------------------------------


def get_source(conn: apsw.Connection, name: str) -> SourceRow | None:
    row = conn.execute(f"SELECT {_SOURCE_COLS} FROM sources WHERE name = ?", (name,)).fetchone()
    return _source(row) if row else None


def list_sources(conn: apsw.Connection) -> list[SourceRow]:
    return [_source(r) for r in conn.execute(f"SELECT {_SOURCE_COLS} FROM sources ORDER BY id")]


def ensure_source(
    conn: apsw.Connection,
    name: str,
    kind: str,
    now: str,
    root: str | None = None,
    ignore_globs: Sequence[str] = (),
    host: str | None = None,
) -> int:
    """The id of source ``name``, creating it when missing. ``host``: the machine the
    folder belongs to; a row recorded without one (before hosts were) takes it."""
    conn.execute(
        "INSERT INTO sources(name, kind, root, ignore_globs, created_at, host) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET host = excluded.host "
        "WHERE sources.host IS NULL AND excluded.host IS NOT NULL",
        (name, kind, root, json.dumps(list(ignore_globs)), now, host),
    )
    return conn.execute("SELECT id FROM sources WHERE name = ?", (name,)).fetchone()[0]


def set_sync_state(
    conn: apsw.Connection, source_id: int, state: str, error: str | None, synced_at: str | None
) -> None:
    conn.execute(
        "UPDATE sources SET sync_state = ?, sync_error = ?, synced_at = COALESCE(?, synced_at) "
        "WHERE id = ?",
        (state, error, synced_at, source_id),
    )


def set_skipped(conn: apsw.Connection, source_id: int, summary: str) -> None:
    """Store what the source's last walk left out (``ingest/skipped.py`` makes it); an
    unchanged summary writes nothing."""
    conn.execute(
        "UPDATE sources SET skipped = ? WHERE id = ? AND skipped IS DISTINCT FROM ?",
        (summary, source_id, summary),
    )


def skipped_summaries(conn: apsw.Connection) -> dict[int, str]:
    """Each source's stored ``set_skipped`` summary, by source id (synced sources only)."""
    rows = conn.execute("SELECT id, skipped FROM sources WHERE skipped IS NOT NULL")
    return dict(rows.fetchall())


def delete_source(conn: apsw.Connection, source_id: int) -> None:
    conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))


# --- documents ---------------------------------------------------------------------------


def get_document(conn: apsw.Connection, doc_key: str) -> DocumentRow | None:
    row = conn.execute(f"SELECT {_DOC_COLS} FROM documents WHERE doc_key = ?", (doc_key,))
    found = row.fetchone()
    return _document(found) if found else None


def get_document_by_id(conn: apsw.Connection, document_id: int) -> DocumentRow | None:
    row = conn.execute(f"SELECT {_DOC_COLS} FROM documents WHERE id = ?", (document_id,))
    found = row.fetchone()
    return _document(found) if found else None


def find_document_by_hash(conn: apsw.Connection, content_hash: str) -> DocumentRow | None:
    row = conn.execute(
        f"SELECT {_DOC_COLS} FROM documents WHERE content_hash = ? ORDER BY id LIMIT 1",
        (content_hash,),
    ).fetchone()
    return _document(row) if row else None


def find_documents_by_path(conn: apsw.Connection, path: str) -> list[DocumentRow]:
    """Documents known by ``path``: an agent document's uri or a folder-relative path.

    Both are stored redacted (``store/paths``): pass the name through ``shown_path``
    first, or a name holding a secret is never found, and would be if the guess in it
    were stored raw."""
    rows = conn.execute(
        f"SELECT {_DOC_COLS} FROM documents WHERE uri = ? UNION "
        f"SELECT {', '.join('d.' + c for c in _DOC_COLS.split(', '))} FROM documents d "
        "JOIN locations l ON l.document_id = d.id WHERE l.path = ? ORDER BY 1",
        (path, path),
    ).fetchall()
    return [_document(r) for r in rows]


def insert_document(conn: apsw.Connection, doc: NewDocument) -> int:
    """Insert a document and what it supersedes; its id.

    A large file's ``utf8`` is bound as bytes and stored as text by ``CAST``: SQLite
    reads a BLOB cast to TEXT as UTF-8; on PostgreSQL the connection binds a
    ``bytearray`` as text (``store/postgres/connection.py``), since PostgreSQL's cast of
    bytes to text would spell them out in hex."""
    (document_id,) = conn.execute(
        "INSERT INTO documents(doc_key, title, uri, kind, language, text, content_hash, "
        "doc_date, tags, created_at, updated_at, status) "
        "VALUES (?, ?, ?, ?, ?, CAST(? AS TEXT), ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            doc.doc_key,
            doc.title,
            doc.uri,
            doc.kind,
            doc.language,
            doc.text if doc.utf8 is None else doc.utf8,  # bytes: CAST makes them TEXT
            doc.content_hash,
            doc.doc_date,
            json.dumps(list(doc.tags), ensure_ascii=False),
            doc.created_at,
            doc.updated_at,
            doc.status,
        ),
    ).fetchall()[0]
    if doc.supersedes:
        conn.executemany(
            "INSERT INTO supersessions(document_id, supersedes) VALUES (?, ?) "
            "ON CONFLICT (document_id, supersedes) DO NOTHING",
            ((document_id, key) for key in doc.supersedes),
        )
    return document_id


def delete_document(conn: apsw.Connection, document_id: int) -> None:
    """Delete a document row; chunks and supersessions cascade. Unindex chunks first."""
    conn.execute("DELETE FROM documents WHERE id = ?", (document_id,))


def document_location_count(conn: apsw.Connection, document_id: int) -> int:
    return conn.execute(
        "SELECT COUNT(*) FROM locations WHERE document_id = ?", (document_id,)
    ).fetchone()[0]


# The rows a source listing pages through: its paths that hold a document.
_LISTED = "locations l JOIN documents d ON d.id = l.document_id WHERE l.source_id = ?"


def list_documents(
    conn: apsw.Connection, source_id: int, limit: int, offset: int
) -> list[tuple[DocumentRow, str, str | None]]:
    """A source's entries ``(document, path, note)``, one per path (a document held at two
    paths is listed twice), newest first; the path breaks ties, so pages never overlap or
    skip (issue 7 item 20; two paths may show alike, redacted: the row id breaks that
    tie). ``note`` is the location's reason: what the reader ignored in
    an indexed file. ``count_listed`` counts the same rows."""
    rows = conn.execute(
        f"SELECT {', '.join('d.' + c for c in _DOC_COLS.split(', '))}, l.path, l.reason "
        f"FROM {_LISTED} "
        "ORDER BY COALESCE(d.doc_date, d.updated_at) DESC, d.id DESC, l.path, l.id "
        "LIMIT ? OFFSET ?",
        (source_id, limit, offset),
    ).fetchall()
    return [(_document(r[:-2]), r[-2], r[-1]) for r in rows]


def count_listed(conn: apsw.Connection, source_id: int) -> int:
    """How many entries ``list_documents`` pages through for the source."""
    return conn.execute(f"SELECT COUNT(*) FROM {_LISTED}", (source_id,)).fetchone()[0]


def document_count(conn: apsw.Connection) -> int:
    """Documents in the whole library."""
    return conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]


def document_total(conn: apsw.Connection) -> tuple[int, int]:
    """(documents, chunks) in the whole library."""
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return document_count(conn), chunks


def document_opening(
    conn: apsw.Connection, document_id: int, chars: int
) -> tuple[str, str, str, str | None] | None:
    """``(title, first chars of its text, kind, doc_date)`` of a document, or None if gone."""
    return conn.execute(
        "SELECT title, substr(text, 1, ?), kind, doc_date FROM documents WHERE id = ?",
        (chars, document_id),
    ).fetchone()


def chunks_in_order(
    conn: apsw.Connection, document_id: int, after_ordinal: int = -1, limit: int = -1
) -> list[tuple[int, int, list[str], str]]:
    """``(chunk id, ordinal, heading path, text)`` of a document's chunks past
    ``after_ordinal``, in order, at most ``limit`` (-1: all)."""
    # No LIMIT for all: SQLite reads a negative one as none, PostgreSQL refuses it.
    bound, params = (" LIMIT ?", (limit,)) if limit >= 0 else ("", ())
    return [
        (cid, ordinal, json.loads(path), text)
        for cid, ordinal, path, text in conn.execute(
            "SELECT id, ordinal, heading_path, text FROM chunks "
            f"WHERE document_id = ? AND ordinal > ? ORDER BY ordinal{bound}",
            (document_id, after_ordinal, *params),
        )
    ]


# --- locations ---------------------------------------------------------------------------


def upsert_location(
    conn: apsw.Connection,
    source_id: int,
    path: StoredPath,
    document_id: int | None,
    *,
    state: str = "indexed",
    reason: str | None = None,
    size: int | None = None,
    mtime_ns: int | None = None,
    file_hash: str | None = None,
    seen_at: str | None = None,
    failed_under: str | None = None,
) -> None:
    """Record a location by its path's key; its shown path follows today's redaction.
    ``failed_under``: the reader environment a failed file failed in
    (``readers.environment``), None when the failure is worth retrying anyway."""
    conn.execute(
        "INSERT INTO locations(source_id, path, path_key, document_id, state, reason, size, "
        "mtime_ns, file_hash, seen_at, failed_under) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(source_id, path_key) DO UPDATE SET path = excluded.path, "
        "document_id = excluded.document_id, state = excluded.state, reason = excluded.reason, "
        "size = excluded.size, mtime_ns = excluded.mtime_ns, file_hash = excluded.file_hash, "
        "seen_at = excluded.seen_at, failed_under = excluded.failed_under",
        (source_id, path.shown, path.key, document_id, state, reason, size, mtime_ns,
         file_hash, seen_at, failed_under),
    )  # fmt: skip


def location_document_id(conn: apsw.Connection, source_id: int, key: str) -> int | None:
    """The document at the location whose path has ``key`` (``PathKeys.key``)."""
    row = conn.execute(
        "SELECT document_id FROM locations WHERE source_id = ? AND path_key = ?", (source_id, key)
    ).fetchone()
    return row[0] if row else None


def delete_location(conn: apsw.Connection, source_id: int, key: str) -> None:
    conn.execute("DELETE FROM locations WHERE source_id = ? AND path_key = ?", (source_id, key))


def first_location(conn: apsw.Connection, document_id: int) -> tuple[str, str, str] | None:
    """(source name, source kind, path) of the document's first location."""
    return conn.execute(
        "SELECT s.name, s.kind, l.path FROM locations l JOIN sources s ON s.id = l.source_id "
        "WHERE l.document_id = ? ORDER BY l.id LIMIT 1",
        (document_id,),
    ).fetchone()


# --- chunks ------------------------------------------------------------------------------


def chunk_ids(conn: apsw.Connection, document_id: int) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT id FROM chunks WHERE document_id = ? ORDER BY ordinal", (document_id,)
        )
    ]


def first_chunk_of(conn: apsw.Connection, document_ids: Sequence[int]) -> dict[int, int]:
    """Document id → its first chunk's id, for those of ``document_ids`` with chunks."""
    if not document_ids:
        return {}
    marks = ",".join("?" * len(document_ids))
    rows = conn.execute(
        f"SELECT c.document_id, c.id FROM chunks c WHERE c.document_id IN ({marks}) AND "
        "c.ordinal = (SELECT MIN(ordinal) FROM chunks WHERE document_id = c.document_id)",
        tuple(document_ids),
    ).fetchall()
    return dict(rows)


def first_chunks(conn: apsw.Connection, ids: Sequence[int]) -> list[int]:
    """The first chunk of each document the chunks ``ids`` belong to (its header: title,
    status, author and owner lines), in the order of ``ids``."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT c.id, f.id FROM chunks c JOIN chunks f ON f.document_id = c.document_id "
        f"AND f.ordinal = (SELECT MIN(ordinal) FROM chunks WHERE document_id = c.document_id) "
        f"WHERE c.id IN ({marks})",
        tuple(ids),
    ).fetchall()
    first = dict(rows)
    return list(dict.fromkeys(first[i] for i in ids if i in first))


def insert_chunks(conn: apsw.Connection, document_id: int, chunks: Sequence[Chunk]) -> list[int]:
    """Insert chunks of a document; the ids of those inserted, in chunk order. Returned
    by the insert itself: reading them back was a round trip per document more, which a
    PostgreSQL server pays on the network."""
    inserted = conn.executemany(
        "INSERT INTO chunks(document_id, ordinal, heading_path, start_line, end_line, text) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (
            (
                document_id,
                c.ordinal,
                json.dumps(list(c.heading_path), ensure_ascii=False),
                c.start_line,
                c.end_line,
                c.text,
            )
            for c in chunks
        ),
    )
    return [row[0] for row in inserted]


_SUPERSEDED_ON = (
    "(SELECT MIN(COALESCE(n.doc_date, n.updated_at)) FROM supersessions x "
    "  JOIN documents n ON n.id = x.document_id WHERE x.supersedes IN (d.doc_key, d.uri) "
    "  OR x.supersedes IN (SELECT path FROM locations WHERE document_id = d.id))"
)


def passages(
    conn: apsw.Connection, ids: Sequence[int], superseded: bool = True
) -> dict[int, PassageRow]:
    """Chunk id → passage with citation fields, for the ids given (missing ids are absent).

    ``superseded=False`` when no document supersedes another (``has_supersessions``): the
    per-row subquery for ``superseded_on`` was a sixth of this statement at 100 rows."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        "SELECT c.id, d.doc_key, d.title, COALESCE(d.uri, l.path), s.name, c.heading_path, "
        "c.start_line, c.end_line, c.text, d.doc_date, d.updated_at, "
        f"{_SUPERSEDED_ON if superseded else 'NULL'}, "
        "d.status, d.kind FROM chunks c JOIN documents d ON d.id = c.document_id "
        "LEFT JOIN locations l ON l.id = (SELECT MIN(id) FROM locations WHERE document_id = d.id) "
        f"LEFT JOIN sources s ON s.id = l.source_id WHERE c.id IN ({marks})",
        tuple(ids),
    ).fetchall()
    return {r[0]: PassageRow(*r[:5], tuple(json.loads(r[5])), *r[6:]) for r in rows}


@dataclass(frozen=True, slots=True)
class PassageHead:
    """What names and dates a passage, without its text or citation: its document's title
    and dates and its section's headings."""

    chunk_id: int
    title: str
    heading_path: tuple[str, ...]
    doc_date: str | None
    updated_at: str
    text: str = ""  # only when asked for (``passage_heads(with_text=True)``)


def passage_heads(
    conn: apsw.Connection, ids: Sequence[int], with_text: bool = False
) -> dict[int, PassageHead]:
    """Chunk id → its ``PassageHead``, for the ids given (missing ids are absent)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    text = "c.text" if with_text else "''"
    rows = conn.execute(
        f"SELECT c.id, d.title, c.heading_path, d.doc_date, d.updated_at, {text} FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})",
        tuple(ids),
    )
    return {r[0]: PassageHead(r[0], r[1], tuple(json.loads(r[2])), *r[3:]) for r in rows}


def passage_dates(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, str]:
    """Chunk id → its document's date (``doc_date``, else ``updated_at``)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return dict(
        conn.execute(
            "SELECT c.id, COALESCE(d.doc_date, d.updated_at) FROM chunks c "
            f"JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})",
            tuple(ids),
        ).fetchall()
    )


def has_supersessions(conn: apsw.Connection) -> bool:
    """Whether any document says it supersedes another (``supersessions`` has a row)."""
    return conn.execute("SELECT 1 FROM supersessions LIMIT 1").fetchone() is not None


def superseders(conn: apsw.Connection, doc_keys: Sequence[str]) -> dict[str, str]:
    """Document key → key of the earliest document that supersedes it (the one whose date
    is ``PassageRow.superseded_on``), for the keys given that are superseded at all."""
    if not doc_keys:
        return {}
    marks = ",".join("?" * len(doc_keys))
    found = conn.execute(
        "SELECT d.doc_key, (SELECT n.doc_key FROM supersessions x "
        "  JOIN documents n ON n.id = x.document_id WHERE x.supersedes IN (d.doc_key, d.uri) "
        "  OR x.supersedes IN (SELECT path FROM locations WHERE document_id = d.id) "
        "  ORDER BY COALESCE(n.doc_date, n.updated_at), n.id LIMIT 1) "
        f"FROM documents d WHERE d.doc_key IN ({marks})",
        tuple(doc_keys),
    ).fetchall()
    return {key: by for key, by in found if by is not None}


def iter_texts(conn: apsw.Connection, source_id: int | None) -> Iterable[tuple[str, str, str]]:
    """(doc key, display path, text) of every document (of one source), in id order."""
    scope = (
        ""
        if source_id is None
        else "WHERE d.id IN (SELECT document_id FROM locations WHERE source_id = ?)"
    )
    params = () if source_id is None else (source_id,)
    # apsw's cursor steps row by row; PostgreSQL's ``stream`` reads a server-side cursor
    # in batches, so a scan that stops early never fetches every text.
    run = getattr(conn, "stream", conn.execute)
    yield from run(
        f"SELECT d.doc_key, {_shown_as('d')}, d.text FROM documents d {scope} ORDER BY d.id",
        params,
    )


@dataclass(frozen=True, slots=True)
class LocationState:
    """What the last sync recorded for one file of a folder source (``path`` as shown,
    redacted; ``key`` the keyed hash of the raw path, ``store/paths``)."""

    path: str
    key: str
    document_id: int | None
    state: str
    reason: str | None
    size: int | None
    mtime_ns: int | None
    file_hash: str | None
    failed_under: str | None = None  # see ``upsert_location``


def source_locations(conn: apsw.Connection, source_id: int) -> dict[str, LocationState]:
    """A source's locations by their path's key (the raw path is not stored)."""
    rows = conn.execute(
        "SELECT path, path_key, document_id, state, reason, size, mtime_ns, file_hash, "
        "failed_under "
        "FROM locations WHERE source_id = ?",
        (source_id,),
    )
    return {r[1]: LocationState(*r) for r in rows}


def failed_locations(conn: apsw.Connection, source_id: int) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT path, COALESCE(reason, '') FROM locations WHERE source_id = ? AND state = 'failed' "
        "ORDER BY path",
        (source_id,),
    ).fetchall()


def location_of(
    conn: apsw.Connection, document_id: int, kind: str
) -> list[tuple[int, str, str, str]]:
    """(source id, source root, shown path, path key) of a document's locations in
    sources of ``kind``."""
    return conn.execute(
        "SELECT s.id, s.root, l.path, l.path_key FROM locations l "
        "JOIN sources s ON s.id = l.source_id WHERE l.document_id = ? AND s.kind = ? ORDER BY l.id",
        (document_id, kind),
    ).fetchall()


def get_location(conn: apsw.Connection, source_id: int, key: str) -> LocationState | None:
    row = conn.execute(
        "SELECT path, path_key, document_id, state, reason, size, mtime_ns, file_hash, "
        "failed_under FROM locations WHERE source_id = ? AND path_key = ?",
        (source_id, key),
    ).fetchone()
    return LocationState(*row) if row else None


def document_names(conn: apsw.Connection, limit: int) -> list[str]:
    """Document ids and the uris / paths they are known by (for "did you mean")."""
    rows = conn.execute(
        f"SELECT d.doc_key, {_shown_as('d')} FROM documents d ORDER BY d.id DESC LIMIT ?",
        (limit,),
    )
    return list(dict.fromkeys(name for pair in rows for name in pair))


def delete_everything(conn: apsw.Connection) -> None:
    """Empty every row table (a rebuild refills them from files, then rebuilds the FTS)."""
    for table in ("doc_relations", "chunks", "supersessions", "locations", "documents", "sources"):
        conn.execute(f"DELETE FROM {table}")  # fixed names, never user text


def near_duplicate_candidates(
    conn: apsw.Connection, document_id: int, title: str, limit: int
) -> list[tuple[int, str]]:
    """(id, text) of other documents with the same title, ASCII letters compared
    case-insensitively, as ``COLLATE NOCASE`` did (which PostgreSQL has not). Through
    the ``lower(title)`` index; both engines' ``lower`` folds ASCII letters only on the
    store's columns (SQLite's always, PostgreSQL's under their ``"C"`` collation), so
    the title given is folded alike here rather than by SQL, where PostgreSQL would fold
    a parameter under the database's locale."""
    return conn.execute(
        "SELECT id, text FROM documents WHERE lower(title) = ? AND id != ? ORDER BY id LIMIT ?",
        (title.translate(_ASCII_LOWER), document_id, limit),
    ).fetchall()


def record_near_duplicate(conn: apsw.Connection, a: int, b: int, similarity: float) -> None:
    """The pair, while both documents are still stored: the linking phase scores it in
    a read snapshot, and a writer may have removed one before its write (nothing then)."""
    low, high = min(a, b), max(a, b)
    conn.execute(
        "INSERT INTO near_duplicates(document_id, other_id, similarity) SELECT ?, ?, ? "
        "WHERE (SELECT COUNT(*) FROM documents WHERE id IN (?, ?)) = 2 "
        "ON CONFLICT (document_id, other_id) DO UPDATE SET similarity = excluded.similarity",
        (low, high, similarity, low, high),
    )


def near_duplicate_pairs(conn: apsw.Connection, limit: int) -> tuple[int, list[tuple]]:
    """How many pairs there are, and up to ``limit`` of them as (name, name, similarity)."""
    total = conn.execute("SELECT COUNT(*) FROM near_duplicates").fetchone()[0]
    pairs = conn.execute(
        f"SELECT {_shown_as('a')}, {_shown_as('b')}, n.similarity "
        "FROM near_duplicates n JOIN documents a ON a.id = n.document_id "
        "JOIN documents b ON b.id = n.other_id "
        "ORDER BY n.similarity DESC, n.document_id, n.other_id LIMIT ?",
        (limit,),
    ).fetchall()
    return total, pairs


# --- re-redaction under newer rules (ingest/reredact.py) ----------------------------------


def documents_after(conn: apsw.Connection, after_id: int, limit: int) -> list[DocumentRow]:
    """Up to ``limit`` documents with ids above ``after_id``, in id order (a resumable scan)."""
    rows = conn.execute(
        f"SELECT {_DOC_COLS} FROM documents WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
    ).fetchall()
    return [_document(r) for r in rows]


def update_document_text(
    conn: apsw.Connection,
    document_id: int,
    *,
    doc_key: str,
    title: str,
    uri: str | None,
    text: str,
    content_hash: str,
    tags: Sequence[str],
) -> None:
    """Replace a document's key and text fields in place: its id and dates stay."""
    conn.execute(
        "UPDATE documents SET doc_key = ?, title = ?, uri = ?, text = ?, content_hash = ?, "
        "tags = ? WHERE id = ?",
        (
            doc_key,
            title,
            uri,
            text,
            content_hash,
            json.dumps(list(tags), ensure_ascii=False),
            document_id,
        ),
    )


def user_documents_after(
    conn: apsw.Connection, after_id: int, limit: int
) -> list[tuple[int, str, str, str | None]]:
    """Up to ``limit`` documents with ids above ``after_id`` that a folder or an upload
    holds (not the ``agent`` source alone), in id order: id, kind, text, doc_date."""
    return conn.execute(
        "SELECT d.id, d.kind, d.text, d.doc_date FROM documents d WHERE d.id > ? AND EXISTS "
        "(SELECT 1 FROM locations l JOIN sources s ON s.id = l.source_id "
        " WHERE l.document_id = d.id AND s.kind != 'agent') ORDER BY d.id LIMIT ?",
        (after_id, limit),
    ).fetchall()


def set_doc_date(conn: apsw.Connection, document_id: int, doc_date: str) -> None:
    """A document's date, read again under newer rules (``ingest/redate``)."""
    conn.execute("UPDATE documents SET doc_date = ? WHERE id = ?", (doc_date, document_id))


def delete_chunks(conn: apsw.Connection, document_id: int) -> None:
    """Delete a document's chunk rows. Unindex them first."""
    conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))


def forget_folder_file_state(conn: apsw.Connection) -> int:
    """Clear the recorded size / mtime / hash of every folder file, so the next sync
    re-reads each one (failed files are retried too); returns how many locations."""
    cleared = conn.execute(
        "UPDATE locations SET size = NULL, mtime_ns = NULL, file_hash = NULL "
        "WHERE source_id IN (SELECT id FROM sources WHERE kind = 'folder') RETURNING id"
    )
    return len(cleared.fetchall())


def relabel_locations(conn: apsw.Connection, clean: Callable[[str], str]) -> int:
    """Pass every location's shown path and reason through ``clean`` (today's redaction)
    in place; how many rows changed. The raw path is not stored, so this is the best that
    can be done before the next sync stores each file's path redacted from the raw one."""
    changed = 0
    for location_id, path, reason in conn.execute(
        "SELECT id, path, reason FROM locations"
    ).fetchall():
        new_path, new_reason = clean(path), None if reason is None else clean(reason)
        if (new_path, new_reason) != (path, reason):
            conn.execute(
                "UPDATE locations SET path = ?, reason = ? WHERE id = ?",
                (new_path, new_reason, location_id),
            )
            changed += 1
    return changed


def agent_file_paths(conn: apsw.Connection, document_id: int) -> list[str]:
    """Paths (``<doc_key>.md`` under ``docs/``) of the agent / upload locations of a document."""
    rows = conn.execute(
        "SELECT l.path FROM locations l JOIN sources s ON s.id = l.source_id "
        "WHERE l.document_id = ? AND s.kind IN ('agent', 'upload') ORDER BY l.id",
        (document_id,),
    )
    return [r[0] for r in rows]
