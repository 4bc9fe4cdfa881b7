"""PDFs in the default install, and failures retried once their cause has gone (issue 20 item 8).

The default install reads PDFs with pypdfium2 (permissive, a dependency); pymupdf4llm (AGPL,
the ``pdf`` extra) is the richer reader when it is installed. Which readers a process can
import is set here the way an install sets it: the ``kb-mcp`` under test runs in a child
process whose ``PYTHONPATH`` starts with a folder this test controls, holding a module of
the reader's name that fails to import as a missing one does. Removing that module is the
install: the child then imports the real library. Nothing of kb-mcp is patched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pymupdf = pytest.importorskip("pymupdf")  # writes the test PDFs (the dev extra)

RICH_READER = ("pymupdf4llm", "pymupdf")
DEFAULT_READER = ("pypdfium2",)


def manual_pdf() -> bytes:
    """A two-page manual: a large heading and body text on each page, titled by metadata."""
    document = pymupdf.open()
    for heading, body in [
        ("Installing the heliograph", "Mount the heliograph mirror facing south."),
        ("Adjusting the tripod", "Tighten the quillon screws before each reading."),
    ]:
        page = document.new_page()
        page.insert_text((72, 80), heading, fontsize=20)
        page.insert_text((72, 120), body, fontsize=11)
    document.set_metadata({"title": "Heliograph Manual"})
    return document.tobytes()


def hide(blockers: Path, *modules: str) -> None:
    """Make ``modules`` fail to import in the child, as when they are not installed."""
    blockers.mkdir(exist_ok=True)
    for module in modules:
        (blockers / f"{module}.py").write_text(
            f'raise ModuleNotFoundError("No module named {module!r}", name={module!r})\n'
        )


def install(blockers: Path, *modules: str) -> None:
    """Let the child import the real ``modules`` again."""
    for module in modules:
        (blockers / f"{module}.py").unlink()


def kb(home: Path, env: dict[str, str], blockers: Path, *args: str) -> str:
    paths = [str(blockers), os.environ.get("PYTHONPATH", "")]
    result = subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)],
        env={**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr  # 1: a file failed
    return result.stdout + result.stderr


def search_paths(home: Path, env: dict[str, str], blockers: Path, query: str) -> list[str]:
    found = json.loads(kb(home, env, blockers, "search", query, "--json"))
    return [hit["path"] for hit in found["results"]]


@pytest.fixture
def manuals(tmp_path: Path) -> Path:
    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "heliograph.pdf").write_bytes(manual_pdf())
    return folder


def test_without_the_pdf_extra_a_pdf_is_read_by_the_default_reader(
    tmp_path: Path, manuals: Path, child_env: dict[str, str]
) -> None:
    home, blockers = tmp_path / "home", tmp_path / "blockers"
    hide(blockers, *RICH_READER)
    out = kb(home, child_env, blockers, "add", str(manuals), "--yes")
    assert "1 added" in out and "0 failed" in out, out
    assert search_paths(home, child_env, blockers, "quillon screws") == ["heliograph.pdf"]
    shown = json.loads(kb(home, child_env, blockers, "read", "heliograph.pdf", "--json"))
    assert shown["title"] == "Heliograph Manual"
    text = shown["text"]
    # every page in order, each heading marked by its larger font
    order = [
        "# Installing the heliograph",
        "Mount the heliograph mirror facing south.",
        "# Adjusting the tripod",
        "Tighten the quillon screws before each reading.",
    ]
    assert [text.index(line) for line in order] == sorted(text.index(line) for line in order)


def test_a_pdf_the_rich_reader_fails_on_is_read_by_the_default_reader_with_a_note(
    tmp_path: Path, manuals: Path, child_env: dict[str, str]
) -> None:
    """A converter's bug is not the file's: when pymupdf4llm raises (here a pymupdf4llm
    whose converter always does), pypdfium2 reads the PDF and ``list`` says why."""
    home, blockers = tmp_path / "home", tmp_path / "blockers"
    blockers.mkdir()
    (blockers / "pymupdf4llm.py").write_text(
        "def to_markdown(*args, **kwargs):\n    raise RuntimeError('layout model crashed')\n"
    )
    out = kb(home, child_env, blockers, "add", str(manuals), "--yes")
    assert "1 added" in out and "0 failed" in out, out
    assert search_paths(home, child_env, blockers, "quillon screws") == ["heliograph.pdf"]
    [listed] = json.loads(kb(home, child_env, blockers, "list", "manuals", "--json"))["documents"]
    assert listed["note"] == (
        "pymupdf4llm failed (RuntimeError: layout model crashed); read by the built-in PDF reader"
    )


def test_a_pdf_failed_for_a_missing_reader_is_read_by_a_plain_sync_once_it_is_installed(
    tmp_path: Path, manuals: Path, child_env: dict[str, str]
) -> None:
    home, blockers = tmp_path / "home", tmp_path / "blockers"
    hide(blockers, *RICH_READER, *DEFAULT_READER)
    out = kb(home, child_env, blockers, "add", str(manuals), "--yes")
    assert "heliograph.pdf" in out and "No module named 'pypdfium2'" in out, out
    assert search_paths(home, child_env, blockers, "quillon screws") == []
    # the same sync, the file untouched, is not worth a retry: nothing changed
    again = kb(home, child_env, blockers, "sync")
    assert "No module named 'pypdfium2'" in again, again

    install(blockers, *DEFAULT_READER)
    kb(home, child_env, blockers, "sync")
    assert search_paths(home, child_env, blockers, "quillon screws") == ["heliograph.pdf"]


def test_a_failure_an_older_kb_mcp_recorded_without_its_cause_is_retried_once(
    tmp_path: Path,
) -> None:
    """A library synced before failures kept their reader environment holds failed files
    with no ``failed_under``: the next sync reads each again, and keeps the cause of any
    that fail again, so the one after leaves them alone."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings
    from kb_mcp.store import documents as rows

    folder = tmp_path / "manuals"
    folder.mkdir()
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()  # the source's row, empty
        source = rows.get_source(library.db.conn, "manuals")
        (folder / "heliograph.pdf").write_bytes(manual_pdf())
        (folder / "scan.pdf").write_bytes(b"%PDF-1.7\nnot a real pdf")
        with library.db.write() as conn:
            for name in ("heliograph.pdf", "scan.pdf"):
                stat = (folder / name).stat()
                conn.execute(  # as kb-mcp before this change left it: no cause kept
                    "INSERT INTO locations(source_id, path, path_key, state, reason, size, "
                    "mtime_ns) VALUES (?, ?, ?, 'failed', ?, ?, ?)",
                    (source.id, name, library.db.paths.key(name),
                     "reading PDF files needs the optional 'pdf' extra",
                     stat.st_size, stat.st_mtime_ns),
                )  # fmt: skip
        [report] = library.folders.sync()
        assert (report.added, report.failed) == (1, 1)
        assert [h.path for h in library.lookup.search("quillon screws").hits] == ["heliograph.pdf"]
        [(path, reason)] = report.failures
        assert path == "scan.pdf" and "not a valid PDF" in reason
        scan = rows.get_location(library.db.conn, source.id, library.db.paths.key("scan.pdf"))
        assert scan.failed_under is not None  # its cause kept: not read again until it goes


