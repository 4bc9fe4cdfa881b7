"""Moving a SQLite library into an empty PostgreSQL library (issue 24): ``kb-mcp migrate``.

What is copied, and how:

- **Rows, ids kept.** Every table of the PostgreSQL store's schema that is not an index
  of its own (``REBUILT``) is copied from the SQLite library by ``COPY``, in the order
  its foreign keys ask (read from the server's catalog), with the ids the library has,
  and each identity is then set past the largest id copied (``setval``), so the next row
  the store inserts gets a fresh one. The list is the catalog's, not a hand list: a
  table the SQLite library has that is neither copied nor left out for a reason
  (``schema.LEFT_OUT``, ``REBUILT``) stops the move before anything is written, and a
  copied table's row count must match the source's after the copy. So a table added
  later cannot be left behind silently.
- **Vectors, not re-embedded.** Each embedding signature's float vectors are read from
  the SQLite library and written by binary ``COPY`` (``index/postgres/vectors.copy_vectors``),
  the HNSW index built once after the load (much faster than growing it row by row).
- **The keyword index, rebuilt** from the copied chunks through the PostgreSQL index's
  own writer (``index/postgres/keyword.add_index_rows``: the rows ingestion writes), then
  merged into packed lists once the copy has committed. FTS5 and the SQLite postings
  segment are SQLite's own formats.

**One transaction.** Everything but the keyword merge commits at once, so a move that
dies (kill -9, a lost connection, a full disk) leaves the target as it was: empty, and
the move can simply run again. The merge after it only repacks what is committed; a
move killed during it left a complete library whose keyword rows wait in the delta
(searchable; the library merges them when due). The transaction holds the library's
write lock throughout (``PostgresDatabase.write``): a server started on the target
meanwhile waits, or gets ``Conflict``, rather than writing beside the copy.

**Only into an empty library.** A target whose copied tables hold any row (``meta``
aside: opening a library writes a few settings there, and the source's replace them) is
refused before anything is written: merging two libraries would renumber ids.

Read side: the SQLite library is read in one snapshot (``read_snapshot``), so a server
writing to it meanwhile does not tear the copy; nothing is written to it (opening it
migrates its schema first, as any command does).
"""

from __future__ import annotations

import contextlib
import graphlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_mcp.errors import InvalidInput, NotFound, Refused
from kb_mcp.index import docs_fts
from kb_mcp.index import vectors as sqlite_vectors
from kb_mcp.store.db import Database, read_snapshot
from kb_mcp.store.postgres import schema

if TYPE_CHECKING:
    import apsw
    import psycopg

    from kb_mcp.store.postgres.database import PostgresDatabase

# Tables of the PostgreSQL library the move makes rather than copies, and why (a name
# ending in ``*`` stands for every table it starts). SQLite's own tables the PostgreSQL
# schema leaves out are ``schema.LEFT_OUT``.
REBUILT: dict[str, str] = {
    "kw_*": "the keyword index of passages: rebuilt from the copied chunks",
    "kwdoc_*": "the keyword index of whole documents: rebuilt from the copied chunks",
    "vec_*": "vectors: copied per signature by binary COPY, the HNSW index built after",
    "kb_*": "the PostgreSQL engine's own: the change stamp and the schema's version",
}
# Copied tables that triggers write while the others are copied (``names_log``: a
# document or relation row inserted): copied last, after those rows are dropped, so the
# table holds the source's entries only.
WRITTEN_BY_TRIGGERS = ("names_log",)
# Tables a library that was opened but never written to may already hold rows in.
SETTINGS_TABLES = ("meta",)
# Keyword rows per call of the index's writer (one COPY of their terms).
KEYWORD_BATCH = 2_000
# How often a second session reads an index build's progress (``_watching_build``).
BUILD_WATCH_S = 2.0

# ``progress(verb, noun)``: a context manager around a step, giving ``report(done, total)``.
Progress = Callable[[str, str], AbstractContextManager[Callable[[int, int], None]]]


@dataclass(frozen=True, slots=True)
class MoveReport:
    """What a move copied, and how long it took."""

    target: str  # the target's URL without its secrets
    tables: int
    rows: int
    documents: int
    chunks: int
    vectors: int
    signatures: int
    seconds: float
    nul_rows: int = 0  # rows whose text held NUL, stored with U+FFFD (``_copy_table``)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def sqlite_tables(conn: apsw.Connection) -> set[str]:
    """The SQLite library's own tables: neither SQLite's bookkeeping nor an FTS5 table's
    shadow tables (``PRAGMA table_list`` says which)."""
    return {
        name
        for _schema, name, kind, *_ in conn.execute("PRAGMA main.table_list")
        if kind in ("table", "virtual") and not name.startswith("sqlite_")
    }


