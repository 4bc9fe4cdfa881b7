"""PostgreSQL's store schema and the rows modules' one SQL text (issue 24), on a real server.

- The schema (``store/postgres/schema.py``) applies, and has SQLite's tables as
  ``store/migrations.py`` leaves them: the same columns in the same order with the same
  types, nullability, keys, unique sets, foreign keys with their ``ON DELETE`` actions,
  indexes and ``names_log`` triggers; only the named tables are left out.
- Every statement the rows modules send (``store/documents.py`` and the others) is
  accepted by PostgreSQL as it stands: ``PREPARE`` of each, so a statement only SQLite
  understands fails here. The statements are collected by running the functions, not by
  reading the source: they are built from pieces (column lists, ``?`` marks per id,
  optional clauses), so only a run shows the text an engine gets. That the run reaches
  every statement is checked against the source: every SQL string in the modules must
  be part of a statement sent, and every function of theirs that takes a connection is
  called.
- The same calls on a SQLite library and on PostgreSQL read back the same rows, one by
  one, names_log entries and ids included.

The PostgreSQL connection is a minimal adapter here (psycopg, statements through
``dialect.to_postgres``); the store's own (``store/postgres/connection.py``) replaces it.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import apsw
import psycopg
import pytest
from psycopg.adapt import Dumper

from kb_mcp.chunk import Chunk
from kb_mcp.store import counts, documents, link_queue, meta, names_log, relations, summary
from kb_mcp.store.db import Database
from kb_mcp.store.documents import NewDocument
from kb_mcp.store.paths import StoredPath
from kb_mcp.store.postgres import schema
from kb_mcp.store.postgres.dialect import to_postgres
from kb_mcp.store.relations import Statement

ROWS_MODULES: tuple[ModuleType, ...] = (
    documents,
    relations,
    meta,
    link_queue,
    names_log,
    counts,
    summary,
)
# Tables SQLite makes later, beside the index they serve (FTS5, vectors): absent from a
# fresh library's catalog and from PostgreSQL's, so compared by this list alone.
MADE_LATER = {"chunks_fts", "chunks_fts_vocab", "docs_fts", "naive", "vec_*"}
SQLITE_TYPE_ON_POSTGRES = {"INTEGER": "bigint", "TEXT": "text", "REAL": "double precision"}


# --- engines ------------------------------------------------------------------------------


class Utf8AsText(Dumper):
    """A ``bytearray`` parameter is UTF-8 text (``NewDocument.utf8``, a large file's text):
    bound as text, its bytes unchanged."""

    oid = psycopg.adapters.types["text"].oid

    def dump(self, obj: bytearray) -> bytes:
        return bytes(obj)


class PgConnection:
    """What the rows modules use of apsw's connection, over psycopg: each statement in
    psycopg's parameter style (``to_postgres``), rows as tuples."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn
        conn.adapters.register_dumper(bytearray, Utf8AsText)

    def execute(self, sql: str, params: Any = ()) -> psycopg.Cursor:
        return self._conn.execute(to_postgres(sql), tuple(params))

    def executemany(self, sql: str, rows: Any) -> list[tuple]:
        """Every execution's rows in order (a ``RETURNING``'s), as apsw's cursor gives."""
        cursor = self._conn.cursor()
        cursor.executemany(to_postgres(sql), list(rows), returning=True)
        returned: list[tuple] = []
        while True:
            if cursor.description is not None:
                returned.extend(cursor.fetchall())
            if not cursor.nextset():
                return returned


class Recording:
    """A SQLite connection that keeps every statement sent through it."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self.sent: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> apsw.Cursor:
        self.sent.append(sql)
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> apsw.Cursor:
        self.sent.append(sql)
        return self._conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:  # the rest of apsw's connection, as it is
        return getattr(self._conn, name)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "home" / "kb.db")
    yield db
    db.close()


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection]:
    """The test's database with the store's schema, in autocommit as apsw is."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for _name, script in schema.MIGRATIONS:
            conn.execute(script)
        yield conn


# --- (a) the schema -------------------------------------------------------------------------


def sqlite_tables(conn: apsw.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


def pg_tables(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    ).fetchall()
    return {name for (name,) in rows}


def sqlite_columns(conn: apsw.Connection, table: str) -> list[tuple]:
    """(name, type as PostgreSQL spells it, not null, default, primary key) per column,
    in order."""
    return [
        (name, SQLITE_TYPE_ON_POSTGRES[kind], bool(notnull or pk), default, bool(pk))
        for _cid, name, kind, notnull, default, pk in conn.execute(f"PRAGMA table_info({table})")
    ]


def pg_columns(conn: psycopg.Connection, table: str) -> list[tuple]:
    keys = {
        column
        for (column,) in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (table,),
        )
    }
    return [
        (name, kind, nullable == "NO", default and re.sub(r"::[a-z ]+$", "", default), name in keys)
        for name, kind, nullable, default in conn.execute(
            "SELECT column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        )
    ]


def sqlite_constraints(conn: apsw.Connection, table: str) -> dict[str, Any]:
    """The table's unique column sets (keys included), foreign keys and named indexes."""
    unique = set()
    for _seq, index, is_unique, _origin, _partial in conn.execute(f"PRAGMA index_list({table})"):
        if is_unique:
            info = conn.execute(f"PRAGMA index_info({index})").fetchall()
            unique.add(tuple(name for _n, _cid, name in info))
    pk = [name for _c, name, _t, _nn, _d, key in conn.execute(f"PRAGMA table_info({table})") if key]
    if pk:
        unique.add(tuple(pk))
    foreign = {
        (column, parent, delete)
        for _i, _s, parent, column, _to, _update, delete, _m in conn.execute(
            f"PRAGMA foreign_key_list({table})"
        )
    }
    indexes = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
            "AND sql IS NOT NULL",
            (table,),
        )
    }
    return {"unique": unique, "foreign": foreign, "indexes": indexes}


