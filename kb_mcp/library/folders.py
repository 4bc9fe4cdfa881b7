"""Folder sources: registering, estimating, removing and syncing the user's folders.

Why cut here: a folder's truth is the folder itself (listed in ``sources.json`` or the
``folders`` setting), never a file of ours; what is indexed from it changes only by a
sync, one per source across processes, which always ends ``idle`` or ``error``. The
ingestion itself is ``ingest/sync.py``; this module holds the source's lifecycle around it.

On a library several machines share (PostgreSQL), a folder source belongs to the machine
that registered it (``sources.host``, ``store/host.py``): only that machine reads its
files, so only it syncs the folder, drops it when its home no longer lists it, or removes
it (another machine's ``remove`` is refused unless forced: that machine may be gone).

A web source (``kb_mcp/ingest/fetch``) is a folder source whose folder is its mirror of the site.
Only a sync asked for with ``fetch`` (the CLI's ``add`` and ``sync``: a person's action)
crawls the site first; every other sync, the server's included, reads the mirror alone,
so no MCP tool and no background task ever reaches the network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kb_mcp.errors import InvalidInput, NotFound, Refused
from kb_mcp.ingest import agent, sources, sync, synclock
from kb_mcp.ingest.fetch.crawl import CrawlSpec, crawl
from kb_mcp.ingest.fetch.mirror import Mirror
from kb_mcp.ingest.filework import failure_reason, utc_now
from kb_mcp.ingest.pipeline import remove_location
from kb_mcp.ingest.skipped import SkippedGroup, walk_groups
from kb_mcp.library.results import FailedFile, LeftOut
from kb_mcp.library.state import LibraryState
from kb_mcp.store import documents as rows
from kb_mcp.store import locks
from kb_mcp.store.host import this_host


def _crawl_group(reason: str, count: int) -> SkippedGroup:
    """A reason the last crawl left pages out, as ``list NAME --skipped`` shows skips."""
    return SkippedGroup(reason, count, (), "what a crawl leaves out: docs/web.md")


def _unseen(done: int, total: int, label: str) -> None:
    """The progress of a crawl nobody watches."""


class NameHeldElsewhere(Refused):
    """A folder of this home has the name of another machine's folder source on a shared
    library (the ``folders`` setting names folders by their base name): syncing it would
    read this folder into that source and remove the files only the other folder holds.
    Checked under the source's lock, in the transaction that would mark it ``syncing``."""

    def __init__(self, folder: sources.FolderSource, owner: str) -> None:
        super().__init__(
            f"this home's folder source {folder.name!r} has the name of a folder of the "
            f"machine {owner!r} on this shared library; it was not synced",
            hint=f"register {folder.root} under another name: `kb-mcp remove {folder.name}` "
            f"here, then `kb-mcp add {folder.root} --name OTHER`",
        )


