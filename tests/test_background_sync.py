"""The server's background sync: a stream of saves is a few syncs, not one per save (issue 11).

A real library on a real folder, the real ``BackgroundSync`` thread; the OS's watcher is
replaced by a stand-in that saves a file and reports it, as ``watchfiles`` would, so the
pace of the events is the test's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from kb_mcp.library import Library
from kb_mcp.server.background import COALESCE_S, BackgroundSync
from kb_mcp.settings import Settings

SAVES = 15
SAVE_PAUSE_S = 0.1  # slower than the watcher's 50 ms step: every save is its own event


def saving_watch(note: Path, done: threading.Event) -> Any:
    """A stand-in for ``watchfiles.watch``: ready at once, then ``SAVES`` saves of ``note``,
    each reported alone, then quiet until stopped."""

    def watch(*_paths: str, stop_event: threading.Event, **_options: Any) -> Iterator[set]:
        yield set()
        for n in range(SAVES):
            if stop_event.wait(SAVE_PAUSE_S):
                return
            note.write_text(f"# Note\n\nsaved{n}s here.\n")
            yield {(watchfiles.Change.modified, str(note))}
        done.set()
        while not stop_event.wait(0.05):
            yield set()

    return watch


def test_background_sync_coalesces_a_stream_of_saves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """issue 11 (concurrency): 15 saves 0.1 s apart are a few syncs (each writes), not 15;
    the last save still reaches search (issue 10, freshness)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "note.md"
    note.write_text("# Note\n\nfirst words.\n")
    done = threading.Event()
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, name="notes")
        worker = BackgroundSync(lambda: library, 0, watch=saving_watch(note, done))
        with caplog.at_level(logging.INFO, logger="kb_mcp.server"):
            worker.start()
            try:
                assert done.wait(30)
                deadline = time.monotonic() + 10
                while not library.lookup.search(f"saved{SAVES - 1}s").hits:
                    assert time.monotonic() < deadline, "the last save never reached search"
                    time.sleep(0.05)
            finally:
                worker.stop()
    syncs = [r for r in caplog.records if r.getMessage().startswith("synced notes")]
    # The start-up sync, then one per COALESCE_S of saves at most (plus the last).
    assert 2 <= len(syncs) <= 2 + SAVES * SAVE_PAUSE_S / COALESCE_S + 1, len(syncs)
