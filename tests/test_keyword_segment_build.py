"""Building the keyword postings segment never holds the write lock for long (issue 11:
"no database is locked to a caller"; issue 10's segment).

A build writes a new generation in short transactions beside the live one. Pinned here,
on a real ``kb.db`` with real threads and connections: another writer commits while a
build runs; chunks added, edited and deleted mid-build rank exactly as FTS5 ranks them
afterwards; a build that dies half-way leaves the old segment serving and the next build
cleans its rows up; a build overtaken by a newer one stops without a trace.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from library_checks import segment_mismatches

from kb_mcp.index import postings
from kb_mcp.library import Library
from kb_mcp.settings import Settings

REPO = Path(__file__).resolve().parents[1]
QUERIES = (
    "keyword search speed bm25",
    "vector embedding model passages",
    "sqlite migration schema version",
    "citation line numbers",
    "zeppelin airship",
    "quokka search",
    "docgen generated command reference",
)
# Passages per part in these builds: many parts, so many short writes to land between.
PART = 4


def _settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", embedder="none", allow_agent_writes=True)


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    notes = tmp_path / "notes"
    notes.mkdir()
    for doc in [*(REPO / "docs").glob("*.md"), REPO / "README.md"]:
        shutil.copy(doc, notes / doc.name)
    lib = Library(_settings(tmp_path))
    lib.folders.add_folder(notes)
    lib.folders.sync()
    lib.fts.ensure_current()
    yield lib
    lib.close()


def _generations(lib: Library) -> list[int]:
    rows = lib.db.conn.execute("SELECT DISTINCT gen FROM kw_postings ORDER BY gen")
    return [r[0] for r in rows]


def _live(lib: Library) -> int | None:
    row = lib.db.conn.execute("SELECT generation FROM kw_segment").fetchone()
    return row[0] if row else None


def _edit_notes(notes: Path) -> None:
    """A new file, a deleted one and an edited one (its chunks are replaced)."""
    (notes / "zeppelin.md").write_text("# Airships\n\nThe zeppelin airship search note.\n")
    (notes / "cli.md").unlink()
    edited = notes / "configuration.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n## Quokka\n\nquokka search.\n")


def test_keyword_segment_build_lets_another_writer_commit(library: Library, tmp_path: Path) -> None:
    """issue 11: while a build tokenizes, an agent's add_document through another
    connection commits at once (it used to wait for the whole build, then fail after
    the 10 s busy timeout on a large library)."""
    started = threading.Event()
    built: list[int | None] = []

    def run() -> None:
        started.set()
        built.append(postings.build(library.db, part_passages=1))  # a write a passage

    thread = threading.Thread(target=run)
    thread.start()
    other = Library(_settings(tmp_path))
    try:
        started.wait()
        marker = "SELECT 1 FROM meta WHERE key = ?", (postings.BUILD_MARKER,)
        while other.db.conn.execute(*marker).fetchone() is None and thread.is_alive():
            time.sleep(0.002)  # until the build's first write has committed
        began = time.monotonic()
        other.writing.add_document(
            "Airships", "The zeppelin airship search note.", "note://zeppelin"
        )
        waited = time.monotonic() - began
        switched = other.db.conn.execute("SELECT 1 FROM kw_segment").fetchone() is not None
    finally:
        thread.join()
        other.close()
    assert not switched  # the write committed while the build was still under way
    assert waited < library.db.busy_timeout_ms / 1000 / 2
    assert built and built[0] is not None
    assert segment_mismatches(library, QUERIES) == []
    assert library.lookup.search("zeppelin", mode="keyword").hits[0].title == "Airships"


def test_keyword_segment_build_sees_chunks_changed_mid_build(
    library: Library, tmp_path: Path
) -> None:
    """issue 11: chunks added, edited and deleted while a build runs (between its parts,
    by another connection) are found, found with their new text, and not found after it,
    ranked exactly as the FTS5 path ranks them."""
    library.fts.refresh_segment(min_chunks=0)  # a live segment, and a rebuild beside it
    notes = tmp_path / "notes"
    other = Library(_settings(tmp_path))

    def change(part: int) -> None:
        if part == 1:
            _edit_notes(notes)
            other.folders.sync()

    try:
        assert postings.build(library.db, part_passages=PART, on_part=change) is not None
    finally:
        other.close()
    assert postings.delta_size(library.db.conn)[1] > 0  # what changed after the build began
    assert segment_mismatches(library, QUERIES) == []
    assert library.lookup.search("zeppelin", mode="keyword").hits[0].title == "Airships"
    assert library.lookup.search("quokka", mode="keyword").hits[0].path.endswith("configuration.md")
    gone = library.lookup.search("cli.md kb-mcp command reference", mode="keyword", top_k=10)
    assert all(not (h.path or "").endswith("cli.md") for h in gone.hits)


# A child process builds, says so once its third part has committed, and waits to be
# killed: a build dying between two of its writes, as a power cut or kill -9 leaves it.
BUILD_UNTIL_KILLED = """
import sys, time
from pathlib import Path
from kb_mcp.index import postings
from kb_mcp.library import Library
from kb_mcp.settings import Settings

