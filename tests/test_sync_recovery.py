"""Syncs that never get stuck: hostile files, crashes, `kill -9`, orphans and leftovers.

Every reader is a boundary: whatever one file makes a reader raise, that file is recorded
as failed with its reason and the rest of the folder syncs. A sync always ends ``idle`` or
``error``, even when its process is killed (the next open recovers the stale state), its
reader workers die with it, and a crash mid-write leaves no temp file behind in ``docs/``.
Real folders, a real ``kb.db``, and real ``kb-mcp`` subprocesses killed with SIGKILL.
(GitHub issue 7, items 9, 15 and 16.)
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kb_mcp.fsutil import atomic_write
from kb_mcp.ingest import filework, readahead, synclock
from kb_mcp.ingest.agent import DOCS_DIR
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows

# --- helpers ----------------------------------------------------------------------------------


@contextmanager
def open_library(home: Path) -> Iterator[Library]:
    library = Library(Settings(home=home))
    try:
        yield library
    finally:
        library.close()


def source_state(library: Library, name: str = "notes") -> tuple[str, str | None]:
    [info] = [s for s in library.catalog.overview().sources if s.name == name]
    return info.sync_state, info.error


def failures(library: Library, name: str = "notes") -> dict[str, str]:
    row = rows.get_source(library.db.conn, name)
    assert row is not None
    return dict(rows.failed_locations(library.db.conn, row.id))


def indexed(library: Library, name: str = "notes") -> set[str]:
    return {d.path for d in library.catalog.list_source(name, limit=200).documents}


def docx_bytes(parts: dict[str, bytes]) -> bytes:
    """A zip archive holding ``parts``: a .docx whose package is broken in a chosen way."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return buffer.getvalue()


_CONTENT_TYPES = (
    b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
    b'package.relationships+xml"/><Override PartName="/word/document.xml" ContentType='
    b'"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    b"</Types>"
)
_RELS = (
    b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
    b'2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
    b'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
    b"</Relationships>"
)