class Folders:
    """Folder sources and their sync (``library.folders``)."""

    def __init__(self, state: LibraryState) -> None:
        self.settings = state.settings
        self.home = state.home
        self.db = state.db
        self.host = this_host(state.settings.host)  # whose folder sources are this home's
        # The state's shared steps, under the names the methods below call them by.
        self._ready = state.ready
        self._chunks_changed = state.chunks_changed
        self._link_pending = state.links.run
        self._source_id = state.source_id

    def folder_sources(self) -> list[sources.FolderSource]:
        """Registered folders plus the ones the ``folders`` setting names."""
        return sources.folder_sources(self.home, self.settings.folders)

    def estimate_folder(
        self, path: str | Path, ignore: Sequence[str] = (), *, gitignore: bool = True
    ) -> sync.Estimate:
        """What syncing ``path`` would read (files, bytes, chunks), before anything is stored."""
        root = Path(path).expanduser().resolve()
        candidate = sources.FolderSource(root.name, str(root), tuple(ignore), gitignore=gitignore)
        return sync.estimate_folder(candidate, max_files=self.settings.max_files_per_source)

    def add_folder(
        self,
        path: str | Path,
        name: str | None = None,
        ignore: Sequence[str] = (),
        *,
        gitignore: bool = True,
    ) -> sources.FolderSource:
        """Register a folder as a source (``sync`` ingests it); ``gitignore``: whether its
        walk honours ``.gitignore`` files (``ingest/gitignore.py``)."""
        return sources.register_folder(
            self.home, Path(path), name, ignore, gitignore=gitignore, taken=self.held_elsewhere()
        )

    def add_web(self, spec: CrawlSpec, name: str | None = None) -> sources.FolderSource:
        """Register a web source (``sync(fetch=True)`` crawls it into its mirror)."""
        return sources.register_web(self.home, spec, name, taken=self._names_taken())

    def web_source_of(self, url: str) -> sources.FolderSource | None:
        """The web source starting at ``url`` (normalized), if one does."""
        return next((s for s in self.folder_sources() if s.web and s.web.url == url), None)

    def set_bounds(self, name: str, spec: CrawlSpec) -> sources.FolderSource:
        """New bounds for the web source ``name``, from its next sync on."""
        return sources.set_bounds(self.home, name, spec)

    def _names_taken(self) -> set[str]:
        """Source names in the database this home does not register (other machines'
        folders, and this library's own non-folder sources)."""
        own = {f.name for f in self.folder_sources()}
        return {row.name for row in rows.list_sources(self.db.conn) if row.name not in own}

    def check_registrable(self, path: Path, name: str | None) -> None:
        """Raise as ``add_folder`` would, before the caller walks the folder for its cost."""
        sources.check_registrable(
            self.folder_sources(), path.resolve(), name, self.held_elsewhere()
        )

    def held_elsewhere(self) -> set[str]:
        """Names of the library's folder sources this home does not list: on a shared
        PostgreSQL library, other writers' folders. Sharing one source row, two machines'
        ``notes`` folders removed each other's files at each sync, so a new folder takes
        another name. Empty on SQLite: the file is this home's alone, and a folder row it
        no longer lists is one its user removed (``sync`` drops it)."""
        if self.db.engine == "sqlite":
            return set()
        own = {f.name for f in self.folder_sources()}
        return {
            row.name
            for row in rows.list_sources(self.db.conn)
            if row.kind in sources.LOCAL_KINDS and row.name not in own
        }

    def set_gitignore(self, name: str, gitignore: bool) -> sources.FolderSource:
        """Whether the folder source ``name`` honours ``.gitignore`` from its next sync on:
        how a source registered before it was read opts in (issue 20 item 12)."""
        folder = self._folder(name)
        return sources.set_gitignore(self.home, folder, gitignore)

    def left_out(self, name: str, *, skipped: bool = False) -> LeftOut:
        """Every file of the folder source ``name`` that is not indexed: the failed ones
        with their reasons, and with ``skipped`` every path a walk made now leaves out."""
        folder = self._folder(name)
        row = rows.get_source(self.db.conn, name)
        failed = rows.failed_locations(self.db.conn, row.id) if row else []
        if folder.web is not None:  # by page URL, and the pages its crawl could not fetch
            mirror = Mirror(self.home, name)
            url_of = mirror.url_of()
            failed = [(url_of.get(path, path), reason) for path, reason in failed]
            failed += [(url, reason) for url, reason in mirror.outcome.failed]
        files = tuple(FailedFile(name, path, reason) for path, reason in failed)
        if not skipped:
            return LeftOut(name, files)
        if folder.web is not None:  # what its last crawl did not fetch, and why
            crawl_skips = Mirror(self.home, name).outcome.skipped
            return LeftOut(name, files, tuple(_crawl_group(r, n) for r, n in crawl_skips.items()))
        max_files = self.settings.max_files_per_source
        walk = sync.walk_source(folder, max_files=max_files, examples=None)
        return LeftOut(name, files, walk_groups(walk))

    def _folder(self, name: str) -> sources.FolderSource:
        """The folder source called ``name``; NotFound listing the known ones."""
        folders = self.folder_sources()
        for folder in folders:
            if folder.name == name:
                return folder
        raise NotFound(
            f"no folder source named {name!r}",
            hint="folder sources: " + (", ".join(f.name for f in folders) or "none"),
        )

    def shared(self) -> bool:
        """Whether other machines may write this library (PostgreSQL); a SQLite file is
        this home's alone, wherever it was first made."""
        return self.db.engine != "sqlite"

    def owner_elsewhere(self, row: rows.SourceRow | None) -> str | None:
        """The other machine that owns the folder source ``row`` on a shared library;
        None when it is this machine's, unknown (recorded before hosts), or not shared."""
        if not self.shared() or row is None or row.host is None:
            return None
        if row.kind not in sources.LOCAL_KINDS:
            return None
        return None if row.host == self.host else row.host

    def remove_source(self, name: str, *, force: bool = False) -> int:
        """Forget a folder source and every document only it held; returns how many paths.

        Another machine's folder on a shared library is refused unless ``force``: only
        that machine reads its files, and its next sync would not bring them back here
        (``force`` is for a machine that is gone for good)."""
        if name == agent.AGENT_SOURCE:
            raise Refused(
                "the agent source cannot be removed: it holds the documents agents added",
                hint=f"delete single files under {self.home / agent.DOCS_DIR}, then reindex",
            )
        registered = {s.name for s in sources.load_registry(self.home)}
        row = rows.get_source(self.db.conn, name)
        if name not in registered and row is None:
            raise NotFound(f"no source named {name!r}")
        owner = self.owner_elsewhere(row)
        if owner is not None and not force and name in registered:
            # This home's folder of the same name was never synced into that source
            # (``NameHeldElsewhere``): it leaves this home's list, the other machine's stays.
            sources.unregister_folder(self.home, name)
            return 0
        if owner is not None and not force:
            raise Refused(
                f"the folder source {name!r} belongs to the machine {owner!r}: only it "
                "reads the folder, so remove it there",
                hint="if that machine is gone for good, `kb-mcp remove NAME --force` "
                "removes its folder's documents from the shared library",
            )
        if name in registered:
            gone = sources.unregister_folder(self.home, name)
            if gone.web is not None:
                Mirror(self.home, name).delete()
        return self._drop_source_rows(row) if row else 0

    def _drop_source_rows(self, row: rows.SourceRow) -> int:
        keys = list(rows.source_locations(self.db.conn, row.id))
        with self.db.write() as conn:
            for key in keys:
                remove_location(self.db, row.id, key)
            rows.delete_source(conn, row.id)
        self._chunks_changed()
        return len(keys)

    def sync(
        self,
        source: str | None = None,
        progress: sync.Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        wait: bool = True,
        link: bool = True,
        fetch: bool = False,
        fetch_progress: sync.Progress | None = None,
    ) -> list[sync.SyncReport]:
        """Sync folder sources (all, or the one named); resumable and safe to repeat.

        ``fetch``: crawl each web source's site into its mirror first (a person's
        command), with its own ``fetch_progress``; without it a web source is synced from
        its mirror as it is.

        The keyword phase first; then, with ``link``, the linking phase over every queued
        document (``ingest/links``): a caller that links later (the CLI, to say the
        folder is searchable first; the server, in the background) passes False.

        One sync per source at a time, across processes: a source another sync holds is
        waited for (``wait``, the default) or skipped, with no report (``wait=False``).
        Each source ends ``idle``, or ``error`` with the reason, whatever happens.
        """
        self._ready()
        folders = self.folder_sources()
        if source is not None:
            folders = [f for f in folders if f.name == source]
            if not folders:
                self._source_id(source)  # raises NotFound listing the known sources
                raise InvalidInput(f"source {source!r} is not a folder source; nothing to sync")
        else:
            # A shared library holds every machine's folders while this home lists only
            # its own (``sources.json``): an unlisted folder of another machine is a
            # teammate's, not one this user removed (one machine's sync emptied the team
            # library), so only this machine's go (``_drop_unlisted_folders``).
            self._drop_unlisted_folders({f.name for f in folders})
        done: list[sync.SyncReport] = []
        clashes: list[NameHeldElsewhere] = []
        try:
            for folder in folders:
                try:
                    fetching = (fetch_progress or progress or _unseen) if fetch else None
                    report = self._sync_one(folder, progress, should_stop, wait, fetching)
                except NameHeldElsewhere as exc:  # this home's other folders still sync
                    clashes.append(exc)
                    continue
                if report is not None:
                    done.append(report)
        finally:
            self._chunks_changed()
        if link:
            self._link_pending(should_stop=should_stop)
        if clashes:
            raise clashes[0]
        return done

    def _sync_one(
        self,
        folder: sources.FolderSource,
        progress: sync.Progress | None,
        should_stop: Callable[[], bool] | None,
        wait: bool,
        fetching: sync.Progress | None = None,
    ) -> sync.SyncReport | None:
        """Sync one folder under its source lock; None when another sync holds it. A
        web source's crawl runs there too (``fetching``: its progress; None: no crawl),
        so two never write one mirror."""

        def waiting(holder: int | str | None) -> None:
            if progress:
                progress(0, 0, f"waiting for another sync of {folder.name} (pid {holder})")

        with synclock.source_lock(self.db, folder.name) as lock:
            if not locks.take(lock, wait=wait, should_stop=should_stop, on_wait=waiting):
                return None
            with self.db.write() as conn:
                source_id = rows.ensure_source(
                    conn,
                    folder.name,
                    folder.kind,
                    utc_now(),
                    folder.shown_root,
                    folder.ignore,
                    self.host,
                )
                owner = self.owner_elsewhere(rows.get_source(conn, folder.name))
                if owner is not None:
                    raise NameHeldElsewhere(folder, owner)
                rows.set_sync_state(conn, source_id, "syncing", None, None)
            # Trigger: any exception, ours or not, even KeyboardInterrupt. Why: a source
            # left "syncing" looked busy forever (issue 7 item 9). Outcome: "error" with
            # the reason, then the exception goes on; "idle" only after a clean return.
            state, error, synced_at = "error", synclock.INTERRUPTED, None
            try:
                mirror, outcome = None, None
                if folder.web is not None:
                    mirror = Mirror(self.home, folder.name)
                    if fetching is not None:
                        outcome = crawl(
                            folder.web, mirror, progress=fetching, should_stop=should_stop
                        )
                    mirror.root.mkdir(parents=True, exist_ok=True)
                report = sync.sync_folder(
                    self.db,
                    folder,
                    source_id,
                    max_files=self.settings.max_files_per_source,
                    progress=progress,
                    should_stop=should_stop,
                    pdf_mode=self.settings.pdf_mode,
                    uri_of=mirror.url_of() if mirror is not None else None,
                )
                report.crawl = outcome
                # A site that could not be crawled keeps its last good copy, and says so.
                site_error = mirror.outcome.error if mirror is not None else None
                state = "error" if site_error else "idle"
                error, synced_at = site_error, utc_now()
                return report
            except Exception as exc:
                error = failure_reason(exc)
                raise
            finally:
                with self.db.write() as conn:
                    rows.set_sync_state(conn, source_id, state, error, synced_at)

    def _drop_unlisted_folders(self, listed: set[str]) -> None:
        """Folder rows whose source is no longer registered or configured go: on a
        shared library, only this machine's (another's, or one recorded before hosts,
        may be a teammate's)."""
        for row in rows.list_sources(self.db.conn):
            if row.kind not in sources.LOCAL_KINDS or row.name in listed:
                continue
            if not self.shared() or row.host == self.host:
                self._drop_source_rows(row)
