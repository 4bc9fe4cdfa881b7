"""Database: migrations, write transactions, deadlines and per-thread connections.

Runs on a real SQLite file in ``tmp_path`` built by the production migrations. Guards
against: half-applied schemas, a newer database silently opened by an older kb-mcp,
writes that survive an exception, queries that hang, and leaked connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import apsw
import pytest
from inline_snapshot import snapshot

from kb_mcp.errors import Conflict, Unavailable
from kb_mcp.store import db as store_db
from kb_mcp.store.db import BULK_CACHE_KIB, DEADLINE_WALL_FACTOR, Database, QueryTimeout
from kb_mcp.store.migrations import MIGRATIONS, Migrated, migrate, schema_version

T = TypeVar("T")

# Count forever; only a deadline stops them.
_COUNTER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
ENDLESS = _COUNTER + "SELECT max(x) FROM c"
ENDLESS_INSERT = "INSERT INTO meta(key, value) " + _COUNTER + "SELECT x, x FROM c"


class Boom(Exception):
    pass


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "kb.db"


@pytest.fixture
def db(db_path: Path) -> Iterator[Database]:
    opened = Database(db_path)
    try:
        yield opened
    finally:
        opened.close()


def in_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread and return its result (or raise its exception)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def other_reader(path: Path, sql: str) -> list[tuple]:
    """Rows as seen by a separate connection, i.e. only what was committed."""
    conn = apsw.Connection(str(path))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def meta_keys(path: Path) -> list[str]:
    return [row[0] for row in other_reader(path, "SELECT key FROM meta ORDER BY key")]


def schema(path: Path) -> list[tuple]:
    return other_reader(path, "SELECT type, name, sql FROM sqlite_master ORDER BY name")


def test_migrate_creates_schema_at_latest_version(db: Database, db_path: Path) -> None:
    assert db_path.is_file()
    assert schema_version(db.conn) == len(MIGRATIONS)
    tables = db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert [t[0] for t in tables] == snapshot(
        [
            "chunks",
            "doc_relations",
            "documents",
            "embedding_signatures",
            "entities",
            "entity_facts",
            "entity_relations",
            "kw_delta",
            "kw_postings",
            "kw_segment",
            "kw_totals",
            "link_queue",
            "locations",
            "mentions",
            "meta",
            "names_log",
            "near_duplicates",
            "sources",
            "sqlite_sequence",
            "supersessions",
        ]
    )


def test_database_connection_pragmas(db: Database) -> None:
    assert db.query("PRAGMA journal_mode") == [("wal",)]
    assert db.query("PRAGMA foreign_keys") == [(1,)]


def test_bulk_cache_grows_the_page_cache_while_a_sync_writes_then_restores_it(
    db: Database,
) -> None:
    """issue 10 (ingest speed): a sync's writer connection gets a larger page cache for
    its batches (``Database.bulk_cache``), and SQLite's default again afterwards, even
    when the sync fails, so a server's connections do not keep it."""
    default = db.conn.execute("PRAGMA cache_size").fetchone()[0]
    with db.bulk_cache():
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == -BULK_CACHE_KIB
    assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == default
    with pytest.raises(RuntimeError), db.bulk_cache():
        raise RuntimeError("the sync failed")
    assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == default
    assert default != -BULK_CACHE_KIB


def test_migrate_on_reopen_is_a_no_op(db_path: Path) -> None:
    first = Database(db_path)
    with first.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('kept', 'yes')")
    before = schema(db_path)
    first.close()

    second = Database(db_path)
    try:
        assert schema(db_path) == before
        assert migrate(second.conn) == Migrated(len(MIGRATIONS), ())
        assert schema(db_path) == before
        assert second.query("SELECT value FROM meta WHERE key = 'kept'") == [("yes",)]
    finally:
        second.close()


