"""SQLite discipline, in one place: connections, pragmas, transactions, deadlines.

- One apsw connection per thread (apsw refuses to share a busy connection across
  threads); every connection gets the same pragmas, ``foreign_keys`` among them: the
  vector tables of ``index/vectors.py`` rely on ``ON DELETE CASCADE`` to leave with
  their chunks in every process. No extension is loaded: vectors are plain tables read
  by numpy (``index/vectors.py`` says why sqlite-vec is not used).
- Writes go through ``write()``: ``BEGIN IMMEDIATE`` takes the write lock up front, so
  two writers never deadlock half-way through a transaction, and an exception rolls
  everything back. Nested ``write()`` blocks join the outer transaction.
- User-triggered queries run under ``deadline(ms)``: a progress handler aborts the
  statement when the time is up, so no query can hang the server.
- Another process holding the write lock past the busy timeout (``BUSY_TIMEOUT_MS``) is
  ``Conflict`` with a hint, never an internal error: SQLite's busy / locked errors are
  translated here, where every transaction and deadline starts (issue 7 item 18). The
  wait itself is ours (``BUSY_RETRY_MS``): short tries, so a long waiter is not starved.
- Schema changes are ordered migrations on ``PRAGMA user_version`` (``migrations.py``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from kb_mcp.errors import Conflict, Unavailable
from kb_mcp.fsutil import FileLock
from kb_mcp.store.failures import storage_failure
from kb_mcp.store.locks import file_lock
from kb_mcp.store.paths import PATH_KEY_FILE, PathKeys

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
# While another connection holds the lock, a waiter tries again every 1-4 ms (jittered)
# until the busy timeout. SQLite's own handler backs off to 100 ms between tries, so a
# writer that has waited a while loses to every newcomer: in the long concurrency run
# (issue 11) agents' add_document calls waited up to 9.5 s, 67 of 534 over 1 s, with the
# lock free 43 % of the time. With this handler (and the same run's other issue 11
# fixes) the longest wait was 1.1 s and 2 of 540 adds waited over 1 s; with SQLite's,
# 3.8 s and 52. A try is one lock attempt on the WAL index: cheap.
BUSY_RETRY_MS = (1.0, 4.0)
# Reads through a memory map instead of a read() per page. Measured for issue 8: 400
# float vectors fetched by id from a 100k-vector table in 1.3 ms mapped, 6–11 ms not.
# But every mapped page a search touches counts in the server's resident memory, once
# per connection (each maps its own): at 300k chunks (1.1 GB kb.db, ``tests/server_rss.py``,
# 200 searches, load ~15) a 1 GiB map peaked at 1,525 MB RSS (1,441 MB of it kb.db's
# pages), 128 MiB at 310 MB, 32 MiB at 162 MB (84 MB anonymous), issue 10's bound being
# 200 MB; the searches took 167, 155 and 131 s of wall time, so the map did not speed
# keyword search there. Pages past the map are read into SQLite's page cache.
MMAP_BYTES = 1 << 25
# The page cache of a sync's writer connection (``Database.bulk_cache``), in KiB. On the
# bench perf corpus (10k chunks, ``python -m kb_mcp.bench.ingest_cpu``, one run each)
# the writer took 7.5 s of CPU at SQLite's default 2 MiB, 6.6 s at 32 MiB and 6.7 s at
# 64 MiB; its peak RSS 126, 143 and 152 MB (issue 10 bounds it at 250 MB).
BULK_CACHE_KIB = 32 * 1024
_PROGRESS_STEPS = 1_000
# A deadline counts the thread's CPU time, and stops the work at this many times its
# limit of wall-clock time all the same (see ``Database.deadline``).
DEADLINE_WALL_FACTOR = 3
# The clocks a deadline reads: wall-clock time and this thread's CPU time. Module values
# so that a test sets the time instead of depending on how fast the machine is.
WALL_CLOCK: Callable[[], float] = time.monotonic
# How long ``Database.close`` keeps interrupting a connection another thread is using.
CLOSE_WAIT_S = 10.0
CPU_CLOCK: Callable[[], float] = time.thread_time


class QueryTimeout(Exception):
    """Raised inside ``deadline()`` when SQLite was interrupted because time ran out;
    ``busy``: the wall-clock bound stopped it, before the work had used its CPU time."""

    def __init__(self, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy


_BUSY = (apsw.BusyError, apsw.LockedError)


def _busy_conflict(path: Path, exc: apsw.Error) -> Conflict:
    return Conflict(
        f"the library database {path} is locked ({exc})",
        hint="another kb-mcp process is writing (a sync?); try again in a moment",
    )


@contextmanager
def secure_delete(conn: apsw.Connection) -> Iterator[None]:
    """Inside: deleted content is overwritten with zeros (``PRAGMA secure_delete``), so
    text rewritten to take a secret out leaves no copy in the file's free pages."""
    conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        conn.execute("PRAGMA secure_delete = OFF")