def pg_constraints(conn: psycopg.Connection, table: str) -> dict[str, Any]:
    unique = {
        tuple(columns)
        for (columns,) in conn.execute(
            "SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i "
            "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s::regclass AND i.indisunique GROUP BY i.indexrelid",
            (table,),
        )
    }
    actions = {"a": "NO ACTION", "c": "CASCADE", "n": "SET NULL", "r": "RESTRICT"}
    foreign = {
        (column, parent, actions[delete])
        for column, parent, delete in conn.execute(
            "SELECT a.attname, c.confrelid::regclass::text, c.confdeltype FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
            "WHERE c.conrelid = %s::regclass AND c.contype = 'f'",
            (table,),
        )
    }
    indexes = {
        name
        for (name,) in conn.execute(
            "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = %s::regclass AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
            (table,),
        )
    }
    return {"unique": unique, "foreign": foreign, "indexes": indexes}


def test_schema_has_sqlites_tables_less_the_ones_named_left_out(
    sqlite_db: Database, pg: psycopg.Connection
) -> None:
    sqlite, postgres = sqlite_tables(sqlite_db.conn), pg_tables(pg)
    assert sqlite - postgres == set(schema.LEFT_OUT) - MADE_LATER
    assert postgres - sqlite == set()
    assert set(schema.LEFT_OUT) >= MADE_LATER


def test_every_shared_table_has_sqlites_columns_keys_and_indexes(
    sqlite_db: Database, pg: psycopg.Connection
) -> None:
    shared = sorted(sqlite_tables(sqlite_db.conn) & pg_tables(pg))
    assert len(shared) == 15
    for table in shared:
        assert pg_columns(pg, table) == sqlite_columns(sqlite_db.conn, table), table
        assert pg_constraints(pg, table) == sqlite_constraints(sqlite_db.conn, table), table


