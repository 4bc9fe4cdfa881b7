"""What the adversarial suite checks on a library after an attack (issue 11).

Read-only looks at a ``kb.db`` from outside the process that wrote it: a digest of every
table (a rejected write must leave it unchanged), the integrity checks SQLite and FTS5
offer, the consistency of derived rows with ``chunks`` (vectors, the entity graph's
mentions and facts) and with ``documents`` (document relations), the graph's own counts,
and leftovers of crashed writes. Each function names
what it found, so a failing assertion says which invariant broke and where.

A new derived table (the graph's ``mentions``, a watcher's state) joins these checks as
one more row of ``DERIVED_FROM_CHUNKS``.
"""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import apsw

from kb_mcp.embed.base import Embedder
from kb_mcp.fsutil import is_atomic_temp
from kb_mcp.index.fts import FTS_VERSION
from kb_mcp.library import Library
from kb_mcp.search.engine import CANDIDATE_DOCUMENTS
from kb_mcp.search.query import parse_query
from kb_mcp.settings import Settings

# Tables whose rows hang off a chunk: (table name or LIKE pattern, its chunk id column).
DERIVED_FROM_CHUNKS: tuple[tuple[str, str], ...] = (
    ("vec_codes_%", "chunk_id"),
    ("vec_floats_%", "chunk_id"),
    ("mentions", "chunk_id"),
    ("entity_facts", "chunk_id"),
)
# Graph invariants (``index/graph.py``): an entity's count is its mentions, an entity no
# chunk mentions is gone, a relation or fact joins two live entities. (name, SQL counting
# the rows that break it.)
GRAPH_CHECKS: tuple[tuple[str, str], ...] = (
    (
        "entities whose mentions count is not their mention rows",
        "SELECT count(*) FROM entities e WHERE e.mentions != "
        "(SELECT count(*) FROM mentions m WHERE m.entity_id = e.id)",
    ),
    (
        "entities no chunk mentions",
        "SELECT count(*) FROM entities e WHERE NOT EXISTS "
        "(SELECT 1 FROM mentions m WHERE m.entity_id = e.id)",
    ),
    (
        "mentions of no entity",
        "SELECT count(*) FROM mentions WHERE entity_id NOT IN (SELECT id FROM entities)",
    ),
    (
        "entity_relations of no entity",
        "SELECT count(*) FROM entity_relations WHERE a NOT IN (SELECT id FROM entities) "
        "OR b NOT IN (SELECT id FROM entities)",
    ),
    (
        "entity_facts of no entity",
        "SELECT count(*) FROM entity_facts WHERE a NOT IN (SELECT id FROM entities) "
        "OR b NOT IN (SELECT id FROM entities)",
    ),
)
# Document relations (``store/relations.py``): stated by a live document, each side a
# live document or NULL, ``resolved`` exactly when both sides are set, and never a
# document only an agent wrote changing one of the user's folders or uploads
# (``relations/relink.py``, issue 11).
RELATION_CHECKS: tuple[tuple[str, str], ...] = (
    (
        "doc_relations stated by no document",
        "SELECT count(*) FROM doc_relations WHERE stated_by NOT IN (SELECT id FROM documents)",
    ),
    (
        "doc_relations pointing at no document",
        "SELECT count(*) FROM doc_relations WHERE "
        "(from_id IS NOT NULL AND from_id NOT IN (SELECT id FROM documents)) OR "
        "(to_id IS NOT NULL AND to_id NOT IN (SELECT id FROM documents))",
    ),
    (
        "doc_relations whose state does not match their sides",
        "SELECT count(*) FROM doc_relations WHERE (state = 'resolved') != "
        "(from_id IS NOT NULL AND to_id IS NOT NULL)",
    ),
    (
        "doc_relations by which an agent's document changes one of the user's",
        "WITH held AS (SELECT l.document_id AS id FROM locations l JOIN sources s "
        "ON s.id = l.source_id WHERE s.kind != 'agent' AND l.document_id IS NOT NULL) "
        "SELECT count(*) FROM doc_relations WHERE state = 'resolved' "
        "AND stated_by NOT IN (SELECT id FROM held) "
        "AND (CASE WHEN from_id = stated_by THEN to_id ELSE from_id END) IN (SELECT id FROM held)",
    ),
    (
        "doc_relations not touching the document that stated them",
        "SELECT count(*) FROM doc_relations WHERE stated_by IS NOT from_id "
        "AND stated_by IS NOT to_id",
    ),
)
# Rows a search or a read may write without any caller asking for a change (counters the
# server keeps for itself); never user data.
VOLATILE_TABLES = frozenset({"meta"})


