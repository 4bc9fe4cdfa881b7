"""The server's background sync: a stream of saves is a few syncs, not one per save (issue 11).

A real library on a real folder, the real ``BackgroundSync`` thread; the OS's watcher is
replaced by a stand-in that saves a file and reports it, as ``watchfiles`` would, so the
pace of the events is the test's.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from kb_mcp.library import Library
from kb_mcp.server.background import COALESCE_S, SETTLE_S, BackgroundSync
from kb_mcp.settings import Settings

SAVES = 15
SAVE_PAUSE_S = 0.1  # slower than the watcher's 50 ms step: every save is its own event


def saving_watch(note: Path, done: threading.Event, reported: list[tuple[float, float]]) -> Any:
    """A stand-in for ``watchfiles.watch``: ready at once, then ``SAVES`` saves of ``note``,
    each reported alone, then quiet until stopped. ``reported`` gets, per save, when it was
    handed over and when the watcher came back for the next (it reported the save between)."""

    def watch(*_paths: str, stop_event: threading.Event, **_options: Any) -> Iterator[set]:
        yield set()
        for n in range(SAVES):
            if stop_event.wait(SAVE_PAUSE_S):
                return
            note.write_text(f"# Note\n\nsaved{n}s here.\n")
            handed = time.monotonic()
            yield {(watchfiles.Change.modified, str(note))}
            reported.append((handed, time.monotonic()))
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
    reported: list[tuple[float, float]] = []
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, name="notes")
        worker = BackgroundSync(lambda: library, 0, watch=saving_watch(note, done, reported))
        with caplog.at_level(logging.INFO, logger="kb_mcp.server"):
            worker.start()
            try:
                assert done.wait(60)
                deadline = time.monotonic() + 60
                while not library.lookup.search(f"saved{SAVES - 1}s").hits:
                    assert time.monotonic() < deadline, "the last save never reached search"
                    time.sleep(0.05)
            finally:
                worker.stop()
    syncs = [r for r in caplog.records if r.getMessage().startswith("synced notes")]
    # The start-up sync, then per stream of saves one per COALESCE_S at most, plus the last.
    assert 2 <= len(syncs) <= 1 + most_syncs(reported) + 1, (len(syncs), reported)


def most_syncs(reported: list[tuple[float, float]]) -> float:
    """The most syncs the saves may cause: the pace is 0.1 s, but a loaded machine can
    stretch a pause past ``SETTLE_S`` (the syncer then rightly syncs, a new stream begins)
    or the stream past its nominal 1.5 s. A save was reported between its two times."""
    streams = [[reported[0]]]
    for before, after in itertools.pairwise(reported):
        if after[1] - before[0] >= SETTLE_S:  # may have been a pause that settled
            streams.append([after])
        else:
            streams[-1].append(after)
    return sum((s[-1][1] - s[0][0]) / COALESCE_S + 1 for s in streams)