def postgres_tables(pg: psycopg.Connection) -> list[str]:
    """The PostgreSQL library's tables, each after those its foreign keys reference."""
    names = [
        row[0]
        for row in pg.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relkind IN ('r', 'p') "
            "AND c.relnamespace = current_schema()::regnamespace"
        )
    ]
    order = graphlib.TopologicalSorter({name: set() for name in names})
    for child, parent in pg.execute(
        "SELECT c.relname, p.relname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "JOIN pg_class p ON p.oid = k.confrelid WHERE k.contype = 'f' "
        "AND k.connamespace = current_schema()::regnamespace"
    ):
        if child != parent:
            order.add(child, parent)
    return list(order.static_order())


def copied_tables(source: apsw.Connection, pg: psycopg.Connection) -> list[str]:
    """The tables a move copies row for row, in the order to copy them; an internal error
    naming any table of either library that is neither copied nor made some other way."""
    in_postgres = postgres_tables(pg)
    copied = [t for t in in_postgres if not _matches(t, REBUILT)]
    in_sqlite = sqlite_tables(source)
    unknown = sorted(
        (in_sqlite - set(copied) - {t for t in in_sqlite if _matches(t, schema.LEFT_OUT)})
        | (set(copied) - in_sqlite)
    )
    if unknown:
        raise RuntimeError(  # a bug: a table added to one schema and not to the move
            f"the move does not know the table(s) {', '.join(unknown)}; nothing was copied"
        )
    triggered = [t for t in copied if t in WRITTEN_BY_TRIGGERS]
    return [t for t in copied if t not in triggered] + triggered


def _columns(source: apsw.Connection, pg: psycopg.Connection, table: str) -> list[str]:
    """The table's columns in the SQLite library, each one the PostgreSQL table has (a
    column that only PostgreSQL has keeps its default)."""
    mine = [row[1] for row in source.execute(f"PRAGMA table_info({table})")]
    theirs = {
        row[0]
        for row in pg.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped",
            (table,),
        )
    }
    missing = [c for c in mine if c not in theirs]
    if missing:
        raise RuntimeError(
            f"the PostgreSQL table {table} has no column {', '.join(missing)}; nothing was copied"
        )
    return mine


def _count(conn: Any, table: str) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _refuse_unless_empty(pg: psycopg.Connection, tables: list[str], where: str) -> None:
    held = [
        t
        for t in tables
        if t not in SETTINGS_TABLES
        and pg.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]
    ]
    if held:
        raise Refused(
            f"the PostgreSQL library at {where} is not empty (it holds rows in "
            f"{', '.join(held[:4])}{', …' if len(held) > 4 else ''}); nothing was copied",
            hint="move into a new, empty database (`kb-mcp pg init --database NAME` prints "
            "the SQL that makes one)",
        )


def _copy_table(
    source: apsw.Connection, pg: psycopg.Connection, table: str, report: Callable[[int], None]
) -> tuple[int, int]:
    """COPY the table's rows, ids kept; how many, and how many held a NUL character.

    SQLite's text may hold U+0000, PostgreSQL's cannot; ``add_document`` refuses it now,
    but an older library may keep some. It is stored as U+FFFD, as a reader's NUL is
    (``ingest/normalize``): one character for one, so every line and column stays."""
    columns = _columns(source, pg, table)
    names = ", ".join(columns)
    if table in WRITTEN_BY_TRIGGERS or table in SETTINGS_TABLES:
        # the triggers' rows for this copy's inserts; settings an empty library's first
        # opening wrote, which describe none of the copied rows
        pg.execute(f"DELETE FROM {table}")
    copied = held_nul = 0
    with pg.cursor().copy(f"COPY {table}({names}) FROM STDIN") as copy:
        for row in source.execute(f"SELECT {names} FROM {table}"):
            if any(isinstance(value, str) and "\x00" in value for value in row):
                row = tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row)
                held_nul += 1
            copy.write_row(row)
            copied += 1
            if copied % 10_000 == 0:
                report(copied)
    report(copied)
    return copied, held_nul


def _advance_identities(pg: psycopg.Connection, tables: list[str]) -> None:
    """Every identity of the copied tables past the largest id copied (an identity does
    not move for ids given explicitly)."""
    for table, column in pg.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE is_identity = 'YES' AND table_schema = current_schema() "
        "AND table_name = ANY(%s)",
        (tables,),
    ).fetchall():
        pg.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, %s), "
            f"COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)",
            (table, column),
        )