# Files that made a reader (or the chunking after it) raise something other than a KbError
# before issue 7 item 9, found by fuzzing each format (the exception is in the comment),
# plus hostile pass-through files that must simply be indexed. A reader fixed later may
# index a file that fails today: the table asserts the boundary, not the reader.
HOSTILE: dict[str, tuple[str, bytes]] = {
    # AssertionError: expected name token at '<![ x ]]>'
    "html_marked_section": ("page.html", b"<p>x</p><![ x ]]>"),
    # AttributeError: 'lxml.etree._Element' object has no attribute 'body'
    "docx_main_part_not_a_document": (
        "report.docx",
        docx_bytes(
            {
                "[Content_Types].xml": _CONTENT_TYPES,
                "_rels/.rels": _RELS,
                "word/document.xml": b'<?xml version="1.0"?><r/>',
            }
        ),
    ),
    # AttributeError: 'lxml.etree._Element' object has no attribute 'overrides'
    "docx_content_types_empty": (
        "types.docx",
        docx_bytes({"[Content_Types].xml": b"<Types/>", "_rels/.rels": _RELS}),
    ),
    # ValueError: day is out of range for month (PyYAML's timestamp constructor)
    "md_frontmatter_impossible_date": (
        "dated.md",
        b"---\ntitle: Dated\ndate: 2024-02-30\n---\nbody text\n",
    ),
    # RecursionError: maximum recursion depth exceeded (PyYAML)
    "md_frontmatter_nested_too_deep": (
        "deep.md",
        b"---\ntitle: " + b"[" * 5000 + b"\n---\nbody text\n",
    ),
    "pdf_garbage": ("scan.pdf", b"%PDF-1.4\n garbage"),
    "csv_nul_bytes": ("table.csv", b"a,b\n\x00\x00\x01"),
    "json_deep_nesting": ("deep.json", b"[" * 200_000),
    "yaml_alias_bomb": ("bomb.yaml", b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"),
    "rst_tilde_underlines": ("manual.rst", b"Title\n~~~~~~~~\n\ntext\n\nPart\n~~~~\n"),
    "code_unbalanced_parens": ("deep.py", b"(" * 100_000),
}


def write_folder(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


# --- item 9: every reader is a boundary -------------------------------------------------------


def test_sync_malformed_html_is_recorded_failed_and_the_rest_syncs(
    library: Library, tmp_path: Path
) -> None:
    """issue 7 item 9: ``<![ x ]]>`` made HTMLParser raise AssertionError and stopped the sync."""
    notes = tmp_path / "notes"
    write_folder(notes, {"bad.html": b"<p>x</p><![ x ]]>", "good.md": b"# Good\n\nkestrel\n"})
    library.folders.add_folder(notes)
    [report] = library.folders.sync()
    assert (report.added, report.failed) == (1, 1)
    reason = failures(library)["bad.html"]
    assert reason.startswith("AssertionError: ") and "expected name token" in reason
    assert [h.path for h in library.lookup.search("kestrel").hits] == ["good.md"]
    assert source_state(library) == ("idle", None)
    [again] = library.folders.sync()  # not retried while unchanged, and never stuck
    assert (again.added, again.unchanged, again.failed) == (0, 1, 1)
    assert source_state(library) == ("idle", None)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_sync_hostile_file_never_stops_a_folder(
    library: Library, tmp_path: Path, case: str
) -> None:
    """issue 7 item 9: each hostile file is indexed or failed with its reason; the rest syncs."""
    name, data = HOSTILE[case]
    notes = tmp_path / "notes"
    write_folder(notes, {name: data, "good.md": b"# Good\n\nkestrel\n"})
    library.folders.add_folder(notes)
    [report] = library.folders.sync()
    assert "good.md" in indexed(library)
    assert source_state(library) == ("idle", None)
    failed = failures(library)
    assert (name in failed) != (name in indexed(library))
    if name in failed:  # one short line that says why
        assert failed[name].strip() and "\n" not in failed[name]
        assert len(failed[name]) <= filework.MAX_REASON_CHARS
    assert report.failed == len(failed)


def test_sync_reader_crash_in_a_worker_process_is_recorded_failed(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 7 item 9: an exception inside a reader worker process used to end the sync."""
    monkeypatch.setattr(readahead, "PARALLEL_MIN_FILES", 1)
    notes = tmp_path / "notes"
    files = {f"n{i}.md": f"# N{i}\n\nosprey{i}\n".encode() for i in range(6)}
    write_folder(notes, {**files, "bad.html": b"<![ x ]]>"})
    with open_library(home) as library:
        library.folders.add_folder(notes)
        [report] = library.folders.sync()
        assert (report.added, report.failed) == (6, 1)
        assert failures(library)["bad.html"].startswith("AssertionError: ")
        assert source_state(library) == ("idle", None)


def test_sync_failure_reason_is_redacted(library: Library, tmp_path: Path) -> None:
    """issue 7 item 9: the reason quotes the file; a secret in the quote must not be stored."""
    notes = tmp_path / "notes"
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    write_folder(notes, {"bad.html": f"<![{secret} ]]>".encode()})
    library.folders.add_folder(notes)
    library.folders.sync()
    reason = failures(library)["bad.html"]
    assert reason.startswith("AssertionError: ") and secret not in reason


def test_sync_failure_reason_keeps_no_slice_of_the_file(library: Library, tmp_path: Path) -> None:
    """Outside run after issue 7: the parser quoted 20 characters of the file, cutting a
    token to ``ghp_Ab1Cd2E`` that no rule recognises, and kb.db stored it."""
    notes = tmp_path / "notes"
    secret = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
    write_folder(notes, {"bad.html": f"<html><![ x ]]>{secret}</html>".encode()})
    library.folders.add_folder(notes)
    library.folders.sync()
    reason = failures(library)["bad.html"]
    assert reason.startswith("AssertionError: ")
    assert "ghp_Ab1" not in reason and "'…'" in reason


def test_cli_sync_prints_a_failure_line_not_a_traceback(
    kb_cli: Callable[..., subprocess.CompletedProcess], home: Path, tmp_path: Path
) -> None:
    """issue 7 item 9: `kb-mcp sync` printed a traceback and left the source syncing."""
    notes = tmp_path / "notes"
    write_folder(notes, {"bad.html": b"<![ x ]]>", "good.md": b"# Good\n\nkestrel\n"})
    with open_library(home) as library:
        library.folders.add_folder(notes)
    result = kb_cli("sync")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "1 added" in result.stdout and "1 failed" in result.stdout
    assert "  failed: bad.html: AssertionError: expected name token" in result.stdout
    with open_library(home) as library:
        assert source_state(library) == ("idle", None)


def test_sync_unexpected_error_ends_the_source_in_error(library: Library, tmp_path: Path) -> None:
    """issue 7 item 9: an exception outside any reader must not leave the source syncing."""
    notes = tmp_path / "notes"
    write_folder(notes, {"a.md": b"# A\n\nalpha\n"})
    library.folders.add_folder(notes)

    def broken_progress(done: int, total: int, label: str) -> None:
        raise ZeroDivisionError("progress display failed")

    with pytest.raises(ZeroDivisionError):
        library.folders.sync(progress=broken_progress)
    state, error = source_state(library)
    assert state == "error" and error == "ZeroDivisionError: progress display failed"
    library.folders.sync()
    assert source_state(library) == ("idle", None) and indexed(library) == {"a.md"}


def test_sync_state_left_syncing_by_a_dead_process_is_recovered_at_open(
    home: Path, tmp_path: Path
) -> None:
    """issue 7 item 9: a `syncing` whose process is gone stayed `syncing` forever."""
    notes = tmp_path / "notes"
    write_folder(notes, {"a.md": b"# A\n\nalpha\n"})
    with open_library(home) as library:
        library.folders.add_folder(notes)
        library.folders.sync()
        source = rows.get_source(library.db.conn, "notes")
        assert source is not None
        with library.db.write() as conn:  # what a process killed mid-sync leaves behind
            rows.set_sync_state(conn, source.id, "syncing", None, None)
    with open_library(home) as library:
        state, error = source_state(library)
        assert state == "error" and error is not None and "interrupted" in error


def test_open_during_a_live_sync_keeps_it_syncing(home: Path, tmp_path: Path) -> None:
    """issue 7 item 9: recovery at open must not clobber a sync another library is running."""
    notes = tmp_path / "notes"
    write_folder(notes, {f"n{i}.md": f"# N{i}\n\nheron{i}\n".encode() for i in range(3)})
    seen: list[tuple[str, str | None]] = []

    def look_from_a_second_library(done: int, total: int, label: str) -> None:
        with open_library(home) as other:
            seen.append(source_state(other))

    with open_library(home) as library:
        library.folders.add_folder(notes)
        library.folders.sync(progress=look_from_a_second_library)
        assert seen == [("syncing", None)] * 3
        assert source_state(library) == ("idle", None)


# --- items 9 and 15: kill -9 mid-sync -----------------------------------------------------------


def make_big_folder(folder: Path, count: int) -> None:
    """Enough files for the reader pool (``PARALLEL_MIN_FILES``), each a few KB to parse."""
    body = "\n\n".join(f"## Part {p}\n\n" + "The heron wades the estuary. " * 30 for p in range(8))
    for n in range(count):
        sub = folder / f"d{n % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note{n}.md").write_text(f"# Note {n}\n\nuniq{n}\n\n{body}\n", encoding="utf-8")


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc), zombies excluded."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def is_reader_worker(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def start_cli_sync(home: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "sync", "--home", str(home)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_kill_9_of_cli_sync_takes_its_reader_workers_with_it_and_the_sync_resumes(
    home: Path, tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 7 items 9 and 15: workers outlived `kill -9`; the source stayed `syncing`."""
    notes = tmp_path / "notes"
    count = readahead.PARALLEL_MIN_FILES + 200
    make_big_folder(notes, count)
    with open_library(home) as library:
        library.folders.add_folder(notes)
    process = start_cli_sync(home, child_env)
    try:
        # Workers are spawned once the walk is done; kill as soon as one is up (its
        # siblings and multiprocessing's resource tracker are descendants too).
        assert wait_for(
            lambda: any(is_reader_worker(pid) for pid in descendants(process.pid)), timeout=60
        )
        workers = descendants(process.pid)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    try:
        assert wait_for(lambda: not any(alive(pid) for pid in workers), timeout=60), [
            pid for pid in workers if alive(pid)
        ]
    finally:  # a failing run must not leave its orphans behind either
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    with open_library(home) as library:
        assert source_state(library) == ("error", synclock.INTERRUPTED)
        assert library.catalog.overview().documents < count
        [report] = library.folders.sync()
        assert report.failed == 0
        assert source_state(library) == ("idle", None)
        assert library.catalog.overview().documents == count


# --- item 16: atomic-write temp files left by a crash ------------------------------------------


def crash_leftover(home: Path, real: Path, seconds_ago: float) -> Path:
    """A temp file named as ``atomic_write`` names them, half written, as a crash leaves it."""
    temp = real.parent / f".{real.name}.k3j2h1g0.tmp"
    temp.write_bytes(b"---\nid: half")
    stamp = time.time() - seconds_ago
    os.utime(temp, (stamp, stamp))
    return temp


def test_open_removes_temp_files_a_crashed_write_left_in_docs(home: Path) -> None:
    """issue 7 item 16: temp files of interrupted atomic writes stayed in docs/ for good."""
    with open_library(home) as library:
        library.writing.add_document(
            "Heron notes", "Herons nest by the estuary.", "note://heron", by_agent=False
        )
    [real] = (home / DOCS_DIR).glob("*.md")
    before = real.read_bytes()
    temp = crash_leftover(home, real, seconds_ago=3600)
    registry_temp = crash_leftover(home, home / "sources.json", seconds_ago=3600)
    with open_library(home) as library:
        assert not temp.exists() and not registry_temp.exists()
        assert real.read_bytes() == before
        assert [h.title for h in library.lookup.search("heron estuary").hits] == ["Heron notes"]
        library.writing.reindex(rebuild=True)
        assert library.catalog.overview().documents == 1


def test_open_keeps_a_young_temp_file_and_one_a_live_writer_holds(home: Path) -> None:
    """issue 7 item 16: another process may be writing that temp file right now."""
    docs = home / DOCS_DIR
    docs.mkdir(parents=True)
    young = crash_leftover(home, docs / "a-0000000000000001.md", seconds_ago=0)
    held = crash_leftover(home, docs / "a-0000000000000002.md", seconds_ago=3600)
    mine = docs / ".notes.md.backup"  # not our temp-name pattern: never touched
    mine.write_text("a user's file")
    with open(held, "rb") as handle:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        with open_library(home):
            pass
    assert young.exists() and held.exists() and mine.exists()
    with open_library(home):
        pass
    assert young.exists() and not held.exists() and mine.exists()


def test_reindex_never_indexes_a_temp_file(home: Path) -> None:
    """issue 7 item 16: a temp file (even a fresh one, kept at open) is never a document."""
    with open_library(home) as library:
        library.writing.add_document(
            "Heron notes", "Herons nest by the estuary.", "note://heron", by_agent=False
        )
        [real] = (home / DOCS_DIR).glob("*.md")
        temp = real.parent / f".{real.name}.abcdefgh.tmp"
        temp.write_bytes(real.read_bytes().replace(b"Herons", b"Egrets"))
        library.writing.reindex(rebuild=True)
        assert library.catalog.overview().documents == 1
        assert library.lookup.search("egrets").hits == ()


def test_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    """issue 7 item 16: the temp-name pattern the cleanup matches is the one writes use."""
    target = tmp_path / "docs" / "a.md"
    atomic_write(target, b"text")
    assert [p.name for p in target.parent.iterdir()] == ["a.md"]
