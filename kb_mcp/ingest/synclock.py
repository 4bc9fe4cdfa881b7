"""Who is syncing a folder source right now: one library lock per source (``db.lock``).

A sync holds its source's lock from before it marks the source ``syncing`` until after it
marks it ``idle`` or ``error``. The lock belongs to the library (``store/locks.py``: a
file beside SQLite's ``kb.db``, an advisory lock on PostgreSQL) and its holder's death
(``kill -9`` included) releases it, so ``syncing`` with nobody holding the lock can only
be a crashed sync's leftover: ``recover_interrupted`` turns it into ``error`` at the next
open, by any process or machine on the library, and never touches a sync that a live
process (the MCP server, a CLI run, another home on a shared library) is running. One
sync per source at a time also keeps two processes from reading the same folder twice over.
"""

from __future__ import annotations

import hashlib

from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database
from kb_mcp.store.locks import LibraryLock

INTERRUPTED = (
    "sync interrupted: the process syncing this source stopped before it finished "
    "(killed or crashed); the files it committed are kept, and the next sync resumes"
)


def source_lock(db: Database, source_name: str) -> LibraryLock:
    """The lock of one folder source; keyed by a hash, since names may hold any character."""
    digest = hashlib.sha256(source_name.encode("utf-8")).hexdigest()[:16]
    return db.lock(f"sync-{digest}")


def recover_interrupted(db: Database) -> list[str]:
    """Sources left ``syncing`` by a process that is gone become ``error``; their names.

    The check and the change both happen while holding the source's lock, so a sync
    starting at the same moment waits for it and then marks the source ``syncing`` again.
    """
    recovered = []
    for source in rows.list_sources(db.conn):
        if source.sync_state != "syncing":
            continue
        with source_lock(db, source.name) as lock:
            if not lock.acquire():
                continue  # a live process is syncing it
            with db.write() as conn:
                current = rows.get_source(conn, source.name)
                if current is not None and current.sync_state == "syncing":
                    rows.set_sync_state(conn, current.id, "error", INTERRUPTED, None)
                    recovered.append(source.name)
    return recovered