home, flag = Path(sys.argv[1]), Path(sys.argv[2])
library = Library(Settings(home=home, embedder="none"))

def stop(part):
    if part == 2:
        flag.write_text("part 2")
        time.sleep(120)

postings.build(library.db, part_passages=int(sys.argv[3]), on_part=stop)
"""


def test_keyword_segment_build_killed_midway_leaves_the_old_one(
    library: Library, tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 11: a build killed half-way (kill -9 of the process running it) leaves the
    old segment serving correct results (changes after it still reach the delta), and
    the next build deletes the half-written generation."""
    library.fts.refresh_segment(min_chunks=0)
    live = _live(library)
    flag = tmp_path / "flag"
    child = subprocess.Popen(
        [sys.executable, "-c", BUILD_UNTIL_KILLED, str(tmp_path / "home"), str(flag), str(PART)],
        env=child_env,
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag.exists()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert _live(library) == live
    assert _generations(library) == [live, live + 1]  # the half generation is left behind
    _edit_notes(tmp_path / "notes")
    library.folders.sync()
    assert segment_mismatches(library, QUERIES) == []
    assert library.lookup.search("zeppelin", mode="keyword").hits[0].title == "Airships"
    assert postings.build(library.db, part_passages=PART) == library.fts.chunk_count()
    assert _generations(library) == [_live(library)]
    assert _live(library) == live + 2  # past the dead build's generation
    assert (
        library.db.conn.execute("SELECT 1 FROM meta WHERE key = 'kw_building'").fetchone() is None
    )
    assert segment_mismatches(library, QUERIES) == []


def test_keyword_segment_build_overtaken_by_a_newer_one_stops(
    library: Library, tmp_path: Path
) -> None:
    """issue 11: two syncs finishing together both build; the later one wins, the
    earlier stops at its next write, and only the winner's generation stays."""
    other = Library(_settings(tmp_path))
    outcome: list[int | None] = []

    def overtake(part: int) -> None:
        if part == 1:
            outcome.append(postings.build(other.db, part_passages=PART))

    try:
        assert postings.build(library.db, part_passages=PART, on_part=overtake) is None
    finally:
        other.close()
    assert outcome == [library.fts.chunk_count()]
    assert _generations(library) == [_live(library)]
    assert segment_mismatches(library, QUERIES) == []


def test_keyword_segment_build_under_way_is_not_started_again(
    library: Library, tmp_path: Path
) -> None:
    """issue 11: a sync ending while another process builds leaves that build be (it
    would overtake it, and builds restarted by every sync might never finish); a marker
    left by a dead build, not written for ``BUILD_STALE_S``, is built over."""
    other = Library(_settings(tmp_path))
    due: list[bool] = []

    def sync_ends(part: int) -> None:
        if part == 1:
            due.append(postings.refresh_due(other.db.conn, min_chunks=0))
            assert other.fts.refresh_segment(min_chunks=0) is None

    try:
        assert postings.build(library.db, part_passages=PART, on_part=sync_ends) is not None
        assert due == [False]  # without a segment, and 0 chunks asked for: due but for it
        library.writing.reindex(rebuild=True)  # no segment again
        with other.db.write() as conn:  # a dead build's marker, long unwritten
            old = time.time() - postings.BUILD_STALE_S - 1
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                (postings.BUILD_MARKER, f"7 dead {old}"),
            )
        assert postings.refresh_due(other.db.conn, min_chunks=0)
        assert other.fts.refresh_segment(min_chunks=0) == library.fts.chunk_count()
        assert _live(library) == 8  # past the dead build's generation
    finally:
        other.close()
    assert _generations(library) == [_live(library)]
    assert segment_mismatches(library, QUERIES) == []