def test_a_failed_file_is_left_alone_in_the_same_environment_and_retried_in_another(
    tmp_path: Path,
) -> None:
    """Reading a failed file again is worth it only when its cause may have gone: a sync
    in the same reader environment leaves it (its recorded ``seen_at`` stays), a sync
    with another reader chosen (``pdf_mode``) reads it again."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings
    from kb_mcp.store import documents as rows

    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(b"%PDF-1.7\nnot a real pdf")
    home = tmp_path / "home"

    def sync_and_seen(pdf_mode: str) -> tuple[int, str]:
        with Library(Settings(home=home, embedder="none", pdf_mode=pdf_mode)) as library:
            [report] = library.folders.sync()
            source = rows.get_source(library.db.conn, "manuals")
            seen = library.db.conn.execute(
                "SELECT seen_at FROM locations WHERE source_id = ?", (source.id,)
            ).fetchone()[0]
            with library.db.write() as conn:  # a mark only a new read of the file replaces
                conn.execute("UPDATE locations SET seen_at = 'before'")
            return report.failed, seen

    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder)
    assert sync_and_seen("layout")[0] == 1
    assert sync_and_seen("layout") == (1, "before")  # not read again
    failed, seen = sync_and_seen("text")
    assert failed == 1 and seen != "before"  # read again by the other reader