def test_migrate_newer_database_is_unavailable(db_path: Path) -> None:
    Database(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()

    with pytest.raises(Unavailable) as caught:
        Database(db_path)
    assert f"schema version {len(MIGRATIONS) + 1}" in caught.value.message
    assert f"({len(MIGRATIONS)})" in caught.value.message
    assert caught.value.hint is not None and "upgrade kb-mcp" in caught.value.hint


def test_migration_15_keeps_supersessions_in_stated_order_and_folds_titles_by_index(
    db_path: Path,
) -> None:
    """A library from before the one SQL text (issue 24): its supersessions get ids in
    the order they were stated (their rowids), read back in that order without
    ``rowid``, and the near-duplicate title lookup goes through the ``lower(title)``
    index that replaced the ``COLLATE NOCASE`` one."""
    from kb_mcp.store import documents, relations

    db = Database(db_path)
    with db.write() as conn:  # as migration 14 left the two
        conn.execute("DROP TABLE supersessions")
        conn.execute(
            "CREATE TABLE supersessions (document_id INTEGER NOT NULL REFERENCES "
            "documents(id) ON DELETE CASCADE, supersedes TEXT NOT NULL, "
            "PRIMARY KEY (document_id, supersedes))"
        )
        conn.execute("DROP INDEX documents_title")
        conn.execute("CREATE INDEX documents_title ON documents(title COLLATE NOCASE)")
        conn.execute(
            "INSERT INTO documents(doc_key, title, kind, text, content_hash, created_at, "
            "updated_at) VALUES ('new', 'Deploy', 'markdown', 't', 'h', 'now', 'now')"
        )
        conn.executemany(
            "INSERT INTO supersessions(document_id, supersedes) VALUES (1, ?)",
            [("zeta",), ("alpha",), ("mid",)],
        )
    db.conn.execute("PRAGMA user_version = 14")
    db.close()

    db = Database(db_path)
    try:
        assert relations.supersedes_of(db.conn, 1) == ("zeta", "alpha", "mid")
        assert db.query("SELECT id, supersedes FROM supersessions ORDER BY id")[0] == (1, "zeta")
        assert documents.near_duplicate_candidates(db.conn, 2, "DEPLOY", 5) == [(1, "t")]
        plan = db.query(
            "EXPLAIN QUERY PLAN SELECT id FROM documents WHERE lower(title) = ? AND id != ?",
            ("deploy", 2),
        )
        assert "INDEX documents_title (<expr>=?)" in plan[0][-1]
    finally:
        db.close()


def test_write_commits(db: Database, db_path: Path) -> None:
    with db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
    assert meta_keys(db_path) == ["a"]


def test_write_is_invisible_to_other_connections_until_commit(db: Database, db_path: Path) -> None:
    with db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        assert meta_keys(db_path) == []
    assert meta_keys(db_path) == ["a"]


def test_write_rolls_back_on_exception(db: Database, db_path: Path) -> None:
    error = Boom()
    with pytest.raises(Boom) as caught, db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        raise error
    assert caught.value is error
    assert meta_keys(db_path) == []
    assert db.query("SELECT count(*) FROM meta") == [(0,)]


def test_write_usable_again_after_rollback(db: Database, db_path: Path) -> None:
    with pytest.raises(Boom), db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        raise Boom
    with db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('b', '2')")
    assert meta_keys(db_path) == ["b"]


def test_write_nested_joins_outer_transaction(db: Database, db_path: Path) -> None:
    with db.write() as outer:
        outer.execute("INSERT INTO meta(key, value) VALUES ('outer', '1')")
        with db.write() as inner:
            assert inner is outer
            inner.execute("INSERT INTO meta(key, value) VALUES ('inner', '2')")
        assert meta_keys(db_path) == []  # the inner block did not commit on its own
    assert meta_keys(db_path) == ["inner", "outer"]


def test_write_nested_exception_caught_inside_outer_still_commits_inner_rows(
    db: Database, db_path: Path
) -> None:
    """No savepoint: the inner block's rows stay in the outer transaction and commit."""
    with db.write() as outer:
        outer.execute("INSERT INTO meta(key, value) VALUES ('outer', '1')")
        with pytest.raises(Boom), db.write() as inner:
            inner.execute("INSERT INTO meta(key, value) VALUES ('inner', '2')")
            raise Boom
    assert meta_keys(db_path) == ["inner", "outer"]


def test_write_nested_exception_escaping_outer_rolls_back_everything(
    db: Database, db_path: Path
) -> None:
    with pytest.raises(Boom), db.write() as outer:
        outer.execute("INSERT INTO meta(key, value) VALUES ('outer', '1')")
        with db.write() as inner:
            inner.execute("INSERT INTO meta(key, value) VALUES ('inner', '2')")
            raise Boom
    assert meta_keys(db_path) == []
    with db.write() as conn:  # depth was reset: this is a fresh transaction again
        conn.execute("INSERT INTO meta(key, value) VALUES ('after', '3')")
    assert meta_keys(db_path) == ["after"]


def test_write_failed_commit_leaves_no_open_transaction(db: Database, db_path: Path) -> None:
    db.conn.execute(
        "CREATE TABLE parent(id INTEGER PRIMARY KEY);"
        "CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(apsw.ConstraintError), db.write() as conn:
        conn.execute("INSERT INTO child(pid) VALUES (42)")
    assert db.conn.getautocommit()
    with db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('after', '1')")
    assert meta_keys(db_path) == ["after"]


def test_deadline_interrupts_slow_query_quickly(db: Database) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="exceeded 50 ms"), db.deadline(50) as conn:
        conn.execute(ENDLESS).fetchall()
    assert time.monotonic() - started < 2.0


def test_deadline_counts_cpu_time_and_stops_a_waiting_query_at_its_wall_bound(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 22: a query that waits (here on a function that sleeps, as a thread waits
    for a core on a loaded machine) is not stopped at the limit, which is CPU time, but
    at ``DEADLINE_WALL_FACTOR`` times it, and the timeout says it was the wall clock."""
    db.conn.create_scalar_function("nap", lambda s: time.sleep(s) or 0)
    started = time.monotonic()
    with pytest.raises(QueryTimeout) as stopped, db.deadline(100) as conn:
        conn.execute(_COUNTER + "SELECT nap(0.001) FROM c").fetchall()
    waited = time.monotonic() - started
    assert stopped.value.busy
    assert 0.1 * DEADLINE_WALL_FACTOR <= waited < 0.1 * DEADLINE_WALL_FACTOR + 5
    monkeypatch.setattr(store_db, "DEADLINE_WALL_FACTOR", 10_000)  # only the CPU clock now
    with pytest.raises(QueryTimeout) as stopped, db.deadline(50) as conn:
        conn.execute(ENDLESS).fetchall()
    assert not stopped.value.busy  # it had its CPU time: it costs too much


def test_deadline_lets_fast_query_finish(db: Database) -> None:
    with db.deadline(5_000) as conn:
        assert conn.execute("SELECT 1 + 1").fetchall() == [(2,)]


def test_deadline_is_removed_after_the_block(db: Database) -> None:
    with pytest.raises(QueryTimeout), db.deadline(1) as conn:
        conn.execute(ENDLESS).fetchall()
    time.sleep(0.01)
    bounded = ENDLESS.replace("FROM c)", "FROM c WHERE x < 200000)")
    assert db.query(bounded) == [(200_000,)]


def test_deadline_on_read_inside_write_raises_query_timeout_and_rolls_back(
    db: Database, db_path: Path
) -> None:
    with pytest.raises(QueryTimeout), db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        with db.deadline(50):
            conn.execute(ENDLESS).fetchall()
    assert meta_keys(db_path) == []


def test_deadline_on_write_inside_write_raises_query_timeout_and_rolls_back(
    db: Database, db_path: Path
) -> None:
    with pytest.raises(QueryTimeout), db.write() as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        with db.deadline(50):
            conn.execute(ENDLESS_INSERT)
    assert meta_keys(db_path) == []


def test_database_connection_is_per_thread(db: Database) -> None:
    main = db.conn
    assert db.conn is main
    first = in_thread(lambda: db.conn)
    second = in_thread(lambda: db.conn)
    assert len({id(main), id(first), id(second)}) == 3
    assert in_thread(lambda: db.query("SELECT count(*) FROM meta")) == [(0,)]


def test_database_closes_the_connection_of_a_thread_that_ended(db: Database) -> None:
    """issue 11: the server's worker pool retires idle threads; each left its connection
    open (2 fds, its page cache) until the library closed: fds 19 -> 37 in a server."""
    ended = in_thread(lambda: db.conn)
    assert ended.execute("SELECT 1").fetchall() == [(1,)]
    in_thread(lambda: db.conn)  # a new thread's first use closes the ended thread's one
    with pytest.raises(apsw.ConnectionClosedError):
        ended.execute("SELECT 1")
    assert db.query("SELECT count(*) FROM meta") == [(0,)]  # the live ones still work


def test_database_close_closes_every_threads_connection(db_path: Path) -> None:
    db = Database(db_path)
    conns = [db.conn, in_thread(lambda: db.conn), in_thread(lambda: db.conn)]
    db.close()
    for conn in conns:
        with pytest.raises(apsw.ConnectionClosedError):
            conn.execute("SELECT 1")
    with pytest.raises(Unavailable, match="is closed"):
        db.conn  # noqa: B018
    with pytest.raises(Unavailable, match="is closed"):
        in_thread(lambda: db.conn)


# --- another process holding the write lock (issue 7 item 18) -------------------------------

_HOLD_LOCK = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO meta(key, value) VALUES ('held', 'by the other process')")
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the test closes our stdin
conn.execute("ROLLBACK")
"""


@pytest.fixture
def locked_by_other_process(db: Database, db_path: Path) -> Iterator[None]:
    """A separate process holds ``BEGIN IMMEDIATE`` on the same file while the test runs."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_write_while_another_process_holds_the_lock_is_conflict_with_a_hint(
    db: Database, db_path: Path, locked_by_other_process: None
) -> None:
    """issue 7 item 18: "database is locked" reached agents as [internal]."""
    waiting = Database(db_path, busy_timeout_ms=50)
    try:
        with pytest.raises(Conflict) as caught, waiting.write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('mine', '1')")
        assert "locked" in caught.value.message
        assert caught.value.hint is not None and "another kb-mcp process is writing" in (
            caught.value.hint
        )
        assert waiting.conn.getautocommit()  # no transaction left open
    finally:
        waiting.close()


def test_write_after_the_other_writer_lets_go_succeeds(db: Database, db_path: Path) -> None:
    """issue 7 item 18: a Conflict changes nothing and the next attempt works."""
    other = apsw.Connection(str(db_path))
    other.execute("BEGIN IMMEDIATE")
    waiting = Database(db_path, busy_timeout_ms=50)
    try:
        with pytest.raises(Conflict), waiting.write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('mine', '1')")
        other.execute("ROLLBACK")
        with waiting.write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('mine', '2')")
        assert other_reader(db_path, "SELECT value FROM meta WHERE key = 'mine'") == [("2",)]
    finally:
        other.close()
        waiting.close()


def test_write_waiting_long_gets_the_lock_within_milliseconds_of_its_release(
    db: Database, db_path: Path
) -> None:
    """issue 11 (concurrency, "no database is locked to a caller"): a writer that has
    waited a while takes the lock as soon as it is free. SQLite's own busy handler sleeps
    up to 100 ms between tries by then, so newcomers kept winning: agents' adds waited
    up to 9.5 s beside short transactions in the long concurrency run."""
    import random

    rng = random.Random(11)
    waiting = Database(db_path)
    latencies = []
    try:
        for _ in range(5):
            held, released = threading.Event(), [0.0]

            def hold(seconds: float, held: threading.Event = held, released=released) -> None:
                conn = apsw.Connection(str(db_path))
                conn.execute("BEGIN IMMEDIATE")
                held.set()
                time.sleep(seconds)
                conn.execute("COMMIT")
                released[0] = time.monotonic()
                conn.close()

            holder = threading.Thread(target=hold, args=(rng.uniform(0.4, 0.5),))
            holder.start()
            held.wait(5)
            with waiting.write() as conn:
                got = time.monotonic()
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('w', '1')")
            holder.join()
            latencies.append(max(0.0, got - released[0]))
    finally:
        waiting.close()
    assert sorted(latencies)[2] < 0.02, latencies


def test_savepoint_rolls_back_only_its_part_of_the_transaction(tmp_path: Path) -> None:
    """issue 10: a large file's chunks are stored inside ``savepoint()`` (``ingest/sync``),
    so a failure while they are made undoes that file's rows and keeps the batch's."""
    db = Database(tmp_path / "kb.db")
    with db.write() as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(ValueError), db.savepoint():
            conn.execute("INSERT INTO t VALUES (2)")
            raise ValueError("chunking failed")
        with db.savepoint():
            conn.execute("INSERT INTO t VALUES (3)")
    assert [r[0] for r in db.conn.execute("SELECT n FROM t ORDER BY n")] == [1, 3]
    db.close()


def test_close_interrupts_a_statement_another_thread_is_running(db_path: Path) -> None:
    """A server stopping while a background thread is mid-statement (a warm-up reading a
    large library's vectors, a sync writing): ``close`` interrupts that statement and
    closes, rather than failing with apsw's "Connection is busy in another thread"; the
    interrupted write rolls back."""
    db = Database(db_path)
    entered, outcome = threading.Event(), []
    db.conn  # noqa: B018 - the closing thread has a connection of its own too

    def writer() -> None:
        conn = db.conn
        conn.create_scalar_function("entered", lambda x: entered.set() or x)
        try:
            with db.write() as conn:
                conn.execute(ENDLESS_INSERT.replace("SELECT x, x", "SELECT entered(x), x"))
        except apsw.InterruptError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    assert entered.wait(60)
    db.close()
    thread.join(60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], apsw.InterruptError)
    assert meta_keys(db_path) == []
