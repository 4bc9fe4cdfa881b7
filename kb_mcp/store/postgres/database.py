"""PostgreSQL discipline, in one place: the pool, transactions, deadlines, the change stamp.

``PostgresDatabase`` is ``store/db.py``'s ``Database`` for a library on a PostgreSQL
server: the same names and meanings, so the store's modules run unchanged on either.

- Connections come from a psycopg_pool ``ConnectionPool`` of at most ``pool_size``
  per process; ``conn`` is this thread's ``PgConnection``, which leases one for a
  statement or a block (``connection.py`` says why a lease rather than a connection per
  thread). A thread waiting past the busy timeout for a free one gets ``Conflict``, or
  ``Unavailable`` when the server no longer answers.
- ``write()`` is one transaction whose first statement bumps the change stamp's row
  (``kb_change``): the row's lock, held to the transaction's end, makes writers run one
  at a time, in every process, as SQLite's ``BEGIN IMMEDIATE`` does. The store's
  read-then-write code (is this name taken? then insert it) was written for that and
  stays correct under PostgreSQL's READ COMMITTED; SERIALIZABLE would instead fail one
  of two overlapping writers, and the store has no retry loops. The lock ends with the
  transaction, also when its process dies. The same row is ``change_stamp()``: it moves
  exactly when a write commits, in any process (SQLite's ``data_version``). An advisory
  lock before it would add nothing: the row's lock alone passes the lost-update test
  (with neither, it fails), and the two cost the same within the loaded machine's noise
  (``python -m kb_mcp.store.postgres.cost``: a one-INSERT transaction took 0.62 ms with
  the row's lock, 0.60 ms with an advisory lock too, 0.54 ms not serialized).
  Nested ``write()`` blocks join the outer one; an exception rolls it all back.
- A wait for a lock (the stamp's row, another row, a table) past the busy timeout
  (``lock_timeout``) is ``Conflict`` with a hint, as SQLite's busy timeout is.
- The schema is migrated on open (``migrate.py``): the engine's own table first, then
  the store's steps (``store/postgres/schema.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from kb_mcp.errors import Conflict, InvalidInput, KbError, Unavailable
from kb_mcp.store.db import BUSY_TIMEOUT_MS, QueryTimeout
from kb_mcp.store.locks import AdvisoryLock
from kb_mcp.store.postgres.connection import (
    Params,
    PgConnection,
    redacted,
    translated,
    unreachable,
)
from kb_mcp.store.postgres.migrate import Migration, migrate, schema_version

# Connections one process opens at most. Each call holds one only while it runs a
# statement or a block (a search's deadline, a write), so 8 serve up to 8 calls at the
# same moment, more than this 2-core machine runs; the rest wait their turn. Several
# processes share a server whose default allows 100 sessions.
POOL_SIZE = 8
# How long opening a connection may take, unless the URL says (libpq waits forever).
CONNECT_TIMEOUT_S = 10
# A connection that sat in the pool longer than this is pinged before it is lent (and
# replaced if dead): a server restart, or a firewall dropping idle connections, kills
# them while no one looks, and the next call would fail for it. A connection used
# within the last seconds is lent without the round trip (a ping per lease would add
# one to every statement outside a block).
IDLE_CHECK_S = 5.0
# The engine's own tables, migrated before the store's: the change stamp's row.
ENGINE_MIGRATIONS: list[Migration] = [
    (
        "engine: change stamp",
        "CREATE TABLE kb_change (stamp bigint NOT NULL); INSERT INTO kb_change VALUES (0)",
    ),
]
# A write transaction's start, in one round trip: the stamp's row, locked to the end.
_BEGIN_WRITE = "BEGIN; UPDATE kb_change SET stamp = stamp + 1"


def read_snapshot(conn: PgConnection) -> AbstractContextManager[None]:
    """One read-only snapshot (REPEATABLE READ) around several statements, so they all
    see one commit, as ``store/db.py``'s ``read_snapshot`` (``PgConnection.snapshot``)."""
    return conn.snapshot()


def database_bytes(url: str) -> int:
    """The size of the library's database on its server (tables and indexes), for the
    benches: what a SQLite library's ``kb.db*`` files are."""
    with psycopg.connect(url) as pg:
        row = pg.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def store_migrations() -> list[Migration]:
    """Every step a library on PostgreSQL needs, in order: the store's rows
    (``store/postgres/schema.py``), then the keyword and vector indexes' own tables, as
    SQLite's migrations create the FTS5 and vector tables beside the rows."""
    from kb_mcp.index.postgres import keyword, vectors
    from kb_mcp.store.postgres import schema

    return [*schema.MIGRATIONS, *keyword.MIGRATIONS, *vectors.MIGRATIONS]