@contextmanager
def opened(db_path: Path) -> Iterator[apsw.Connection]:
    """A read-only connection to ``db_path`` (WAL lets it read beside live writers)."""
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(10_000)
    try:
        yield conn
    finally:
        conn.close()


def tables(conn: apsw.Connection) -> list[str]:
    """Every ordinary table (shadow tables of FTS5 included: they hold the index)."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]


def text_cells(db_path: Path) -> Iterator[tuple[str, str, str]]:
    """``(table, column, value)`` of every text (and decoded blob) cell of every table,
    the graph's, the relations' and ``meta``'s included: what a secrets scan reads."""
    with opened(db_path) as conn:
        for table in tables(conn):
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str):
                        yield table, column, value


def table_digest(db_path: Path, *, skip: frozenset[str] = VOLATILE_TABLES) -> dict[str, str]:
    """A sha256 over every row of each table, in rowid order, read in one snapshot.

    One digest per table, so a failing comparison names the tables that changed."""
    digests: dict[str, str] = {}
    with opened(db_path) as conn:
        conn.execute("BEGIN")
        for table in tables(conn):
            if table in skip:
                continue
            digest = hashlib.sha256()
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                digest.update(repr(row).encode())
            digests[table] = digest.hexdigest()
        conn.execute("COMMIT")
    return digests


def integrity_problems(db_path: Path) -> list[str]:
    """What ``PRAGMA integrity_check``, FTS5's integrity-check and the chunk links report."""
    problems: list[str] = []
    conn = apsw.Connection(str(db_path))
    conn.set_busy_timeout(10_000)
    try:
        found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if found != ["ok"]:
            problems += [f"integrity_check: {line}" for line in found]
        found = [tuple(row) for row in conn.execute("PRAGMA foreign_key_check")]
        problems += [f"foreign_key_check: {row}" for row in found]
        names = set(tables(conn))
        if "chunks_fts" in names:
            try:
                conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
            except apsw.Error as exc:
                problems.append(f"fts5 integrity-check: {exc}")
            problems += _fts_rows_match_chunks(conn)
            if "kw_totals" in names:
                problems += _keyword_totals_match_fts5(conn)
        if "docs_fts" in names:
            try:
                conn.execute("INSERT INTO docs_fts(docs_fts) VALUES ('integrity-check')")
            except apsw.Error as exc:
                problems.append(f"fts5 integrity-check of docs_fts: {exc}")
            if _fts_current(conn):  # else rebuilt from the chunks on first use
                problems += _counted(conn, DOCUMENT_INDEX_CHECKS)
        problems += _derived_rows_match_chunks(conn, names)
        if "entities" in names:
            problems += _counted(conn, GRAPH_CHECKS)
        if "doc_relations" in names:
            problems += _counted(conn, RELATION_CHECKS)
    finally:
        conn.close()
    return problems


# The documents' keyword index (``index/docs_fts.py``): one row per document, no other.
DOCUMENT_INDEX_CHECKS: tuple[tuple[str, str], ...] = (
    (
        "documents without a docs_fts row",
        "SELECT count(*) FROM documents WHERE id NOT IN (SELECT rowid FROM docs_fts)",
    ),
    (
        "docs_fts rows of no document",
        "SELECT count(*) FROM docs_fts WHERE rowid NOT IN (SELECT id FROM documents)",
    ),
)


def relation_problems(db_path: Path) -> list[str]:
    """Only the ``doc_relations`` checks: cheap enough to run after every fuzzed write."""
    with opened(db_path) as conn:
        return _counted(conn, RELATION_CHECKS)


def _fts_rows_match_chunks(conn: apsw.Connection) -> list[str]:
    """Contentless FTS: its rowids are the chunk ids once the index is current."""
    if not _fts_current(conn):
        return []  # a lazy migration pending: rebuilt from chunks on first use
    fts = conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    if fts != chunks:
        return [f"chunks_fts has {fts} rows for {chunks} chunks"]
    return []


def fts5_totals(conn: apsw.Connection) -> tuple[int, int, int]:
    """``(rows, head tokens, body tokens)`` of ``chunks_fts`` as FTS5 itself reports them,
    through its documented auxiliary-function API (``xRowCount``, ``xColumnTotalSize``):
    the figures its bm25() reads."""

    def totals(api: apsw.FTS5ExtensionApi) -> str:
        return f"{api.row_count} {api.column_total_size(0)} {api.column_total_size(1)}"

    conn.register_fts5_function("test_fts5_totals", totals)
    row = conn.execute("SELECT test_fts5_totals(chunks_fts) FROM chunks_fts LIMIT 1").fetchone()
    if row is None:  # no row to call it on: an empty index
        return 0, 0, 0
    rows, head, body = (int(n) for n in row[0].split())
    return rows, head, body


