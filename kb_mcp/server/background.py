"""Background work while the server runs: folder sync, embedding, and the graph's LLM pass.

The server answers ``initialize`` first: the sync thread starts watching at once, waits
a moment (``start_delay_s``), then syncs every folder source, and again every
``sync_interval_s`` seconds. Between those, a ``FolderWatcher`` (``ingest/watch.py``)
names the sources in which a file was saved, added or deleted, and just those are synced
at once, so an edit reaches search in about a second (issue 10). Watching comes before
the delay: a file saved in the first second after the first search was otherwise seen
only by the full sync, which took 2.6-5 s beside the start-up's other work
(``kb-mcp bench startup``, traced). It works through its own database connection, so searches
keep running while it writes (WAL), and files commit in small batches, so stopping
mid-sync loses at most one batch. A source that another process (a `kb-mcp sync`, a
second server) is syncing right now is skipped and tried again ``RETRY_S`` later rather
than read twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw

if TYPE_CHECKING:  # imported by the threads once started, not before initialize's answer
    from kb_mcp.ingest.sources import FolderSource
    from kb_mcp.ingest.sync import SyncReport
    from kb_mcp.ingest.watch import FolderWatcher, Watch
    from kb_mcp.library import Library

log = logging.getLogger("kb_mcp.server")
START_DELAY_S = 0.5  # let the handshake and the first calls go first
QUIET_S = 1.0  # after initialize, the threads start at the latest this long without a call
RETRY_S = 1.0  # a source another process was syncing is tried again this much later
WATCH_READY_S = 5.0  # most the first sync waits for the watches to be set up
# Watcher syncs are coalesced: a change is synced once none followed for SETTLE_S, or
# COALESCE_S after the first (counted from the end of the last sync), whichever is first.
# A person saving every 0.12 s (the long concurrency run) made the watching server sync
# back to back: 92 syncs in 80 s, each with its write transactions (issue 11). With these,
# a lone save is searchable in about SETTLE_S plus the sync, a stream of saves at most
# COALESCE_S plus the sync later, within issue 10's 2 s.
SETTLE_S = 0.2
COALESCE_S = 1.0


class BackgroundSync:
    """Full syncs at start and every ``interval_s``; syncs of changed sources in between."""

    def __init__(
        self,
        get_library: Callable[[], Library],
        interval_s: float,
        *,
        watch_mode: str = "auto",
        watch: Watch | None = None,
        start_delay_s: float = START_DELAY_S,
    ) -> None:
        self._get_library = get_library
        self._interval_s = interval_s
        self._start_delay_s = start_delay_s
        self._watch_mode = watch_mode
        self._watch = watch
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self._first_change = self._last_change = self._last_synced = 0.0
        self._watcher: FolderWatcher | None = None
        self._watched: tuple[FolderSource, ...] = ()
        self._thread = threading.Thread(target=self._run, name="kb-mcp-sync", daemon=True)
        # Set once the first watcher is in place (or could not be): before the delay.
        self.watching = threading.Event()

    @property
    def watcher(self) -> FolderWatcher | None:
        return self._watcher

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to stop (between files) and wait for it a little."""
        self._stop.set()
        self._wake.set()
        if self._watcher is not None:
            self._watcher.stop(timeout)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def changed(self, names: set[str]) -> None:
        """Called by the watcher: these sources have changes to sync."""
        with self._lock:
            now = time.monotonic()
            if not self._changed:
                self._first_change = now
            self._changed |= names
            self._last_change = now
        self._wake.set()

    def _run(self) -> None:
        self._refresh_watcher()
        self.watching.set()
        if self._stop.wait(self._start_delay_s):
            return
        next_full = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() >= next_full:
                # Watching starts before the walk, so a file saved while it runs is seen
                # (and is restarted when the folder sources changed). What the watcher
                # named before the walk began, the walk sees: syncing it again after
                # held the next save back by a whole sync (traced: 0.5-1.2 s).
                self._refresh_watcher()
                with self._lock:
                    self._changed.clear()
                self._sync_once(None)
                if self._interval_s <= 0:
                    next_full = float("inf")
                else:
                    next_full = time.monotonic() + self._interval_s
            else:
                names = self._settled_changes()
                if names:
                    self._sync_once(names)
            with self._lock:
                pending = bool(self._changed)
            if not pending:
                left = next_full - time.monotonic()
                self._wake.wait(None if left == float("inf") else max(0.0, left))
                self._wake.clear()

    def _settled_changes(self) -> set[str]:
        """The changed sources, once their changes settled (``SETTLE_S``, ``COALESCE_S``):
        a burst, or a stream of saves, is one sync rather than one per change."""
        while not self._stop.is_set():
            with self._lock:
                if not self._changed:
                    return set()
                start = max(self._first_change, self._last_synced)
                due = min(self._last_change + SETTLE_S, start + COALESCE_S)
                if time.monotonic() >= due:
                    names, self._changed = self._changed, set()
                    return names
            self._stop.wait(max(0.0, due - time.monotonic()))
        return set()

    def _refresh_watcher(self) -> None:
        """(Re)start the watcher when the folder sources changed (``kb-mcp add`` / remove)."""
        try:
            folders = tuple(self._get_library().folders.folder_sources())
        except Exception:
            log.exception("cannot list folder sources to watch")
            return
        if self._watcher is not None and folders == self._watched:
            return
        if self._watcher is not None:
            self._watcher.stop()
        self._watched = folders
        from kb_mcp.ingest.watch import FolderWatcher

        self._watcher = FolderWatcher(
            folders, self.changed, mode=self._watch_mode, watch=self._watch
        ).start()
        self._watcher.ready.wait(WATCH_READY_S)

    def _sync_once(self, names: set[str] | None) -> None:
        """Sync every folder source (``names`` None) or the ones named."""
        try:
            self._sync_named(names)
        finally:
            self._last_synced = time.monotonic()

    def _sync_named(self, names: set[str] | None) -> None:
        from kb_mcp.errors import KbError
        from kb_mcp.redact import redact_output

        try:
            library = self._get_library()
            if not library.folders.folder_sources():
                return
            if names is None:
                self._log(
                    library.folders.sync(should_stop=self._stop.is_set, wait=False, link=False)
                )
                return
            for name in sorted(names):
                reports = library.folders.sync(
                    name, should_stop=self._stop.is_set, wait=False, link=False
                )
                if not reports and not self._stop.is_set():  # another process holds it
                    retry = threading.Timer(RETRY_S, self.changed, ({name},))
                    retry.daemon = True
                    retry.start()
                self._log(reports)
        except KbError as exc:  # expected (a lock held too long, a folder gone): one line
            log.warning("background sync stopped: %s", redact_output(exc.message).text)
        except Exception:  # a failed sync must never take the server down
            log.exception("background sync failed")

    @staticmethod
    def _log(reports: list[SyncReport]) -> None:
        for report in reports:
            log.info(
                "synced %s: %d added, %d updated, %d removed, %d failed",
                report.source,
                report.added,
                report.updated,
                report.removed,
                report.failed,
            )


