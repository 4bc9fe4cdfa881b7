"""Locks of a whole library, whichever engine holds it: ``db.lock(name)``.

Some work must run in one process at a time across everything that shares a library:
a folder's sync (``sync-<digest>``), an embedding signature's queue (``embed-<key>``),
the linking phase (``links``), an LLM model's graph pass (``graph-llm-<model>``). The
lock belongs to the LIBRARY, not to a home: on SQLite the library is one file, so a
``FileLock`` beside it (``<library folder>/locks/<name>.lock``) is seen by every process
that opens it; on PostgreSQL two homes on two machines share the library, and only the
server sees them both, so the lock is a session-level advisory lock there.

Both have ``fsutil.FileLock``'s surface (``acquire(blocking=False)``, ``release()``,
``holder_pid()``, a context manager) and both are released when their process dies: the
kernel drops an ``flock`` with its file, the server drops an advisory lock with its
session. So a held lock always means a live holder, which is what lets
``ingest/synclock.recover_interrupted`` tell a crashed sync from a running one.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kb_mcp.fsutil import FileLock
from kb_mcp.store.host import HOST_ENV, this_host

if TYPE_CHECKING:
    import psycopg

LOCKS_DIR = "locks"  # under the library's folder (the home, for the SQLite file)
POLL_S = 0.2  # how often a waiting taker looks again (and asks should_stop)
# What a holder's advisory-lock session calls itself (``pg_stat_activity``): the prefix
# tells a lock's session from the pool's, the rest is ``holder_pid()``'s answer.
# (The server keeps 63 bytes of it: a long host name is cut, the lock still works.)
HOLDER_PREFIX = "kb-mcp lock "


class LibraryLock(Protocol):
    """What every lock ``db.lock(name)`` returns offers (``fsutil.FileLock`` does)."""

    def acquire(self, *, blocking: bool = False) -> bool: ...
    def release(self) -> None: ...
    def holder_pid(self) -> int | str | None: ...
    def __enter__(self) -> LibraryLock: ...
    def __exit__(self, *exc: object) -> None: ...


def file_lock(folder: Path, name: str) -> FileLock:
    """The SQLite library's lock ``name``: a file under ``folder/locks/``."""
    return FileLock(folder / LOCKS_DIR / f"{name}.lock")


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``name`` (the first 8 bytes of its SHA-256): the
    same in every process and machine, unlike Python's ``hash``."""
    digest = hashlib.sha256(f"kb-mcp lock {name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class AdvisoryLock:
    """A PostgreSQL library's lock ``name``: ``pg_try_advisory_lock`` on a connection of
    its own, opened at the first ``acquire`` and closed at ``release``.

    Not a pooled connection: a session-level advisory lock belongs to its session, and a
    pooled one goes back to the pool (and to other threads) after each statement, so the
    lock would outlive its holder's block or be released by the wrong one. Closing the
    session releases the lock, as does the server when the holder's process dies. A try
    that finds the lock busy keeps the session for the next one (``take`` tries every
    ``POLL_S`` while it waits: a new session each time would be five logins a second).
    """

    def __init__(self, connect: Callable[[], psycopg.Connection], name: str) -> None:
        self.name = name
        self.key = advisory_key(name)
        self._connect = connect
        self._pg: psycopg.Connection | None = None  # the lock's session, once opened
        self._held = False

    def acquire(self, *, blocking: bool = False) -> bool:
        """Take the lock; False when ``blocking`` is off and another session holds it."""
        if self._held:
            raise RuntimeError(f"the library lock {self.name} is already held by this object")
        try:
            if self._pg is None:
                self._pg = self._connect()
                host = this_host(os.environ.get(HOST_ENV, ""))
                holder = f"{HOLDER_PREFIX}{host}:{os.getpid()}"
                self._pg.execute("SELECT set_config('application_name', %s, false)", (holder,))
            take = "pg_advisory_lock" if blocking else "pg_try_advisory_lock"
            row = self._pg.execute(f"SELECT {take}(%s)", (self.key,)).fetchone()
        except BaseException:
            self.release()
            raise
        self._held = blocking or bool(row is not None and row[0])
        return self._held

    def release(self) -> None:
        """Let the lock go (if held) and close its session.

        The unlock is a statement, answered before ``release`` returns: closing the
        session alone releases the lock too, but only when the server's backend gets
        round to ending, a moment after the client has gone, so a taker right after
        would find it still held."""
        held, self._held = self._held, False
        if self._pg is not None:
            pg, self._pg = self._pg, None
            import psycopg

            try:
                if held and not pg.closed:
                    pg.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            except psycopg.Error:
                pass  # a broken session: its end releases the lock
            finally:
                pg.close()

    def holder_pid(self) -> int | str | None:
        """Who holds the lock now, as ``host:pid`` (the holder's own words), or None
        when nobody does or the server does not show it to this role."""
        pg = self._pg or self._connect()
        try:
            row = pg.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a"
                " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
                " AND l.database = (SELECT oid FROM pg_database"
                " WHERE datname = current_database())"
                " AND l.classid = %s AND l.objid = %s AND l.objsubid = 1",
                _split(self.key),
            ).fetchone()
        finally:
            if pg is not self._pg:
                pg.close()
        if row is None or not str(row[0] or "").startswith(HOLDER_PREFIX):
            return None
        return str(row[0])[len(HOLDER_PREFIX) :]

    def __enter__(self) -> AdvisoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _split(key: int) -> tuple[int, int]:
    """``pg_locks``' ``(classid, objid)`` of a bigint advisory key: its high and low 32
    bits, unsigned."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def take(
    lock: LibraryLock,
    *,
    wait: bool,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[int | str | None], None] | None = None,
) -> bool:
    """Take ``lock``; with ``wait``, look again every ``POLL_S`` until it is free (or
    ``should_stop()``); else try once. ``on_wait(holder)`` is called once, with
    ``holder_pid()``, when the lock is busy. Polled rather than a blocking acquire, so a
    stop asked for (the server shutting down) is heard while waiting."""
    if lock.acquire():
        return True
    if on_wait is not None:
        on_wait(lock.holder_pid())
    while wait and not (should_stop and should_stop()):
        time.sleep(POLL_S)
        if lock.acquire():
            return True
    return False
