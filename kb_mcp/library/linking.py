"""The linking phase's handle: entities, relations and near-duplicates recorded after
the keyword phase, one process per library at a time.

Why a service of its own: writing, folder syncs, ``kb-mcp sync`` and the server's
linking thread all run the same phase (``ingest/links.py``) under the same lock, and
the server waits on one event for it, as it waits on ``vectors.wanted`` and
``enrichment.wanted``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kb_mcp.ingest import links
from kb_mcp.store import link_queue, locks
from kb_mcp.store.db import Database


class Linking:
    """The linking phase of one ``Library`` (``library.links``)."""

    def __init__(self, db: Database, refresh_keywords: Callable[[], object]) -> None:
        """``refresh_keywords``: the library's keyword index's ``refresh_segment``, its
        engine's (``index/keyword_store.reader``): after a run the index merges what
        was written since its last segment when due."""
        self._db = db
        self._refresh_keywords = refresh_keywords
        # Set when documents may wait for linking; the server's linking thread waits on it.
        self.wanted = threading.Event()

    def pending(self) -> int:
        """Documents whose entities and relations are not recorded yet."""
        return link_queue.pending_count(self._db.conn)

    def run(
        self,
        *,
        should_stop: Callable[[], bool] | None = None,
        progress: links.Progress | None = None,
        wait: bool = True,
    ) -> links.LinkReport | None:
        """Record the entities, relations and near-duplicates of every document stored
        since the last run (``ingest/links.py``); resumable. None when it stopped while
        another process's run held the library, or (``wait=False``) one does.

        It does not bring derived data up to date first (``LibraryState.ready``: the
        server's thread must not run a lazy migration before the first search asks for
        it); whatever it writes, those upgrades redo or keep. One process links a
        library at a time (two would compute the same documents, and one would throw
        its work away): another's run is waited for, or (``wait=False``) left to it.
        Inside a caller's write transaction (``reindex --rebuild``) no other process can
        write anyway, and waiting for one that waits for that transaction would stall:
        no lock then. Nothing queued: no lock either (no file made, nothing written).

        Then the keyword postings segment is rebuilt when its delta has grown
        (``refresh_keywords``; on SQLite ``postings.refresh``): it makes searches at
        scale fast, and they are right without it (FTS5 answers for what it lacks), so
        it is built after the files are searchable and linked, not in the sync's
        keyword phase (issue 22)."""
        report = self._link(should_stop, progress, wait=wait)
        stopped = should_stop is not None and should_stop()
        if report is not None and not stopped and not self._db.conn.in_transaction:
            self._refresh_keywords()  # a stop asked for is not held up by a build
        return report

    def _link(
        self,
        should_stop: Callable[[], bool] | None,
        progress: links.Progress | None,
        *,
        wait: bool,
    ) -> links.LinkReport | None:
        if not self.pending():
            return links.LinkReport(0, 0, 0.0)
        if self._db.conn.in_transaction:
            return links.link_pending(self._db, should_stop=should_stop, progress=progress)
        with self._db.lock(links.LOCK_NAME) as lock:
            if not locks.take(lock, wait=wait, should_stop=should_stop):
                return None
            return links.link_pending(self._db, should_stop=should_stop, progress=progress)
