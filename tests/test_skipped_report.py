"""Which files a folder sync left out or could not read, and why: named, not only counted.

Issue 20 item 9: ``list`` (CLI, JSON, MCP) and ``doctor`` said "skipped: hidden 13,
sensitive 5, unsupported 118" and "failed files: 3" without a name. A sync now keeps,
in its source's status, the first paths of each skip reason (redacted: a refused file's
name may hold the secret it was refused for), and ``list SOURCE`` shows them beside the
failed files with how to read one anyway; ``--skipped`` / ``--failed`` name them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings

# A secret in a file name: the file is skipped (a binary format), and its path is stored.
SECRET = "Hx9fQ2mLw8Zt"
SECRET_NAME = f"password={SECRET}.png"
HIDDEN = 12  # more than a listing names (walk.SKIPPED_EXAMPLES)


def make_folder(folder: Path) -> None:
    """A note, a file that fails, a sensitive one, a secret-named one, many dot-files."""
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\nthe kept note\n", encoding="utf-8")
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02\x03binary" * 20)
    (folder / "secrets.txt").write_text("prod\nHx9fQ2mLw8Zt\n", encoding="utf-8")
    (folder / SECRET_NAME).write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    for n in range(HIDDEN):
        (folder / f".hidden-{n:02}.md").write_text("# dot\n", encoding="utf-8")


def synced(tmp_path: Path) -> Library:
    make_folder(tmp_path / "notes")
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    library.folders.add_folder(tmp_path / "notes")
    library.folders.sync()
    return library


def test_a_source_listing_names_failed_and_skipped_files_with_how_to_read_them(
    tmp_path: Path,
) -> None:
    with synced(tmp_path) as library:
        listing = library.catalog.list_source("notes")
    assert [(f.path, f.reason) for f in listing.failed] == [
        ("blob.txt", "binary data (20% control characters)")
    ]
    assert listing.failed_total == 1
    groups = {g.reason: g for g in listing.skipped}
    assert groups["sensitive"].paths == ("secrets.txt",)
    assert "never read" in groups["sensitive"].how_to_include
    assert groups["hidden"].count == HIDDEN
    assert groups["hidden"].paths == tuple(f".hidden-{n:02}.md" for n in range(10))
    assert "`!` line" in groups["hidden"].how_to_include
    assert groups["unsupported"].paths == ("password=[REDACTED:password]",)


def test_a_skipped_path_with_a_secret_in_its_name_is_stored_redacted(tmp_path: Path) -> None:
    with synced(tmp_path) as library:
        library.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stored = [row[0] for row in library.db.conn.execute("SELECT skipped FROM sources")]
    assert any("password=[REDACTED:password]" in (value or "") for value in stored)
    assert SECRET.encode() not in (tmp_path / "home" / DB_FILE).read_bytes()


def test_list_command_names_them_and_says_how_to_see_all(
    tmp_path: Path, kb_cli: Callable[..., object]
) -> None:
    make_folder(tmp_path / "notes")
    assert kb_cli("add", str(tmp_path / "notes"), "--yes").returncode == 0
    overview = kb_cli("list").stdout
    assert (
        "  skipped: hidden 12, sensitive 1, unsupported 1 (which and why: `kb-mcp list notes`)"
        in overview
    )
    text = kb_cli("list", "notes").stdout.splitlines()
    assert "failed (not indexed): 1" in text
    assert "  blob.txt: binary data (20% control characters)" in text
    assert "  secrets.txt" in text
    assert "  … all of them: `kb-mcp list notes --skipped`" in text
    assert "  .hidden-11.md" not in text
    listed = json.loads(kb_cli("list", "notes", "--json").stdout)
    assert {g["reason"]: g["count"] for g in listed["skipped"]} == {
        "hidden": HIDDEN,
        "sensitive": 1,
        "unsupported": 1,
    }
    every = kb_cli("list", "notes", "--skipped").stdout.splitlines()
    assert "  .hidden-11.md" in every
    assert "  blob.txt: binary data (20% control characters)" in every
    failed = kb_cli("list", "notes", "--failed").stdout
    assert "blob.txt: binary data" in failed and "hidden" not in failed
    assert SECRET not in overview + "\n".join(text + every) + failed


def test_doctor_names_the_failed_files_and_counts_the_skipped(
    tmp_path: Path, kb_cli: Callable[..., object]
) -> None:
    make_folder(tmp_path / "notes")
    assert kb_cli("add", str(tmp_path / "notes"), "--yes").returncode == 0
    checks = {c["name"]: c for c in json.loads(kb_cli("doctor", "--json").stdout)["checks"]}
    assert checks["failed files"]["detail"] == (
        "1: notes/blob.txt: binary data (20% control characters) "
        "(all: `kb-mcp list notes --failed`)"
    )
    assert checks["skipped files"]["detail"].startswith(
        "notes: hidden 12, sensitive 1, unsupported 1 (which and why: `kb-mcp list SOURCE`"
    )


@pytest.mark.anyio
async def test_the_list_tool_names_them_over_mcp(
    tmp_path: Path, home: Path, mcp_client: Callable[..., object]
) -> None:
    make_folder(tmp_path / "notes")
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(tmp_path / "notes")
        library.folders.sync()
    async with mcp_client() as client:
        listed = (await client.call_tool("list", {"source": "notes"})).structured_content
        overview = (await client.call_tool("list", {})).structured_content
    assert [f["path"] for f in listed["failed"]] == ["blob.txt"]
    assert {g["reason"]: g["paths"][:1] for g in listed["skipped"]} == {
        "hidden": [".hidden-00.md"],
        "sensitive": ["secrets.txt"],
        "unsupported": ["password=[REDACTED:password]"],
    }
    [notes] = [s for s in overview["sources"] if s["name"] == "notes"]
    assert notes["skipped"] == {"hidden": HIDDEN, "sensitive": 1, "unsupported": 1}