class BackgroundEmbedder:
    """Embeds pending passages while the server runs, after the handshake, in batches.

    Keyword search never waits for it: a synced folder is searchable at once and its
    vectors follow. The thread sleeps until the library says there may be work
    (``library.vectors.wanted``: set by syncs and added documents) or ``IDLE_CHECK_S``
    passed (another process may have added chunks). After a provider failure it waits
    ``backoff_s`` (doubling up to ``max_backoff_s``) before retrying; the failed
    documents stay ``embed_pending`` meanwhile, and a success resets the delay.
    """

    IDLE_CHECK_S = 60.0
    POLL_S = 0.25  # how often a wait looks at the stop flag
    WHAT = "background embedding"  # named in the log when the library cannot open

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
            log.exception("%s could not open the library", self.WHAT)
            return
        if not self._configured(library):
            return
        wanted = self._wanted(library)
        delay = self._backoff_s
        while not self._stop.is_set():
            wanted.clear()
            if self._once(library):
                delay = self._backoff_s
                self._wait(wanted, self.IDLE_CHECK_S)
            else:
                self._wait(None, delay)
                delay = min(delay * 2, self._max_backoff_s)

    def _configured(self, library: Library) -> bool:
        return library.settings.embedder != "none"

    def _wanted(self, library: Library) -> threading.Event:
        return library.vectors.wanted

    def _once(self, library: Library) -> bool:
        """One run over what is pending; False when the provider failed."""
        try:
            report = library.vectors.embed_pending(should_stop=self._stop.is_set, wait=False)
            library.vectors.warm()
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


class BackgroundEnricher(BackgroundEmbedder):
    """Runs the LLM pass over the graph (``graph_extractor = ollama``) while the server runs.

    The embedder's loop, on its own thread and event (``library.enrichment.wanted``): it
    starts after the handshake, sleeps until a sync or an added document brings chunks,
    and after a failed pass backs off (``backoff_s`` doubling). Keyword search and the
    heuristic graph are complete before it asks the model anything.
    """

    WHAT = "the graph's LLM pass"

    def __init__(self, get_library: Callable[[], Library], **options: float) -> None:
        super().__init__(get_library, **options)
        self._thread = threading.Thread(target=self._run, name="kb-mcp-graph", daemon=True)

    def _configured(self, library: Library) -> bool:
        return library.settings.graph_extractor != "heuristic"

    def _wanted(self, library: Library) -> threading.Event:
        return library.enrichment.wanted

    def _once(self, library: Library) -> bool:
        """One pass over what is pending; False when the model could not be reached."""
        try:
            report = library.enrichment.run(should_stop=self._stop.is_set, wait=False)
        except Exception:  # a failed pass must never take the server down
            log.exception("the graph's LLM pass failed")
            return False
        if report is None:
            return True
        if report.error:
            from kb_mcp.redact import redact_output

            log.warning(
                "graph LLM pass stopped (%d pending): %s; retrying later",
                report.pending,
                redact_output(report.error).text,
            )
            return False
        if report.enriched or report.failed:
            log.info(
                "graph LLM pass: %d chunks enriched, %d failed (%d pending)",
                report.enriched,
                report.failed,
                report.pending,
            )
        return True


