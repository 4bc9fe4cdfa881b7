"""One thread's connection to the library's PostgreSQL server, shaped like apsw's.

The store's modules call ``conn.execute(sql, params)`` and read the rows, as they do on
SQLite (``store/db.py``); ``PgConnection`` offers that part of apsw's ``Connection``
(``execute``, ``executemany``, ``changes``, ``in_transaction``) over psycopg 3, each
statement passed through ``dialect.to_postgres`` once.

Why a lease and not a connection per thread: the MCP server runs each call in one of up
to 40 worker threads (anyio's default) and keeps idle ones for a while, beside its
background threads, and several kb-mcp processes share one server (PostgreSQL allows 100
sessions by default). So a thread holds one of the pool's connections only while it
needs one session for several statements (``pinned``: a write, a read snapshot, a
deadline) and otherwise for one statement, whose rows are fetched before the connection
goes back. The pool's ``max_size`` bounds the sessions a process opens; a thread finding
them all in use waits for one (``store/postgres/database.py``).

Outside a pinned block, and inside one that opened no transaction, a statement runs in
autocommit, as apsw runs a statement outside ``BEGIN`` in an implicit transaction.

PostgreSQL's errors are translated here (``translated``), where every statement passes:
a lock wait past ``lock_timeout`` is ``Conflict`` as SQLite's busy timeout is, a role
without the privilege is ``Refused``, a statement stopped by a deadline is
``QueryTimeout``, a lost or refused connection ``Unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from kb_mcp.errors import Conflict, InvalidInput, NoSpace, Refused, Unavailable
from kb_mcp.store import db as store_db
from kb_mcp.store.db import QueryTimeout
from kb_mcp.store.postgres.dialect import to_postgres
from kb_mcp.store.postgres.url import is_postgres, shown

Params = Sequence[Any] | Mapping[str, Any]
# Leases one of the pool's connections for a block (``PostgresDatabase._lease``).
Lease = Callable[[], AbstractContextManager[psycopg.Connection]]

# The verbs whose row count apsw's ``changes()`` reports; a SELECT leaves it as it was.
_CHANGING = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
# A deadline's statement_timeout set, and the one before it returned: the materialized
# CTE holds the old value before the WHERE, run on its row, sets the new one.
_SET_TIMEOUT = (
    "WITH was AS MATERIALIZED (SELECT current_setting('statement_timeout') AS before) "
    "SELECT before FROM was WHERE set_config('statement_timeout', %s, %s) IS NOT NULL"
)
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR, TransactionStatus.ACTIVE)
WRITE_HINT = (
    "search, grep, read and list work with this role; to add or change documents, "
    "connect with a role that may write (`kb-mcp pg init` prints the SQL that makes one)"
)


def redacted(url: str) -> str:
    """``url`` as it may be shown in a message or a log: without its password.

    A URL is shown by ``url.shown``, the one way a store is shown. A libpq ``key=value``
    string (tests and tools build those) loses its ``password`` and ``sslpassword``; one
    libpq cannot parse is not shown at all, since its parse errors quote the text around
    the fault, which can be the password itself.
    """
    if is_postgres(url):
        return shown(url)
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "(a PostgreSQL URL that cannot be parsed)"
    for secret in ("password", "sslpassword"):
        params.pop(secret, None)
    return make_conninfo("", **params)


@contextmanager
def translated(where: str, role: str, *, writing: bool = False) -> Iterator[None]:
    """PostgreSQL's errors a caller can act on, as ``kb_mcp.errors``; others pass.

    ``where`` is the redacted URL, ``role`` the user the connection logged in as;
    ``writing``: inside ``write()``, where a missing privilege means a read-only role.
    """
    try:
        yield
    except (errors.LockNotAvailable, errors.DeadlockDetected, errors.SerializationFailure) as exc:
        raise Conflict(
            f"the library at {where} is locked ({_first_line(exc)})",
            hint="another kb-mcp process is writing (a sync?); try again in a moment",
        ) from exc
    except (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction) as exc:
        if writing or isinstance(exc, errors.ReadOnlySqlTransaction):
            message = f"the PostgreSQL role {role} can only read the library at {where}"
        else:
            message = f"the PostgreSQL role {role} lacks a privilege on the library at {where}"
        raise Refused(f"{message} ({_first_line(exc)})", hint=WRITE_HINT) from exc
    except errors.DiskFull as exc:
        raise NoSpace(
            f"the PostgreSQL server of the library at {where} has no space left "
            f"({_first_line(exc)}); nothing was changed",
            hint="ask its administrator to free space; what was stored before is intact",
        ) from exc
    except errors.QueryCanceled as exc:  # a deadline's own is QueryTimeout before here
        raise Unavailable(
            f"the PostgreSQL server of the library at {where} stopped a statement "
            f"({_first_line(exc)})",
            hint="a statement_timeout its administrator set for the role or database "
            "is shorter than this work needs",
        ) from exc
    except psycopg.OperationalError as exc:
        raise unreachable(where, exc) from exc


@contextmanager
def _nul_refused(param_rows: Iterable[Params]) -> Iterator[None]:
    """A statement whose text value holds U+0000 as ``InvalidInput``, not psycopg's error.

    PostgreSQL's text cannot hold NUL, and psycopg refuses such a value before sending
    it: nothing reached the server. SQLite stores NUL, so a value the store never
    refused there (a lookup key an agent typed, say) is refused here in words the
    caller can act on. Checked only after the refusal, so other statements pay nothing.
    """
    try:
        yield
    except psycopg.DataError as exc:
        for params in param_rows:
            values = params.values() if isinstance(params, Mapping) else params
            if any(isinstance(value, str) and "\x00" in value for value in values):
                raise InvalidInput(
                    "a value holds a NUL character (U+0000), which no text in the "
                    "library can hold; nothing was changed",
                    hint="drop the NUL characters (they mark binary data)",
                ) from exc
        raise


def unreachable(where: str, exc: psycopg.Error) -> Unavailable:
    """The server cannot be reached, refused the login, or dropped the connection."""
    return Unavailable(
        f"cannot use the library's PostgreSQL server at {where}: {_first_line(exc)}",
        hint="check that the server runs and the URL's host, port, user and database; "
        "the password comes from the URL, a pgpass file or PGPASSWORD",
    )


def _gives_rows(sql: str) -> bool:
    """Whether a statement can give rows: a query, or a RETURNING clause. psycopg's
    ``executemany`` keeps each execution's result only when asked to, which costs: 20k
    one-row INSERTs took 0.69 s with the results kept, 0.58 s without."""
    text = sql.upper()
    return text.lstrip().startswith(("SELECT", "WITH", "VALUES", "TABLE")) or "RETURNING" in text


def _first_line(exc: BaseException) -> str:
    """libpq's messages run on with tabs and hints; their first line says what."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class Rows:
    """A statement's rows, fetched whole (the connection is back in the pool already):
    iterable over tuples, with ``fetchone`` / ``fetchall`` as apsw's cursor has."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = iter(rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return next(self._rows, None)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._rows)


class PgConnection:
    """One thread's view of the pool, with apsw's ``Connection`` methods the store uses.

    Not shared between threads (``PostgresDatabase.conn`` gives each thread its own),
    so it needs no lock.
    """

    engine = "postgresql"  # what ``index/keyword_store`` dispatches on

    def __init__(self, lease: Lease, where: str, role: str) -> None:
        self._lease = lease
        self.where = where  # the redacted URL, for messages
        self.role = role
        self._pinned: psycopg.Connection | None = None
        self._changes = 0
        # ``deadline``'s start on the wall and CPU clocks, and its limit in seconds.
        self._started_at: tuple[float, float] | None = None
        self._deadline_ms = 0
        self.writing = 0  # the depth of ``write()`` blocks (``PostgresDatabase.write``)
        self._streams = 0  # names this connection's server-side cursors apart

    @property
    def in_transaction(self) -> bool:
        """A transaction is open on this thread's pinned connection."""
        pinned = self._pinned
        return pinned is not None and pinned.info.transaction_status in _OPEN

    def getautocommit(self) -> bool:
        """apsw's name for ``not in_transaction`` (``relations/name_index`` asks it)."""
        return not self.in_transaction

    @property
    def filename(self) -> str:
        """Which database this is (its redacted URL), as apsw's ``filename`` names the
        file: what per-database caches are keyed on (``relations/name_index``)."""
        return self.where

    @property
    def pinned_connection(self) -> psycopg.Connection | None:
        """The psycopg connection of the ``pinned`` block this thread is in, if any: what
        code speaking psycopg itself (COPY, arrays) runs on."""
        return self._pinned

    def changes(self) -> int:
        """Rows the last INSERT / UPDATE / DELETE changed (all of ``executemany``'s)."""
        return self._changes

    @contextmanager
    def pinned(self) -> Iterator[psycopg.Connection]:
        """One connection of the pool for the block's statements (nested blocks share
        it): what a transaction or a per-session setting needs."""
        if self._pinned is not None:
            yield self._pinned
            return
        with self._translated(), self._lease() as pg:
            self._pinned = pg
            try:
                yield pg
            finally:
                self._pinned = None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only snapshot (REPEATABLE READ) around several statements, so they
        all see one commit; inside a transaction already, that one is the snapshot."""
        if self.in_transaction:
            yield
            return
        with self.pinned():
            self.script("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield
            finally:
                if self.in_transaction:
                    self.script("COMMIT")

    def execute(self, sql: str, params: Params = ()) -> Iterable[tuple[Any, ...]]:
        """Run one statement; its rows as apsw's cursor gives them.

        In a pinned block: psycopg's cursor (rows converted as they are read);
        otherwise the rows fetched whole, the connection back in the pool.
        """
        query = to_postgres(sql)
        self._check_time()
        with _nul_refused([params]):
            if self._pinned is not None:
                cursor = self._run(self._pinned, lambda cur: cur.execute(query, params))
                return cursor if cursor.description is not None else Rows([])
            with self.pinned() as pg:
                cursor = self._run(pg, lambda cur: cur.execute(query, params))
                return Rows(cursor.fetchall() if cursor.description is not None else [])

    def stream(
        self, sql: str, params: Params = (), *, batch: int = 256
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of one query read ``batch`` at a time from a server-side cursor.

        Why: psycopg, as libpq, reads a whole result before the first row, where apsw's
        cursor steps the statement row by row. A scan that may stop early (grep at its
        match limit or its time limit) would otherwise fetch every document's text
        first. The cursor needs a transaction: a read-only snapshot when none is open;
        the connection goes back when the generator is closed.
        """
        query = to_postgres(sql)
        self._check_time()
        with self.snapshot(), self.pinned() as pg, self._translated():
            self._streams += 1
            with pg.cursor(name=f"kb_stream_{self._streams}") as cursor:
                cursor.itersize = batch
                cursor.execute(query, params)
                yield from cursor

    def executemany(self, sql: str, rows: Iterable[Params]) -> Rows:
        """Run one statement per row in one round trip (psycopg's pipeline); the rows a
        ``RETURNING`` gives, of every execution in order, as apsw's ``executemany``."""
        query = to_postgres(sql)
        self._check_time()
        rows = list(rows)
        with _nul_refused(rows), self.pinned() as pg:
            returning = _gives_rows(query)
            cursor = self._run(pg, lambda cur: cur.executemany(query, rows, returning=returning))
            returned: list[tuple[Any, ...]] = []
            changed = 0
            while True:  # returning: a result per row, each with its count and rows
                changed += max(cursor.rowcount, 0)
                if cursor.description is not None:
                    returned.extend(cursor.fetchall())
                if not cursor.nextset():
                    break
            if (cursor.statusmessage or "").split(" ", 1)[0] in _CHANGING:
                self._changes = changed
            return Rows(returned)

    def script(self, sql: str) -> None:
        """Statements without parameters sent as one message (one round trip), e.g.
        ``BEGIN; UPDATE kb_change …``; no ``?`` / ``%`` conversion."""
        with self.pinned() as pg:
            self._run(pg, lambda cur: cur.execute(sql))

    def rollback(self) -> None:
        """Roll back the open transaction, if any; a connection too broken to roll back
        is left to the pool, which discards it (the original error is what matters)."""
        if not self.in_transaction:
            return
        with suppress(psycopg.Error, Unavailable):
            self.script("ROLLBACK")

    @contextmanager
    def deadline(self, ms: int) -> Iterator[PgConnection]:
        """The block's statements, each stopped by the server past ``ms``
        (``statement_timeout``), and none started once the block has used ``ms`` of this
        thread's CPU time, or waited ``DEADLINE_WALL_FACTOR`` times ``ms`` (``busy``: the
        machine was loaded), as SQLite's deadline counts (``store/db.py``, issue 22):
        ``QueryTimeout`` either way. A nested deadline keeps the outer's.

        Why ``statement_timeout`` rather than a cancel request from a timer thread: the
        server enforces it on the statement it belongs to, so it cannot reach the next
        user of a pooled connection as a late cancel can, and it needs no thread. It
        bounds one statement, so a block ends within ``ms`` plus its last statement's
        ``ms`` at worst. Set for the block and put back after; inside a transaction as a
        local setting, which the transaction's end also undoes.
        """
        if self._started_at is not None:
            yield self
            return
        with self.pinned() as pg:
            local = self.in_transaction
            limit = (f"{int(ms)}ms", local)
            (before,) = self._run(pg, lambda cur: cur.execute(_SET_TIMEOUT, limit)).fetchone()
            self._started_at = (store_db.WALL_CLOCK(), store_db.CPU_CLOCK())
            self._deadline_ms = ms
            try:
                yield self
            finally:
                self._started_at = None
                self._restore_timeout(pg, before, local)

    def _restore_timeout(self, pg: psycopg.Connection, before: str, local: bool) -> None:
        """``statement_timeout`` as it was (the role's or database's default, if an
        administrator set one), unless the connection cannot take a statement now: an
        aborted transaction drops a local setting as it ends, and the pool discards a
        broken connection."""
        ready = TransactionStatus.INTRANS if local else TransactionStatus.IDLE
        if pg.info.transaction_status == ready:
            with self._translated():
                pg.execute("SELECT set_config('statement_timeout', %s, %s)", (before, local))

    def _run(
        self, pg: psycopg.Connection, run: Callable[[psycopg.Cursor[Any]], object]
    ) -> psycopg.Cursor[Any]:
        """One statement on ``pg``, its errors translated, ``changes()`` kept."""
        cursor = pg.cursor()
        with self._translated():
            try:
                run(cursor)
            except errors.QueryCanceled as exc:
                if self._started_at is None:
                    raise
                raise QueryTimeout(f"query exceeded {self._deadline_ms} ms") from exc
        verb = (cursor.statusmessage or "").split(" ", 1)[0]
        if verb in _CHANGING:
            self._changes = max(cursor.rowcount, 0)
        return cursor

    def _check_time(self) -> None:
        """Inside a deadline whose time is up, no statement of the caller's starts; the
        engine's own (``script``: COMMIT, ROLLBACK) still run, so a transaction ends."""
        if self._started_at is None:
            return
        limit = self._deadline_ms / 1000
        waited = store_db.WALL_CLOCK() - self._started_at[0]
        if waited <= limit:
            return
        busy = store_db.CPU_CLOCK() - self._started_at[1] <= limit
        if not busy or waited > limit * store_db.DEADLINE_WALL_FACTOR:
            raise QueryTimeout(f"query exceeded {self._deadline_ms} ms", busy=busy)

    def _translated(self) -> AbstractContextManager[None]:
        return translated(self.where, self.role, writing=bool(self.writing))