@contextmanager
def read_snapshot(conn: apsw.Connection) -> Iterator[None]:
    """One read transaction (``BEGIN``, deferred: no lock taken until the first read)
    around several statements, so they all see one commit; inside a transaction
    already, that one is the snapshot. A PostgreSQL store's connection takes its own
    (``PgConnection.snapshot``): callers hold a connection, not a database, so the
    choice is made here."""
    if getattr(conn, "engine", None) == "postgresql":
        with conn.snapshot():  # type: ignore[attr-defined]
            yield
        return
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


class Database:
    """A library's ``kb.db``: per-thread connections over one file."""

    engine = "sqlite"  # ``store/postgres/database.PostgresDatabase`` is "postgresql"

    def __init__(self, path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        """``busy_timeout_ms``: how long a statement waits for another writer's lock."""
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        # Every open connection with the thread it belongs to (see ``_open``).
        self._all: list[tuple[threading.Thread, apsw.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._stamp_conn: apsw.Connection | None = None  # see change_stamp
        # How locations store a path: redacted, and found by a keyed hash (store/paths).
        self.paths = PathKeys(path.parent / PATH_KEY_FILE)
        from kb_mcp.store.migrations import migrate

        with self._busy_is_conflict():
            if migrate(self.conn).compact:
                self.compact()

    @property
    def conn(self) -> apsw.Connection:
        """This thread's connection, opened on first use."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def change_stamp(self) -> int:
        """A number that moves whenever any connection, in this process or another,
        commits: ``PRAGMA data_version`` of one connection kept for this alone (it never
        writes, so every commit is another's), shared by all threads under a lock.
        Cheap (one pragma); what a cache of whole-index counts is keyed on."""
        with self._lock:
            if self._closed:
                raise Unavailable(f"the library at {self.path.parent} is closed")
            if self._stamp_conn is None:
                self._stamp_conn = apsw.Connection(str(self.path))
            return self._stamp_conn.execute("PRAGMA data_version").fetchone()[0]

    def _busy_waiter(self) -> Callable[[int], bool]:
        """A busy handler for one connection: short jittered sleeps up to the timeout.

        ``tries`` is 0 at the start of each wait (SQLite counts per locking attempt), so
        the deadline restarts there. False ends the wait: SQLite raises ``BusyError``.
        """
        deadline = 0.0
        low, high = BUSY_RETRY_MS

        def waiter(tries: int) -> bool:
            nonlocal deadline
            now = time.monotonic()
            if tries == 0:
                deadline = now + self.busy_timeout_ms / 1000
            if now >= deadline:
                return False
            time.sleep(min(random.uniform(low, high) / 1000, deadline - now))
            return True

        return waiter

    def _open(self) -> apsw.Connection:
        if self._closed:
            raise Unavailable(f"the library at {self.path.parent} is closed")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = apsw.Connection(str(self.path))
            conn.set_busy_handler(self._busy_waiter())
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        except _BUSY as exc:
            raise _busy_conflict(self.path, exc) from exc
        except apsw.Error as exc:
            # A full disk fails the open too (the WAL index is created then): that is
            # NoSpace, never a hint to rebuild (issue 20 item 5).
            known = storage_failure(exc, self.path.parent)
            if known is not None:
                raise known from exc
            raise Unavailable(
                f"cannot open the library database {self.path}: {exc}",
                hint="check the permissions of the home folder, or run "
                "`kb-mcp reindex --rebuild` to rebuild a damaged database from files",
            ) from exc
        # A connection outlives its thread unless closed: the server's worker pool retires
        # idle threads and starts new ones, and each left one connection (its fds, page
        # cache and map) behind per idle period (issue 11). A dead thread's connection can
        # be in use by no one, so the next thread to open one closes it.
        with self._lock:
            dead = [c for t, c in self._all if not t.is_alive()]
            self._all = [(t, c) for t, c in self._all if t.is_alive()]
            self._all.append((threading.current_thread(), conn))
        for stale in dead:
            stale.close()
        return conn

    @contextmanager
    def _busy_is_conflict(self) -> Iterator[None]:
        """SQLite's "database is locked" (after the busy timeout) → ``Conflict``."""
        try:
            yield
        except _BUSY as exc:
            raise _busy_conflict(self.path, exc) from exc

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one.

        Another writer holding the lock past the busy timeout is ``Conflict``; whatever
        went wrong, the transaction is rolled back.
        """
        conn = self.conn
        if self._local.depth:
            self._local.depth += 1
            try:
                yield conn
            finally:
                self._local.depth -= 1
            return
        with self._busy_is_conflict():
            conn.execute("BEGIN IMMEDIATE")
        self._local.depth = 1
        try:
            with self._busy_is_conflict():
                yield conn
                conn.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (an interrupted statement, a failed
            # COMMIT); roll back only what is still open, and keep the original error.
            if not conn.getautocommit():
                conn.execute("ROLLBACK")
            raise
        finally:
            self._local.depth = 0

    @contextmanager
    def bulk_cache(self) -> Iterator[None]:
        """This thread's connection with a page cache of ``BULK_CACHE_KIB`` while a sync
        writes a batch of small files (``sync._page_cache``), then SQLite's default again
        (the pages beyond it freed).

        Trigger: a batch (up to 500 files, 8 MB of text, its FTS segments and graph
        rows) touches far more pages than SQLite's default 2 MiB cache holds, and the
        writer's CPU fell with a larger one (figures at ``BULK_CACHE_KIB``). Only while
        a sync runs: a server's readers would otherwise keep up to that much cache per
        connection (issue 10's memory bound).
        """
        conn = self.conn
        before = conn.execute("PRAGMA cache_size").fetchone()[0]
        conn.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA cache_size={int(before)}")

    @contextmanager
    def savepoint(self) -> Iterator[apsw.Connection]:
        """Inside ``write()``: a part of the transaction that an exception rolls back
        alone (the exception still propagates). For a large file whose chunks are made
        as they are stored (``ingest/sync``): a chunker failure there fails that file,
        not the batch around it."""
        conn = self.conn
        conn.execute("SAVEPOINT kb_part")
        try:
            yield conn
        except BaseException:
            if not conn.getautocommit():
                conn.execute("ROLLBACK TO kb_part")
                conn.execute("RELEASE kb_part")
            raise
        conn.execute("RELEASE kb_part")

    def compact(self) -> None:
        """Rewrite the file from its live rows (``VACUUM``) and truncate the WAL.

        Why: deleting rows, even with ``secure_delete``, can leave copies of their text in
        the unused space of pages still in use (an outside run found a raw token in a
        ``chunks`` leaf page after the issue-7 upgrade). After a step that removes text
        which must not survive (secrets stored before redaction), only a rewrite is sure.
        Costs about one copy of the database; runs once per such step.
        """
        with self._busy_is_conflict():
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @contextmanager
    def deadline(self, ms: int) -> Iterator[apsw.Connection]:
        """Run the block's statements with a time limit; raise ``QueryTimeout`` past it.

        The limit is this thread's CPU time, and ``DEADLINE_WALL_FACTOR`` times it of
        wall-clock time. Trigger (issue 22): on a loaded 2-core machine searches that
        needed about 1 s of CPU were stopped at 2 s of wall-clock time, with a hint to
        use fewer words; the same searches answered a minute later. Outcome: a query
        that costs too much is still stopped at the limit whatever the load, and one
        that waits for a core is stopped only at the wider wall-clock bound (the agent's
        wait stays bounded), as ``busy``. The CPU clock is read only once the wall clock
        has passed the limit: the progress handler runs every ``_PROGRESS_STEPS``.
        """
        conn = self.conn
        wall, cpu = WALL_CLOCK, CPU_CLOCK
        started, cpu_started = wall(), cpu()
        limit = ms / 1000

        def past() -> bool:
            waited = wall() - started
            return waited > limit and (
                cpu() - cpu_started > limit or waited > limit * DEADLINE_WALL_FACTOR
            )

        token = object()
        conn.set_progress_handler(past, _PROGRESS_STEPS, id=token)
        try:
            with self._busy_is_conflict():
                yield conn
        except apsw.InterruptError as exc:
            busy = cpu() - cpu_started <= limit
            raise QueryTimeout(f"query exceeded {ms} ms", busy=busy) from exc
        finally:
            conn.set_progress_handler(None, id=token)

    def schema(self) -> tuple[int, int]:
        """``(steps applied, steps this kb-mcp has)`` of the library's schema (doctor)."""
        from kb_mcp.store.migrations import MIGRATIONS, schema_version

        return schema_version(self.conn), len(MIGRATIONS)

    def describe(self) -> str:
        """Which engine and where, for ``doctor``: ``SQLite 3.46.0 at /home/u/.kb-mcp/kb.db``."""
        return f"SQLite {apsw.sqlite_lib_version()} at {self.path}"

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple]:
        """All rows of one read statement on this thread's connection."""
        return self.conn.execute(sql, params).fetchall()

    def integrity_problems(self, within_ms: int | None = None) -> list[str] | None:
        """What ``PRAGMA quick_check`` finds wrong with the file ([] when it is sound).

        A damaged page can make the check itself fail (``CorruptError``) rather than
        report: that is a problem found too. With ``within_ms`` the check stops there and
        None says it did not finish (it reads every page: a gigabyte takes seconds).
        """
        try:
            if within_ms is None:
                found = [row[0] for row in self.query("PRAGMA quick_check")]
            else:
                with self.deadline(within_ms) as conn:
                    found = [row[0] for row in conn.execute("PRAGMA quick_check")]
        except QueryTimeout:
            return None
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            return [str(exc)]
        if found == ["ok"]:
            return []
        # SQLite heads its findings with "*** in database main ***" inside the first one:
        # one finding a line, the heading dropped, so the first says what is wrong.
        lines = [line.strip() for row in found for line in str(row).splitlines()]
        return [line for line in lines if line and not line.startswith("***")] or found

    def lock(self, name: str) -> FileLock:
        """The library's lock ``name`` (``store/locks.py``): a file beside ``kb.db``, which
        every process opening this file sees."""
        return file_lock(self.path.parent, name)

    def close(self) -> None:
        """Close every connection of every thread; the object is unusable afterwards.

        A connection another thread is running a statement in cannot be closed (apsw
        raises ``ThreadingViolationError``): a server stopping while its warm-up still
        reads every vector of a large library, or a background pass past its stop's
        wait. That statement is interrupted (``sqlite3_interrupt``, callable from any
        thread: its thread gets ``InterruptError``, a write rolls back as in a crash)
        and the close tried again. One still busy after ``CLOSE_WAIT_S`` is left to the
        process's end, which closes its file as a kill would."""
        with self._lock:
            self._closed = True
            conns, self._all = [c for _t, c in self._all], []
            if self._stamp_conn is not None:
                conns.append(self._stamp_conn)
                self._stamp_conn = None
        for conn in conns:
            _close_interrupting(conn)
        self._local = threading.local()


def _close_interrupting(conn: apsw.Connection) -> None:
    """Close ``conn``, interrupting a statement another thread runs in it (``close``)."""
    deadline = time.monotonic() + CLOSE_WAIT_S
    while True:
        try:
            conn.close()
            return
        except apsw.ThreadingViolationError:
            if time.monotonic() > deadline:
                log.warning("a database connection still busy in another thread was left open")
                return
            conn.interrupt()
            time.sleep(0.005)