def test_text_compares_by_its_bytes_as_on_sqlite(pg: psycopg.Connection) -> None:
    """Every text column is in the "C" collation, whatever the database's locale: byte
    order, as SQLite's BINARY (``ORDER BY path`` lists alike), and a ``lower`` of ASCII
    letters only, as SQLite's (the near-duplicate title lookup)."""
    other = pg.execute(
        "SELECT table_name, column_name, collation_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND data_type = 'text' "
        "AND collation_name IS DISTINCT FROM 'C'"
    ).fetchall()
    assert other == []
    on_sqlite = apsw.Connection(":memory:").execute("SELECT lower('ÉTÉ')").fetchone()
    assert pg.execute("SELECT lower('ÉTÉ' COLLATE \"C\")").fetchone() == on_sqlite == ("ÉtÉ",)


def test_names_log_has_sqlites_triggers(sqlite_db: Database, pg: psycopg.Connection) -> None:
    on_sqlite = sqlite_db.conn.execute(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'"
    ).fetchall()
    on_postgres = pg.execute(
        "SELECT DISTINCT trigger_name, event_object_table FROM information_schema.triggers"
    ).fetchall()
    assert set(on_postgres) == set(on_sqlite)
    assert len(on_sqlite) == 8


# --- the calls both engines answer --------------------------------------------------------

NOW, LATER = "2026-01-02T03:04:05Z", "2026-02-03T04:05:06Z"


def document(key: str, title: str, text: str, **fields: Any) -> NewDocument:
    return NewDocument(
        **{
            "doc_key": key,
            "title": title,
            "uri": None,
            "kind": "markdown",
            "language": "en",
            "text": text,
            "content_hash": f"hash-{key}",
            "doc_date": None,
            "tags": ("ops",),
            "created_at": NOW,
            "updated_at": NOW,
            **fields,
        }
    )


def chunks(*texts: str) -> list[Chunk]:
    return [
        Chunk(i, ("Runbook", f"Step {i}"), 1 + 2 * i, 2 + 2 * i, t) for i, t in enumerate(texts)
    ]


