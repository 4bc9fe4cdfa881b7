"""The file watcher: edits, additions, deletions and renames reach search while the server
runs; ignored paths wake nothing; polling takes over when watching fails (issue 10,
"Freshness"). Bounds are generous for CI (the ≤ 2 s figure is `kb_mcp.bench.startup`'s).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from kb_mcp.bench.startup import StdioClient
from kb_mcp.ingest import watch
from kb_mcp.ingest.sources import FolderSource
from kb_mcp.library import Library
from kb_mcp.server.background import BackgroundSync
from kb_mcp.settings import WATCH_MODES, Settings

SEEN_WITHIN_S = 60.0  # bounds a failure only: each wait ends when the thing is seen
QUIET_S = 1.5


def wait_for(predicate: Any, within: float = SEEN_WITHIN_S) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class Calls:
    """What a watcher reported, for a test to wait on."""

    def __init__(self) -> None:
        self.names: list[set[str]] = []
        self.event = threading.Event()

    def __call__(self, names: set[str]) -> None:
        self.names.append(names)
        self.event.set()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "alpha.md").write_text("# Alpha\n\nthe first note about lighthouses\n")
    (folder / "sub" / "beta.md").write_text("# Beta\n\nthe second note about harbours\n")
    (folder / ".kbignore").write_text("drafts/\n")
    return folder


def started(notes: Path, calls: Calls, **options: Any) -> watch.FolderWatcher:
    watcher = watch.FolderWatcher([FolderSource("notes", str(notes))], calls, **options)
    watcher.start()
    assert watcher.ready.wait(SEEN_WITHIN_S)
    return watcher


def test_watch_modes_are_the_settings_choices() -> None:
    assert watch.WATCH_MODES == WATCH_MODES


def test_watch_counts_only_paths_a_walk_would_keep(notes: Path) -> None:
    """Issue 10: the watcher applies the walk's ignore rules to every changed path."""
    watcher = watch.FolderWatcher([FolderSource("notes", str(notes))], lambda _: None)
    ignored = [
        "node_modules/pkg/readme.md",
        ".git/index",
        ".obsidian/workspace.md",
        "drafts/idea.md",
        "alpha.md.swp",
        "photo.bin",
        ".env",
        "sub/__pycache__/x.py",
    ]
    for rel in ignored:
        assert watcher.sources_changed([str(notes / rel)]) == set(), rel
    for rel in ("alpha.md", "sub/new.py", "gone-folder", ".kbignore"):
        assert watcher.sources_changed([str(notes / rel)]) == {"notes"}, rel
    assert watcher.sources_changed(["/elsewhere/alpha.md"]) == set()


def test_watch_reports_a_save_and_not_an_ignored_write(notes: Path) -> None:
    """Issue 10: writes under pruned, hidden and .kbignore'd folders wake nothing; a
    saved note does, once per burst."""
    calls = Calls()
    watcher = started(notes, calls)
    try:
        for rel in ("node_modules/a.md", ".cache/b.md", "drafts/c.md", "d.md~"):
            (notes / rel).parent.mkdir(parents=True, exist_ok=True)
            (notes / rel).write_text("ignored\n")
        assert not calls.event.wait(QUIET_S), calls.names
        (notes / "alpha.md").write_text("# Alpha\n\nedited\n")
        assert calls.event.wait(SEEN_WITHIN_S)
        assert calls.names == [{"notes"}]
    finally:
        watcher.stop()
    assert watcher.state == "native"


def refusing_native(*paths: Any, force_polling: bool = False, **options: Any) -> Iterator[Any]:
    """watchfiles as on a machine at its inotify watch limit: native watching refused."""
    if not force_polling:
        raise OSError(28, "OS file watch limit reached")
    return watchfiles.watch(*paths, force_polling=True, **options)


