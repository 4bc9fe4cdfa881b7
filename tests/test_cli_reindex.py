"""kb-mcp reindex --rebuild: files are the truth, so a damaged kb.db loses nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def kb(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rebuild_recovers_from_a_corrupt_database_and_keeps_the_broken_file(tmp_path: Path):
    home = tmp_path / "home"
    added = kb(
        home,
        "add-text",
        "--title",
        "Signing keys",
        "--uri",
        "notes://keys",
        stdin="Rotate the signing key every ninety days.\n",
    )
    assert added.returncode == 0, added.stderr
    for name in ("kb.db-wal", "kb.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "kb.db").write_bytes(b"not a database " * 500)

    broken = kb(home, "search", "signing key")
    assert broken.returncode == 5 and "reindex --rebuild" in broken.stderr

    rebuilt = kb(home, "reindex", "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "moved it aside" in rebuilt.stderr
    assert [p.name.split(".broken-")[0] for p in home.glob("kb.db.broken-*")] == ["kb.db"]

    found = json.loads(kb(home, "search", "signing key", "--json").stdout)
    assert [r["path"] for r in found["results"]] == ["notes://keys"]


def test_plain_reindex_does_not_touch_an_unreadable_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "kb.db").write_bytes(b"not a database " * 500)
    result = kb(home, "reindex")
    assert result.returncode == 5
    assert (home / "kb.db").read_bytes().startswith(b"not a database")
    assert not list(home.glob("kb.db.broken-*"))


def test_reindex_without_rebuild_commits_document_by_document(tmp_path: Path) -> None:
    """issue 7 item 18: a plain reindex held one write lock for the whole run (every
    document and the sync in one transaction); other writers got "database is locked".
    Counted on the real connection: each re-stored document is its own commit."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    documents = 5
    written = tmp_path / "written"
    with Library(Settings(home=written)) as library:
        for n in range(documents):
            library.writing.add_document(f"Note {n}", f"text {n}", f"note://{n}", by_agent=False)
    restored = tmp_path / "restored"  # the files without the index: reindex must store all
    shutil.copytree(written / "docs", restored / "docs")
    with Library(Settings(home=restored)) as library:
        commits: list[bool] = []

        def count_commit() -> bool:
            commits.append(True)
            return False  # False lets the commit go ahead

        library.db.conn.set_commit_hook(count_commit)
        report = library.writing.reindex()
        library.db.conn.set_commit_hook(None)
        assert report.documents == documents
        assert len(commits) >= documents