class BackgroundLinker(BackgroundEmbedder):
    """Runs the linking phase (``ingest/links.py``) while the server runs: the entities,
    relations and near-duplicates of what a sync or an agent's ``add_document`` stored.

    The embedder's loop, on its own thread and event (``library.links.wanted``), so the
    sync and ``add_document`` return once a document is keyword-searchable and this
    catches up behind them; a document it has not reached simply has no entities or
    relations yet. It resumes where a killed server left off (the queue is durable).
    """

    WHAT = "the linking phase"

    def __init__(self, get_library: Callable[[], Library], **options: float) -> None:
        super().__init__(get_library, **options)
        self._thread = threading.Thread(target=self._run, name="kb-mcp-links", daemon=True)

    def _configured(self, library: Library) -> bool:
        return True

    def _wanted(self, library: Library) -> threading.Event:
        return library.links.wanted

    def _once(self, library: Library) -> bool:
        """One run over the queue; False when it failed."""
        try:
            report = library.links.run(should_stop=self._stop.is_set, wait=False)
        except Exception:  # a failed run must never take the server down
            log.exception("the linking phase failed")
            return False
        if report is not None and report.linked:
            log.info(
                "entities and relations recorded for %d documents (%d pending)",
                report.linked,
                report.pending,
            )
        return True


class BackgroundWork:
    """The server's background threads: the library warmed, then sync, linking,
    embedding and the graph's LLM pass.

    Started once the client has the ``initialize`` answer (``server/lifecycle.py``), so
    none of it delays that answer; stopped once, with FastMCP's lifespan. ``start_after``
    opens the library at once (the first call needs it) and starts the threads once the
    first call has been answered, or after ``QUIET_S`` without one: measured with
    ``kb-mcp bench startup`` (10k files, load 6-7), the threads' start-up (the watcher
    set up, their modules imported) beside the first search cost it about 0.5 s of CPU.
    """

    def __init__(self, get_library: Callable[[], Library], interval_s: float, watch: str) -> None:
        self._get_library = get_library
        self._interval_s = interval_s
        self._watch = watch
        self._lock = threading.Lock()
        self._workers: (
            tuple[BackgroundSync, BackgroundLinker, BackgroundEmbedder, BackgroundEnricher] | None
        ) = None
        self._stopped = False

    def start_after(self, first_call: threading.Event) -> None:
        """Warm the library now; the threads once ``first_call`` is set or ``QUIET_S``
        passed (the first full sync then without its delay: the call it waited for is
        done)."""

        def run() -> None:
            warm(self._get_library)
            answered = first_call.wait(QUIET_S)
            self.start(sync_delay_s=0.0 if answered else START_DELAY_S)

        threading.Thread(target=run, name="kb-mcp-warm", daemon=True).start()

    def start(self, sync_delay_s: float = START_DELAY_S) -> None:
        with self._lock:
            if self._workers is not None or self._stopped:
                return
            self._workers = (
                BackgroundSync(
                    self._get_library,
                    self._interval_s,
                    watch_mode=self._watch,
                    start_delay_s=sync_delay_s,
                ),
                BackgroundLinker(self._get_library),
                BackgroundEmbedder(self._get_library),
                BackgroundEnricher(self._get_library),
            )
            for worker in self._workers:
                worker.start()

    def stop(self) -> None:
        """Stop every thread (each between two units of work); a second call does nothing."""
        with self._lock:
            workers, self._workers, self._stopped = self._workers, None, True
        for worker in workers or ():
            worker.stop()


def warm(get_library: Callable[[], Library]) -> None:
    """Open the library, and load what the first search would: the tool bodies' modules
    and the vector codes (the model: ``load_model``, run as the library opens)."""
    try:
        library = get_library()
        from kb_mcp import render  # noqa: F401  (imported by a call otherwise)
        from kb_mcp.server import budget  # noqa: F401

        if library.settings.embedder != "none":
            library.vectors.warm()
    except apsw.InterruptError:  # the server is stopping: closing the library interrupts
        log.debug("warming the library stopped: the server is stopping")
    except Exception:  # the first call opens it again and reports what is wrong
        log.warning("warming the library failed", exc_info=True)


def load_model(library: Library) -> None:
    """Start loading the embedding model in the background when searches can use it; a
    search meanwhile answers from keywords and says why (``Library.MODEL_LOADING``).

    Measured (issue 10, a 300-file library with local vectors, load 13 on 2 cores): a
    first hybrid search that waited for the model ran past the 2 s search deadline and
    failed; with the keyword fallback it answered in 0.9-1.0 s of CPU, and hybrid search
    followed within about a second.
    """
    if library.settings.embedder == "none":
        return
    state = library.vectors.state()
    start = getattr(state.embedder, "load_in_background", None)  # the local model has it
    if state.usable and start is not None:
        start()