def _batches(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(rows)
    while batch := list(itertools.islice(it, size)):
        yield batch


def _index_keywords(
    source: apsw.Connection, pg: psycopg.Connection, chunks: int, documents: int, step: Progress
) -> None:
    """The PostgreSQL keyword indexes of passages and of whole documents, written from the
    SQLite library's chunks as ingestion writes them (``columns.index_row``)."""
    from kb_mcp.index.postgres import keyword
    from kb_mcp.index.postgres.keyword_copy import chunk_rows

    with step("indexing", "passages") as report:
        done = 0
        ids = (row[0] for row in source.execute("SELECT id FROM chunks ORDER BY id"))
        for batch in _batches(ids, KEYWORD_BATCH):
            rows = chunk_rows(source, batch)
            keyword.add_index_rows(pg, [(cid, head, body) for cid, _doc, head, body in rows])
            done += len(batch)
            report(done, chunks)
        report(done, chunks)
    with step("indexing", "documents") as report:
        done = 0
        for batch in _batches(docs_fts.document_rows(source), KEYWORD_BATCH):
            keyword.add_index_rows(pg, batch, keyword.DOCUMENTS)
            done += len(batch)
            report(done, documents)
        report(done, documents)


def _copy_vectors(
    source: apsw.Connection,
    pg: psycopg.Connection,
    connect: Callable[[], psycopg.Connection],
    step: Progress,
    build_memory: str | None,
) -> int:
    """Each signature's vectors by binary COPY, its HNSW index built after (with
    ``build_memory`` as its ``maintenance_work_mem``, when given); how many."""
    from kb_mcp.index.postgres import vectors as pg_vectors

    copied = 0
    for row in sqlite_vectors.signatures(source):
        total, before = sqlite_vectors.totals(source, row.id)[0], copied
        with step("copying", "vectors") as report:
            pg_vectors.create_tables(pg, row.key, row.dims, index=False)
            for ids, matrix in sqlite_vectors.iter_vectors(source, row.id):
                copied += pg_vectors.copy_vectors(pg, row.id, ids, matrix)
                report(copied - before, total)
        with step("indexing", "vectors") as report, _watching_build(pg, connect, total, report):
            pg_vectors.build_index(pg, row.key, row.dims, memory=build_memory)
    return copied


@contextmanager
def _watching_build(
    pg: psycopg.Connection,
    connect: Callable[[], psycopg.Connection],
    vectors: int,
    report: Callable[[int, int], None],
) -> Iterator[None]:
    """Report an index build's progress while ``pg`` runs it: the vectors it has put in
    the graph, from the server's own progress view (``pg_stat_progress_create_index``),
    read by a second session every ``BUILD_WATCH_S``. A 1M-vector HNSW build takes about
    ten minutes, and migrate said nothing meanwhile. The watcher's failure (a role
    allowed one connection) only stops the reports; the last one is the whole table."""
    builder, stop = pg.info.backend_pid, threading.Event()

    def watch() -> None:
        with contextlib.suppress(Exception), connect() as watcher:
            while not stop.wait(BUILD_WATCH_S):
                row = watcher.execute(
                    "SELECT tuples_done FROM pg_stat_progress_create_index WHERE pid = %s",
                    (builder,),
                ).fetchone()
                if row and row[0]:
                    report(min(row[0], vectors), vectors)

    watcher = threading.Thread(target=watch, name="kb-mcp index build", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
    if vectors:
        report(vectors, vectors)


def _quiet(_verb: str, _noun: str) -> AbstractContextManager[Callable[[int, int], None]]:
    return nullcontext(lambda _done, _total: None)


def move_library(
    home_db: Path,
    target: PostgresDatabase,
    progress: Progress | None = None,
    build_memory: str | None = None,
) -> MoveReport:
    """Copy the SQLite library ``home_db`` (a home's ``kb.db``) into the empty PostgreSQL
    library ``target`` (migrated: ``PostgresDatabase`` did it on open), in one
    transaction; then merge its keyword index. Nothing is embedded. ``build_memory``
    (``"4GB"``) is the vector index builds' ``maintenance_work_mem`` (``build_memory_note``)."""
    step = progress or _quiet
    check_source(home_db)
    started = time.monotonic()
    source_db = Database(home_db)
    try:
        source = source_db.conn
        with read_snapshot(source), target.write() as conn, conn.pinned() as pg:
            tables = copied_tables(source, pg)
            _refuse_unless_empty(pg, tables, target.where)
            counts = {t: _count(source, t) for t in tables}
            total, rows, nul_rows = sum(counts.values()), 0, 0
            with step("copying", "rows") as report:
                for table in tables:
                    before = rows
                    copied, held_nul = _copy_table(
                        source, pg, table, lambda n, b=before: report(b + n, total)
                    )
                    rows, nul_rows = rows + copied, nul_rows + held_nul
            _advance_identities(pg, tables)
            landed = {t: _count(pg, t) for t in tables}
            if landed != counts:  # a trigger or a cascade wrote or took rows: a bug here
                differ = {t: (counts[t], landed[t]) for t in tables if counts[t] != landed[t]}
                raise RuntimeError(f"copied row counts differ (source, target): {differ}")
            vectors = _copy_vectors(source, pg, target.connect, step, build_memory)
            _index_keywords(source, pg, counts["chunks"], counts["documents"], step)
        _merge_keywords(target, step)
    finally:
        source_db.close()
    return MoveReport(
        target=target.where,
        tables=len(tables),
        rows=total,
        documents=counts["documents"],
        chunks=counts["chunks"],
        vectors=vectors,
        signatures=counts["embedding_signatures"],
        seconds=time.monotonic() - started,
        nul_rows=nul_rows,
    )


def _merge_keywords(target: PostgresDatabase, step: Progress) -> None:
    """Pack the committed keyword rows (``keyword_merge``), as the library does when its
    delta grows; a search reads them the same either way, faster packed."""
    from kb_mcp.index.postgres import keyword, keyword_merge

    with step("merging", "keyword indexes") as report:
        report(0, 2)  # said at the start: at 1M passages each merge takes tens of minutes
        for n, tables in enumerate((keyword.PASSAGES, keyword.DOCUMENTS), start=1):
            keyword_merge.merge(target.connect, tables=tables)
            report(n, 2)


def build_memory_note(home_db: Path, target: PostgresDatabase, build_memory: str | None) -> str:
    """What the vector index builds will have against what they need, said before the
    move starts; ``InvalidInput`` for a ``build_memory`` the server does not read as a size.

    An HNSW build is much faster while its graph fits ``maintenance_work_mem`` (pgvector's
    README, "Index build time"); past it, pgvector says so in a notice and goes on on disk.
    A server's default is 64 MB, which holds about 28,000 vectors of 384 dims, where a
    1M-vector library needs about 2.3 GB (docs/scale.md). The setting is the server's; a
    role may raise it for its own session, which is what ``--build-memory`` does, for the
    build alone. Empty when there is nothing to say."""
    import psycopg

    from kb_mcp.index.postgres import vectors as pg_vectors

    source_db = Database(home_db)
    try:
        needed = sum(
            pg_vectors.graph_bytes(sqlite_vectors.totals(source_db.conn, row.id)[0], row.dims)
            for row in sqlite_vectors.signatures(source_db.conn)
        )
    finally:
        source_db.close()
    with target.connect() as pg:  # set for this session, closed after: the server checks it
        try:
            if build_memory is not None:
                pg.execute("SELECT set_config('maintenance_work_mem', %s, false)", (build_memory,))
        except psycopg.errors.InvalidParameterValue as exc:
            raise InvalidInput(
                f"--build-memory {build_memory!r} is not a memory size the server takes: "
                f"{exc.diag.message_primary}",
                hint="a number and a unit, as PostgreSQL writes them: 512MB, 4GB",
            ) from exc
        row = pg.execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))")
        (have,) = row.fetchone() or (0,)
    if needed <= have:
        return ""
    return (
        f"the vector index's graph needs about {_size(needed)} to build in memory and "
        + (
            f"--build-memory gives it {_size(have)}"
            if build_memory
            else f"the server's maintenance_work_mem is {_size(have)}"
        )
        + ": the rest is built on disk, many times slower. "
        "If the server has the memory, stop and rerun with --build-memory "
        f"{_size(needed * 5 // 4)}."
    )


def _size(n: int) -> str:
    """``n`` bytes as PostgreSQL writes a memory size, rounded up to a whole MB or GB."""
    mb = -(-n // 2**20)
    return f"{-(-mb // 1024)}GB" if mb >= 1024 else f"{mb}MB"


def check_source(home_db: Path) -> None:
    """``NotFound`` unless ``home_db`` is a file (opening it would make an empty library)."""
    if not home_db.is_file():
        raise NotFound(
            f"no SQLite library at {home_db}",
            hint="give the home whose library to move with --home (or KB_MCP_HOME)",
        )


def check_target(url: str) -> str:
    """``url`` if it names a PostgreSQL database, else ``InvalidInput`` (never quoting it)."""
    from kb_mcp.store.postgres.url import check, is_postgres

    if not is_postgres(url):
        raise InvalidInput(
            "the target is not a postgresql:// URL",
            hint="kb-mcp migrate --to postgresql://USER@HOST:5432/DATABASE (the password "
            "in a pgpass file or PGPASSWORD)",
        )
    return check(url)
