"""Who is syncing a folder source right now: one lock file per source under ``<home>/locks/``.

A sync holds its source's lock from before it marks the source ``syncing`` until after it
marks it ``idle`` or ``error``. The lock is an ``flock``, which the kernel releases when
its process dies (``kill -9`` included), so ``syncing`` with nobody holding the lock can
only be a crashed sync's leftover: ``recover_interrupted`` turns it into ``error`` at the
next open, and never touches a sync that a live process (the MCP server, a CLI run, or
another library in this process) is running. One sync per source at a time also keeps two
processes from reading the same folder twice over.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from kb_mcp.fsutil import FileLock
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database

LOCKS_DIR = "locks"
WAIT_POLL_S = 0.2  # how often a waiting sync looks again (and checks should_stop)
INTERRUPTED = (
    "sync interrupted: the process syncing this source stopped before it finished "
    "(killed or crashed); the files it committed are kept, and the next sync resumes"
)


def source_lock(home: Path, source_name: str) -> FileLock:
    """The lock of one folder source; keyed by a hash, since names may hold any character."""
    digest = hashlib.sha256(source_name.encode("utf-8")).hexdigest()[:16]
    return FileLock(home / LOCKS_DIR / f"sync-{digest}.lock")


def acquire(
    lock: FileLock,
    *,
    wait: bool,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[int | None], None] | None = None,
) -> bool:
    """Take ``lock``; with ``wait``, poll until free (or ``should_stop``); else try once.

    ``on_wait(pid)`` is called once, with the holder's pid, when the lock is busy.
    """
    if lock.acquire():
        return True
    if on_wait is not None:
        on_wait(lock.holder_pid())
    while wait and not (should_stop and should_stop()):
        time.sleep(WAIT_POLL_S)
        if lock.acquire():
            return True
    return False


def recover_interrupted(db: Database, home: Path) -> list[str]:
    """Sources left ``syncing`` by a process that is gone become ``error``; their names.

    The check and the change both happen while holding the source's lock, so a sync
    starting at the same moment waits for it and then marks the source ``syncing`` again.
    """
    recovered = []
    for source in rows.list_sources(db.conn):
        if source.sync_state != "syncing":
            continue
        with source_lock(home, source.name) as lock:
            if not lock.acquire():
                continue  # a live process is syncing it
            with db.write() as conn:
                current = rows.get_source(conn, source.name)
                if current is not None and current.sync_state == "syncing":
                    rows.set_sync_state(conn, current.id, "error", INTERRUPTED, None)
                    recovered.append(source.name)
    return recovered
