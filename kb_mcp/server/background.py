"""Background folder sync while the server runs.

The server answers ``initialize`` first: this thread waits a moment after start-up, then
syncs every folder source, and again every ``sync_interval_s`` seconds. It works through
its own database connection, so searches keep running while it writes (WAL), and files
commit in small batches, so stopping mid-sync loses at most one batch. A source that
another process (a `kb-mcp sync`, a second server) is syncing right now is skipped until
the next round rather than read twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kb_mcp.errors import KbError
from kb_mcp.library import Library
from kb_mcp.redact import redact_output

log = logging.getLogger("kb_mcp.server")
START_DELAY_S = 0.5  # let the handshake and the first calls go first


class BackgroundSync:
    def __init__(self, get_library: Callable[[], Library], interval_s: float) -> None:
        self._get_library = get_library
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-mcp-sync", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to stop (between files) and wait for it a little."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        if self._stop.wait(START_DELAY_S):
            return
        while True:
            self._sync_once()
            if self._interval_s <= 0 or self._stop.wait(self._interval_s):
                return

    def _sync_once(self) -> None:
        try:
            library = self._get_library()
            if not library.folder_sources():
                return
            for report in library.sync(should_stop=self._stop.is_set, wait=False):
                log.info(
                    "synced %s: %d added, %d updated, %d removed, %d failed",
                    report.source,
                    report.added,
                    report.updated,
                    report.removed,
                    report.failed,
                )
        except KbError as exc:  # expected (a lock held too long, a folder gone): one line
            log.warning("background sync stopped: %s", redact_output(exc.message).text)
        except Exception:  # a failed sync must never take the server down
            log.exception("background sync failed")