class PostgresDatabase:
    """A library on a PostgreSQL server: pooled connections over one database."""

    engine = "postgresql"  # ``store/db.Database`` is "sqlite"

    def __init__(
        self,
        url: str,
        *,
        migrations: Sequence[Migration] | None = None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        pool_size: int = POOL_SIZE,
    ) -> None:
        """``url``: a libpq URL or ``key=value`` string; its password is never shown.
        ``migrations``: the store's steps (default: ``store_migrations()``).
        ``busy_timeout_ms``: how long a statement waits for a lock, or for a free
        connection of the pool."""
        self.where = redacted(url)
        self.busy_timeout_ms = busy_timeout_ms
        self._conninfo = _conninfo(url, self.where)
        self._local = threading.local()
        self._closed = False
        # Since when each pooled connection sat unused (``_configure``, ``_lease``).
        self._idle_since: WeakKeyDictionary[psycopg.Connection, float] = WeakKeyDictionary()
        store = store_migrations() if migrations is None else migrations
        self.migrations = [*ENGINE_MIGRATIONS, *store]
        with self._connect() as first:
            self.role = first.info.user
            with translated(self.where, self.role, writing=True):
                migrate(first, self.migrations)
        self._pool: ConnectionPool[psycopg.Connection] = ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=pool_size,
            timeout=busy_timeout_ms / 1000,
            kwargs={"autocommit": True},
            configure=self._configure,
            check=self._check,
            name="kb-mcp",
            open=False,
        )
        self._pool.open()

    @property
    def conn(self) -> PgConnection:
        """This thread's connection (a lease on the pool, ``connection.py``)."""
        if self._closed:
            raise Unavailable(f"the library at {self.where} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = PgConnection(self._lease, self.where, self.role)
        return conn

    def change_stamp(self) -> int:
        """A number that moves whenever a write commits, in this process or another
        (the row ``write()`` bumps first). One indexed read; what a cache of
        whole-index counts is keyed on (``LibraryState.memo``)."""
        row = self.conn.execute("SELECT stamp FROM kb_change").fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """A write transaction, writers one at a time (the stamp row's lock); nested calls
        join the outer one. A wait for the lock past the busy timeout is ``Conflict``;
        whatever went wrong, the transaction is rolled back."""
        conn = self.conn
        if conn.writing:
            conn.writing += 1
            try:
                yield conn
            finally:
                conn.writing -= 1
            return
        if conn.in_transaction:
            raise RuntimeError("write() inside read_snapshot(): take the write first")
        with conn.pinned():
            conn.writing = 1
            try:
                conn.script(_BEGIN_WRITE)
                yield conn
                conn.script("COMMIT")
            except BaseException:
                conn.rollback()
                raise
            finally:
                conn.writing = 0

    @contextmanager
    def savepoint(self) -> Iterator[PgConnection]:
        """Inside ``write()`` (or a write of its own): a part of the transaction that an
        exception rolls back alone (the exception still propagates). On PostgreSQL it
        is also what lets the transaction go on after a failed statement, which
        otherwise aborts the whole transaction."""
        with self.write() as conn:
            conn.script("SAVEPOINT kb_part")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.script("ROLLBACK TO SAVEPOINT kb_part; RELEASE SAVEPOINT kb_part")
                raise
            conn.script("RELEASE SAVEPOINT kb_part")

    def deadline(self, ms: int) -> AbstractContextManager[PgConnection]:
        """Run the block's statements with a time limit; ``QueryTimeout`` past it.

        Each statement's limit is wall-clock time on the server (its CPU time is the
        server process's, which this one cannot read); between statements the block's
        own work counts as on SQLite, this thread's CPU time with a wider wall-clock
        bound (``busy``), so a loaded machine does not stop a cheap search
        (``PgConnection.deadline``).
        """
        return self.conn.deadline(ms)

    @contextmanager
    def bulk_cache(self) -> Iterator[None]:
        """Nothing to do: SQLite's page cache is per connection and ours to size; a
        PostgreSQL server's buffers are shared and its administrator's."""
        yield

    def schema(self) -> tuple[int, int]:
        """``(steps applied, steps this kb-mcp has)``, the engine's own included (doctor)."""
        with self.conn.pinned() as pg:
            return schema_version(pg), len(self.migrations)

    def describe(self) -> str:
        """Which server, extension, library and role, for ``doctor`` (the URL without its
        secrets): ``PostgreSQL 18.6 (pgvector 0.8.6) at postgresql://kb@db/kb as kb``."""
        [(server, vector)] = self.query(
            "SELECT current_setting('server_version'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        )
        extension = f" (pgvector {vector})" if vector else " (no pgvector)"
        return f"PostgreSQL {server.split()[0]}{extension} at {self.where} as {self.role}"

    def query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """All rows of one read statement on this thread's connection."""
        return list(self.conn.execute(sql, params))

    def compact(self) -> None:
        """Rewrite every table and index from its live rows (``VACUUM FULL``), and
        refresh the planner's statistics.

        Why FULL, as SQLite's ``VACUUM``: after a step that removes text which must not
        survive (secrets stored before redaction, ``ingest/reredact.py``), a plain
        VACUUM only marks the dead rows' space reusable; their bytes stay in the table
        files until overwritten. The rewrite locks each table while it runs (readers
        wait, up to the busy timeout), and runs once per such step. Tables the role
        does not own are skipped by the server with a warning.
        """
        self.conn.execute("VACUUM (FULL, ANALYZE)")

    def integrity_problems(self, within_ms: int | None = None) -> list[str] | None:
        """What the server has found wrong with the library's pages ([] when nothing).

        PostgreSQL keeps its own pages sound (its write-ahead log, and page checksums
        when the cluster has them) and counts the checksum failures it meets per
        database; a damaged page fails the query that reads it. A full check
        (``amcheck``) needs an extension and privileges a library's role does not
        have, and reads every page. With ``within_ms`` the read stops there and None
        says it did not finish, as on SQLite.
        """
        sql = (
            "SELECT COALESCE(checksum_failures, 0) FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
        try:
            if within_ms is None:
                rows = self.query(sql)
            else:
                with self.deadline(within_ms) as conn:
                    rows = list(conn.execute(sql))
        except QueryTimeout:
            return None
        failures = int(rows[0][0]) if rows else 0
        if not failures:
            return []
        return [f"the server met {failures} page checksum failure(s) in this database"]

    def lock(self, name: str) -> AdvisoryLock:
        """The library's lock ``name`` (``store/locks.py``): an advisory lock on a
        connection of its own, seen by every process and machine on this database."""
        return AdvisoryLock(self._connect, name)

    def close(self) -> None:
        """Close the pool (a connection in use closes when its block ends); the object
        is unusable afterwards."""
        self._closed = True
        self._pool.close()
        self._local = threading.local()

    def _configure(self, pg: psycopg.Connection) -> None:
        """Each new connection of the pool: waits for locks at most the busy timeout;
        idle from now (the pool may keep it unused for a long time)."""
        pg.execute("SELECT set_config('lock_timeout', %s, false)", (f"{self.busy_timeout_ms}ms",))
        self._idle_since[pg] = time.monotonic()

    def _check(self, pg: psycopg.Connection) -> None:
        """Before a lease: ping a connection idle past ``IDLE_CHECK_S``; the pool
        replaces one whose ping fails, and lends another."""
        if time.monotonic() - self._idle_since.get(pg, 0.0) >= IDLE_CHECK_S:
            ConnectionPool.check_connection(pg)

    def connect(self) -> psycopg.Connection:
        """A new autocommit connection outside the pool, the caller's to close (the
        keyword index's merges hold two of their own)."""
        return self._connect()

    def _connect(self) -> psycopg.Connection:
        """A connection of its own (not the pool's), or ``Unavailable`` saying why not."""
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            raise unreachable(self.where, exc) from exc

    @contextmanager
    def _lease(self) -> Iterator[psycopg.Connection]:
        """One connection of the pool for a block, given back after it."""
        try:
            pg = self._pool.getconn()
        except PoolClosed as exc:
            raise Unavailable(f"the library at {self.where} is closed") from exc
        except PoolTimeout as exc:
            raise self._no_connection() from exc
        try:
            yield pg
        finally:
            self._idle_since[pg] = time.monotonic()
            self._pool.putconn(pg)

    def _no_connection(self) -> KbError:
        """Why no connection came within the busy timeout: the pool reconnects in the
        background and keeps the reason to itself, so one connection of our own says
        whether the server answers at all."""
        try:
            self._connect().close()
        except Unavailable as exc:
            return exc
        return Conflict(
            f"all {self._pool.max_size} connections of this process to the library at "
            f"{self.where} stayed in use for {self.busy_timeout_ms} ms",
            hint="too many calls at once; try again in a moment",
        )


def _conninfo(url: str, where: str) -> str:
    """``url`` with kb-mcp's defaults for what it does not say: a connect timeout, and
    an application name a DBA sees in ``pg_stat_activity``."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        params = None
    if params is None:  # raised out here: libpq's parse error, which can quote the
        # password, is neither shown nor kept as the new error's context
        raise InvalidInput(
            f"the store URL {where} is not one libpq reads",
            hint="postgresql://USER@HOST:5432/DATABASE (the password in a pgpass file "
            "or PGPASSWORD)",
        )
    params.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    params.setdefault("application_name", "kb-mcp")
    return make_conninfo("", **params)
