"""Background work while the server runs: folder sync, and embedding.

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
import time
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


class BackgroundEmbedder:
    """Embeds pending passages while the server runs, after the handshake, in batches.

    Keyword search never waits for it: a synced folder is searchable at once and its
    vectors follow. The thread sleeps until the library says there may be work
    (``Library.embed_wanted``: set by syncs and added documents) or ``IDLE_CHECK_S``
    passed (another process may have added chunks). After a provider failure it waits
    ``backoff_s`` (doubling up to ``max_backoff_s``) before retrying; the failed
    documents stay ``embed_pending`` meanwhile, and a success resets the delay.
    """

    IDLE_CHECK_S = 60.0
    POLL_S = 0.25  # how often a wait looks at the stop flag

    def __init__(
        self,
        get_library: Callable[[], Library],
        *,
        start_delay_s: float = START_DELAY_S,
        backoff_s: float = 30.0,
        max_backoff_s: float = 600.0,
    ) -> None:
        self._get_library = get_library
        self._start_delay_s = start_delay_s
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-mcp-embed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to stop (between batches) and wait for it a little."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        if self._stop.wait(self._start_delay_s):
            return
        try:
            library = self._get_library()
        except Exception:
            log.exception("background embedding could not open the library")
            return
        if library.settings.embedder == "none":
            return
        delay = self._backoff_s
        while not self._stop.is_set():
            library.embed_wanted.clear()
            if self._embed_once(library):
                delay = self._backoff_s
                self._wait(library.embed_wanted, self.IDLE_CHECK_S)
            else:
                self._wait(None, delay)
                delay = min(delay * 2, self._max_backoff_s)

    def _embed_once(self, library: Library) -> bool:
        """One run over what is pending; False when the provider failed."""
        try:
            report = library.embed_pending(should_stop=self._stop.is_set, wait=False)
            library.warm_vectors()
        except Exception:  # a failed run must never take the server down
            log.exception("background embedding failed")
            return False
        if report is None:
            return True
        if report.error:
            log.warning(
                "embedding stopped (%d pending): %s; retrying later", report.pending, report.error
            )
            return False
        if report.embedded:
            log.info("embedded %d passages (%d pending)", report.embedded, report.pending)
        return True

    def _wait(self, wake: threading.Event | None, timeout: float) -> None:
        """Until ``wake`` is set, the stop flag is set, or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if wake is not None and wake.wait(min(left, self.POLL_S)):
                return
            if wake is None:
                self._stop.wait(min(left, self.POLL_S))