def test_watch_falls_back_to_polling_when_watching_fails(notes: Path) -> None:
    """Issue 10: when the OS refuses to watch, polling sees the edit instead."""
    calls = Calls()
    watcher = started(notes, calls, watch=refusing_native)
    try:
        assert wait_for(lambda: watcher.state == "polling")
        # An edit made before the poller's first snapshot is part of it, not a change,
        # and when that snapshot is taken depends on the machine: edit until one is seen.
        deadline = time.monotonic() + SEEN_WITHIN_S
        for n in itertools.count():
            (notes / "sub" / "gamma.md").write_text(f"# Gamma\n\nedit {n}\n")
            if calls.event.wait(watch.POLL_DELAY_MS / 1000 * 3) or time.monotonic() > deadline:
                break
        assert calls.event.is_set()
        assert calls.names[0] == {"notes"}
    finally:
        watcher.stop()


def test_watch_off_runs_nothing(notes: Path) -> None:
    watcher = started(notes, Calls(), mode="off")
    watcher.stop()
    assert watcher.state == "off"


def test_background_sync_watches_before_its_first_full_sync(notes: Path, tmp_path: Path) -> None:
    """Issue 10 (freshness after start-up): the watcher is in place as soon as the sync
    thread starts, not after its start delay and the first full sync (a file saved then
    was seen only once that sync, beside FastMCP's import, ended: 2.6-5.6 s)."""
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(notes, name="notes")
        sync = BackgroundSync(lambda: library, 0, start_delay_s=3600)
        sync.start()
        try:
            assert sync.watching.wait(SEEN_WITHIN_S)
            assert sync.watcher is not None and sync.watcher.state in ("native", "polling")
            assert not library.lookup.search("lighthouses", mode="keyword").hits  # not synced yet
        finally:
            sync.stop()


@pytest.fixture
def served(notes: Path, tmp_path: Path, child_env: dict[str, str]) -> Iterator[StdioClient]:
    """A real ``kb-mcp serve`` over stdio on a library holding ``notes``, synced once."""
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(notes, name="notes")
    client = StdioClient(home, env={**child_env, "KB_MCP_EMBEDDER": "none"})
    client.initialize()
    assert wait_for(lambda: "lighthouses" in client.search_text("lighthouses")), "first sync"
    yield client
    client.close()


def found(client: StdioClient, word: str) -> bool:
    return word in client.search_text(word)


def test_serve_sees_edit_add_rename_and_delete_of_folder_files(
    served: StdioClient, notes: Path
) -> None:
    """Issue 10: edited, added, renamed and deleted files reach search while serving."""
    (notes / "alpha.md").write_text("# Alpha\n\nnow about zeppelins\n")
    assert wait_for(lambda: found(served, "zeppelins"))
    assert not found(served, "lighthouses")
    (notes / "sub" / "gamma.md").write_text("# Gamma\n\nall about quasars\n")
    assert wait_for(lambda: found(served, "quasars"))
    (notes / "sub" / "gamma.md").rename(notes / "delta.md")
    assert wait_for(lambda: '"delta.md"' in served.search_text("quasars"))
    assert "gamma.md" not in served.search_text("quasars")
    (notes / "delta.md").unlink()
    assert wait_for(lambda: not found(served, "quasars"))


def test_serve_idle_with_a_watched_folder_uses_almost_no_cpu(served: StdioClient) -> None:
    """Issue 10: no busy loop; an idle server with a watcher stays idle."""
    # ping after the handshake: the background work has started (server/lifecycle.py).
    served.request("ping", {})
    # The embedder thread and the first sync settle; how long that takes depends on the
    # machine's load, so wait for a quiet second (at the rate asserted below) first.
    deadline = time.monotonic() + SEEN_WITHIN_S
    while True:
        before = served.cpu_s()
        time.sleep(1.0)
        if served.cpu_s() - before < 0.1:
            break
        assert time.monotonic() < deadline, "the server never went quiet"
    before = served.cpu_s()
    time.sleep(3.0)
    assert served.cpu_s() - before < 0.3