class Calls:
    """Calls rows functions on one connection and keeps what each returned, in order."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.answers: list[tuple[str, Any]] = []
        self.called: set[str] = set()

    def __call__(
        self, fn: Callable[..., Any], *args: Any, shown: Callable = lambda r: r, **kw: Any
    ) -> Any:
        name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
        self.called.add(name)
        answer = fn(self.conn, *args, **kw)
        if inspect.isgenerator(answer):
            answer = list(answer)
        self.answers.append((name, shown(answer)))
        return answer


def run_the_rows_functions(call: Calls) -> None:
    """Every rows function, on a small library: two sources, four documents (one a large
    file's UTF-8 bytes), chunks, locations (one failed, one path repeated), relations,
    near-duplicates, supersessions, meta and the link queue; then the deletes."""
    rows = documents
    agent = call(rows.ensure_source, "agent", "agent", NOW)
    folder = call(rows.ensure_source, "notes", "folder", NOW, "/srv/notes", ("*.tmp",))
    uploads = call(rows.ensure_source, "uploads", "upload", NOW)
    # There already: the same id. (PostgreSQL's identity spends a value on the conflict,
    # so the sources are all made first: ids of the engines agree only in their order
    # once an upsert met a row, and no code reads more of them.)
    call(rows.ensure_source, "notes", "folder", LATER)
    call(rows.set_sync_state, folder, "syncing", None, None)
    call(rows.set_sync_state, folder, "idle", "1 file failed", LATER)
    call(rows.set_skipped, folder, '{"binary": 2}')
    call(rows.set_skipped, folder, '{"binary": 2}')
    call(rows.skipped_summaries)
    call(rows.get_source, "notes")
    call(rows.get_source, "nowhere")
    call(rows.list_sources)

    a = call(rows.insert_document, document("a", "Runbook: Deploy", "deploy\nthe app\n"))
    b = call(
        rows.insert_document,
        document(
            "b",
            "RUNBOOK: deploy",
            "deploy again\n",
            uri="agent://b",
            doc_date="2025-12-01",
            supersedes=("runbooks/deploy.md", "a", "a"),  # stated order kept, once each
        ),
    )
    large = bytearray("Überlänge: a large file's text, 100% UTF-8 ✓\n".encode())
    c = call(rows.insert_document, document("c", "Large", large.decode()[:9], utf8=large))
    d = call(rows.insert_document, document("d", "Other", "other\n", content_hash="hash-a"))
    for doc_id, texts in ((a, ("deploy", "the app")), (b, ("deploy again",)), (c, ("large",))):
        call(rows.insert_chunks, doc_id, chunks(*texts))
    call(rows.insert_chunks, d, chunks("other"))

    first = {"size": 10, "mtime_ns": 7, "file_hash": "f1", "seen_at": NOW}
    call(rows.upsert_location, folder, StoredPath("runbook.md", "k-a"), a, **first)
    call(  # the same file renamed: one row, its path updated
        rows.upsert_location,
        folder,
        StoredPath("runbooks/deploy.md", "k-a"),
        a,
        size=12,
        mtime_ns=1_764_000_000_123_456_789,
        file_hash="f2",
        seen_at=LATER,
    )
    call(rows.upsert_location, folder, StoredPath("copy/deploy.md", "k-a2"), a, seen_at=NOW)
    call(rows.upsert_location, folder, StoredPath("big.txt", "k-c"), c, seen_at=NOW)
    call(
        rows.upsert_location,
        folder,
        StoredPath("broken.pdf", "k-x"),
        None,
        state="failed",
        reason="not a PDF",
        failed_under="readers-1",
    )
    call(rows.upsert_location, agent, StoredPath("b.md", "k-b"), b)
    call(rows.upsert_location, uploads, StoredPath("d.md", "k-d"), d)

    call(rows.location_document_id, folder, "k-a")
    call(rows.location_document_id, folder, "k-none")
    call(rows.first_location, a)
    call(rows.get_location, folder, "k-x")
    call(rows.source_locations, folder)
    call(rows.failed_locations, folder)
    call(rows.location_of, a, "folder")
    call(rows.agent_file_paths, b)
    call(rows.document_location_count, a)
    call(rows.list_documents, folder, 10, 0)
    call(rows.list_documents, folder, 1, 1)
    call(rows.count_listed, folder)
    call(rows.document_count)
    call(rows.document_total)
    call(rows.document_opening, c, 5)
    call(rows.document_opening, 999, 5)
    call(rows.get_document, "c")
    call(rows.get_document_by_id, a)
    call(rows.find_document_by_hash, "hash-a")
    call(rows.find_documents_by_path, "runbooks/deploy.md")
    call(rows.find_documents_by_path, "agent://b")
    call(rows.document_names, 10)
    ids = call(rows.chunk_ids, a)
    call(rows.chunks_in_order, a)
    call(rows.chunks_in_order, a, 0, 1)
    call(rows.first_chunk_of, [a, b, c, 999])
    call(rows.first_chunk_of, [])
    everything = [*ids, *call(rows.chunk_ids, b), *call(rows.chunk_ids, c), 999]
    call(rows.first_chunks, everything)
    call(rows.first_chunks, [])
    call(rows.passages, everything)
    call(rows.passages, everything, False)
    call(rows.passages, [])
    call(rows.passage_heads, everything)
    call(rows.passage_heads, everything, True)
    call(rows.passage_heads, [])
    call(rows.passage_dates, everything)
    call(rows.passage_dates, [])
    call(rows.has_supersessions)
    call(rows.superseders, ["a", "b", "nothing"])
    call(rows.superseders, [])
    call(rows.iter_texts, None)
    call(rows.iter_texts, folder)
    call(rows.near_duplicate_candidates, b, "runbook: DEPLOY", 5)
    call(rows.near_duplicate_candidates, b, "Runbook Deploy", 5)
    call(rows.record_near_duplicate, b, a, 0.875)
    call(rows.record_near_duplicate, a, b, 0.9375)  # the pair again: its similarity updated
    call(rows.record_near_duplicate, c, d, 0.9375)
    call(rows.near_duplicate_pairs, 10)
    call(rows.documents_after, a, 2)
    call(rows.user_documents_after, 0, 10)
    call(rows.set_doc_date, a, "2025-11-30")
    call(
        rows.update_document_text,
        d,
        doc_key="d2",
        title="Other, redacted",
        uri="agent://d2",
        text="[REDACTED]\n",
        content_hash="hash-d2",
        tags=("x", "ä"),
    )

    rel = relations
    statement = Statement("supersedes", "a", None, "supersedes: a", 2, 2, "frontmatter")
    call(rel.insert_relation, b, statement, reverse=False, other=a, state=rel.RESOLVED)
    later = Statement("corrects", "the deploy runbook", "2026-01-01", "corrects it", 4, 5, "prose")
    call(rel.insert_relation, c, later, reverse=True, other=None, state=rel.PENDING)
    (pending,) = call(rel.open_references, c)
    call(rel.set_other, pending, a, rel.RESOLVED)
    call(rel.all_relations)
    call(rel.supersedes_of, b)
    call(rel.user_held)
    call(rel.user_held, b)
    call(rel.state_counts)
    call(rel.statements)
    call(rel.statements, pending.id)
    call(rel.relations_by_id, [pending.id, 999, pending.id])
    call(rel.relations_naming, a)
    call(rel.candidates)
    call(rel.candidates, a)
    call(rel.views_for, ["a"])
    call(rel.views_for, [])
    call(rel.related_chunks)
    call(rel.partners)
    call(rel.snapshot)

    call(meta.put, "fts_version", "7")
    call(meta.put, "fts_version", "8")  # set again: replaced
    call(meta.get, "fts_version")
    call(meta.delete, "fts_version")
    call(meta.get, "fts_version")

    queue = link_queue
    call(queue.enqueue, a)
    call(queue.enqueue, b)
    call(queue.enqueue, a)  # queued again: a new entry, after b's
    call(queue.enqueue_new, c)
    entries = call(queue.entries_after, 0, 10)
    call(queue.is_queued, a)
    call(queue.pending_count)
    call(queue.live_entries, [entry for entry, _doc, _chunks in entries] + [999])
    call(queue.live_entries, [])
    call(queue.done, entries[0][0])
    call(queue.is_queued, b)

    call(counts.source_counts)  # the folder's id range holds the agent's b: counted apart
    call(counts.repeated_paths)
    call(counts.failed_files, 10)
    call(summary.summarize)

    call(rows.delete_location, folder, "k-a2")
    call(rows.delete_chunks, c)
    call(rows.delete_document, d)
    call(rel.delete_stated_by, c)
    call(rows.forget_folder_file_state)
    call(rows.relabel_locations, lambda path: path.replace("deploy", "[gone]"))
    call(rows.source_locations, folder)
    call(rel.all_relations)
    log = names_log
    call(log.entries_after, 0, 1000, shown=lambda found: [(e.what, e.item) for e in found])
    newest, token = call(log.newest, shown=lambda pair: pair[0])
    call(log.token_at, newest, shown=lambda found: found == token)
    call(log.token_at, 99_999)
    call(log.prune, 2)
    call(log.entries_after, 0, 1000, shown=lambda found: [e.seq for e in found])
    call(rel.delete_all)
    call(rows.delete_source, agent)
    call(rows.list_sources)
    call(rows.delete_everything)
    call(rows.document_total)


def sqlite_answers(db: Database) -> tuple[list[tuple[str, Any]], Calls, list[str]]:
    recording = Recording(db.conn)
    call = Calls(recording)
    run_the_rows_functions(call)
    return call.answers, call, recording.sent


def test_both_engines_read_back_the_same_rows(sqlite_db: Database, pg: psycopg.Connection) -> None:
    on_sqlite, _, _ = sqlite_answers(sqlite_db)
    on_postgres = Calls(PgConnection(pg))
    run_the_rows_functions(on_postgres)
    assert len(on_postgres.answers) == len(on_sqlite)
    for (name, answer), (_, expected) in zip(on_postgres.answers, on_sqlite, strict=True):
        assert (name, answer) == (name, expected)


def test_a_large_files_utf8_bytes_are_stored_as_its_text(
    sqlite_db: Database, pg: psycopg.Connection
) -> None:
    text = "Überlänge ✓ 100%\n"
    for conn in (sqlite_db.conn, PgConnection(pg)):
        doc_id = documents.insert_document(
            conn, document("big", "Big", text[:4], utf8=bytearray(text.encode()))
        )
        assert documents.get_document_by_id(conn, doc_id).text == text


# --- (b) every statement on PostgreSQL ----------------------------------------------------


def rows_functions() -> set[str]:
    """Every function of the rows modules that takes a connection first."""
    found = set()
    for module in ROWS_MODULES:
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__ or name.startswith("_"):
                continue
            if next(iter(inspect.signature(fn).parameters), None) == "conn":
                found.add(f"{module.__name__.rsplit('.', 1)[-1]}.{name}")
    return found


_SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|FROM|WHERE|ORDER BY|GROUP BY|JOIN)\b")


def sql_pieces(module: ModuleType) -> set[str]:
    """The string literals of ``module``'s code that hold SQL (docstrings left out)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _SQL_WORDS.search(node.value)
    }