def stored_totals(conn: apsw.Connection) -> tuple[int, int, int]:
    """``(passages, head tokens, body tokens)`` as ``kw_totals`` holds them."""
    row = conn.execute("SELECT passages, head_tokens, body_tokens FROM kw_totals").fetchone()
    return (row[0], row[1], row[2]) if row else (0, 0, 0)


def _keyword_totals_match_fts5(conn: apsw.Connection) -> list[str]:
    """The keyword collection statistics (``index/keyword_totals.py``) are FTS5's own."""
    stored, own = stored_totals(conn), fts5_totals(conn)
    if stored != own:
        return [f"kw_totals holds {stored}, FTS5 reports {own}"]
    return []


def _fts_current(conn: apsw.Connection) -> bool:
    version = conn.execute("SELECT value FROM meta WHERE key = 'fts_version'").fetchone()
    return version is not None and version[0] == FTS_VERSION


def _derived_rows_match_chunks(conn: apsw.Connection, names: set[str]) -> list[str]:
    problems = []
    for pattern, column in DERIVED_FROM_CHUNKS:
        matching = [n for n in names if _like(pattern, n)]
        for table in matching:
            orphans = conn.execute(
                f'SELECT count(*) FROM "{table}" WHERE {column} NOT IN (SELECT id FROM chunks)'
            ).fetchone()[0]
            if orphans:
                problems.append(f"{table}: {orphans} rows point at no chunk")
    return problems


def _counted(conn: apsw.Connection, checks: tuple[tuple[str, str], ...]) -> list[str]:
    """One problem line per check whose SQL counts rows that break it."""
    problems = []
    for name, sql in checks:
        broken = conn.execute(sql).fetchone()[0]
        if broken:
            problems.append(f"{name}: {broken}")
    return problems


def _like(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("%") else name == pattern


def temp_leftovers(*folders: Path) -> list[Path]:
    """Every atomic-write temp file in ``folders`` (a crash can leave one; open cleans)."""
    return [p for f in folders if f.is_dir() for p in f.iterdir() if is_atomic_temp(p)]


def age(paths: list[Path], seconds: float) -> None:
    """Backdate ``paths`` by ``seconds``, as if the crash that left them were that old."""
    for path in paths:
        stat = path.stat()
        os.utime(path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def processes_in_group(pgid: int) -> list[int]:
    """Live pids whose process group is ``pgid`` (zombies excluded): orphans of a kill."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            found.append(int(entry.name))
    return found


def kill_group(pgid: int) -> None:
    """Clean up after a failed orphan check, so one failure does not leak into the next."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def segment_mismatches(library: Library, queries: Sequence[str]) -> list[str]:
    """Queries whose postings-segment ranking differs from FTS5's full OR (ids or scores):
    the segment must rank exactly as the FTS5 path does (``index/postings.py``)."""
    wrong = []
    for text in queries:
        query = parse_query(text)
        expression = query.match_expression()
        assert expression is not None
        full = library.fts.best_per_document(expression, CANDIDATE_DOCUMENTS)
        seg = library.fts.segment_best_per_document(query.match_units(), CANDIDATE_DOCUMENTS)
        assert seg is not None, text
        same_ids = [c for c, _ in seg] == [c for c, _ in full]
        if not same_ids or any(abs(a - b) > 1e-9 for (_, a), (_, b) in zip(seg, full, strict=True)):
            wrong.append(text)
    return wrong


def write_notes(folder: Path, notes: Mapping[str, str]) -> Path:
    """``folder`` (made, with its parents) holding ``notes`` (file name → text)."""
    folder.mkdir(parents=True)
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def keyword_library(root: Path, notes: Mapping[str, str], **settings: Any) -> Library:
    """A keyword-only library under ``root`` over a folder of ``notes`` (name → text),
    synced (the caller closes it); ``settings`` go to ``Settings``."""
    library = Library(Settings(home=root / "home", embedder="none", **settings))
    library.folders.add_folder(write_notes(root / "notes", notes))
    library.folders.sync()
    return library


def embedded_library(
    root: Path, notes: Mapping[str, str], embedder: Embedder, **settings: Any
) -> Library:
    """A library under ``root`` over a folder of ``notes`` (name → text), synced and fully
    embedded by ``embedder`` (the caller closes it); ``settings`` go to ``Settings``."""
    config = Settings(home=root / "home", embedder="local", **settings)
    library = Library(config, make_embedder=lambda provider, model: embedder)
    library.folders.add_folder(write_notes(root / "notes", notes))
    library.folders.sync()
    library.vectors.embed_pending()
    return library