def test_the_run_reaches_every_rows_function_and_statement(sqlite_db: Database) -> None:
    _, call, sent = sqlite_answers(sqlite_db)
    assert rows_functions() - call.called == set()
    statements = "\n".join(sent)
    for module in ROWS_MODULES:
        unsent = {piece for piece in sql_pieces(module) if piece not in statements}
        if module is summary:  # SQLite's catalog, read by the SQLite file's opener only
            unsent -= {"SELECT name FROM sqlite_master"}
        assert unsent == set(), module.__name__


def prepared(sql: str) -> str:
    """``sql`` as PREPARE takes it: ``$1``, ``$2`` … for psycopg's ``%s``."""
    numbers = iter(range(1, 10_000))
    return re.sub(r"%[s%]", lambda m: f"${next(numbers)}" if m[0] == "%s" else "%", sql)


def test_postgres_accepts_every_statement_of_the_rows_modules(
    sqlite_db: Database, pg: psycopg.Connection
) -> None:
    _, _, sent = sqlite_answers(sqlite_db)
    refused = {}
    for sql in dict.fromkeys(sent):
        try:
            pg.execute(f"PREPARE rows_statement AS {prepared(to_postgres(sql))}")
            pg.execute("DEALLOCATE rows_statement")
        except psycopg.Error as exc:
            refused[sql] = str(exc).splitlines()[0]
    assert refused == {}
    assert len(set(sent)) > 100


@pytest.mark.parametrize(
    "sqlite_only",
    [
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        "SELECT supersedes FROM supersessions WHERE document_id = ? ORDER BY rowid",
        "SELECT COUNT(*) FROM locations NOT INDEXED",
        "SELECT id FROM documents WHERE title = ? COLLATE NOCASE",
        "UPDATE sources SET skipped = ?1 WHERE id = ?2 AND skipped IS NOT ?1",
    ],
)
def test_a_statement_only_sqlite_understands_is_refused(
    pg: psycopg.Connection, sqlite_only: str
) -> None:
    """The check above can fail: the forms the rows modules said before are refused."""
    with pytest.raises(psycopg.Error):
        pg.execute(f"PREPARE rows_statement AS {prepared(to_postgres(sqlite_only))}")
