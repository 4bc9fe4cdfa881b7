"""A reader's notes reach the user, and a source listing counts what it lists.

``Converted.notes`` ("frontmatter ignored: …") were computed and dropped: the file was
indexed without its frontmatter and nobody was told. And the listing's head said
"documents X-Y of total" while its entries are paths (issue 7 item 20 follow-up).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from kb_mcp import render
from kb_mcp.library import Library
from kb_mcp.settings import Settings

ALIASED = "---\nanchor: &x Deploy\ntitle: *x\n---\n# Aliased\n\nbody text\n"
NOTE = "frontmatter ignored: YAML anchors and aliases are not accepted (line 2)"


def _notes(folder: Path) -> None:
    folder.mkdir()
    (folder / "aliased.md").write_text(ALIASED, encoding="utf-8")
    (folder / "plain.md").write_text("# Plain\n\nno frontmatter\n", encoding="utf-8")


def test_list_source_entry_shows_what_the_reader_ignored(tmp_path: Path) -> None:
    """issue 7 follow-up: Converted.notes are kept on the location and listed."""
    folder = tmp_path / "notes"
    _notes(folder)
    with Library(Settings(home=tmp_path / "home")) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        notes = {e.path: e.note for e in lib.catalog.list_source("notes").documents}
        assert notes == {"aliased.md": NOTE, "plain.md": None}
        os.utime(folder / "aliased.md", ns=(1, 1))  # same bytes, new mtime: not converted
        lib.folders.sync()
        assert {e.path: e.note for e in lib.catalog.list_source("notes").documents} == notes
        (folder / "aliased.md").write_text("# Fixed\n\nno aliases now\n", encoding="utf-8")
        lib.folders.sync()
        assert {e.note for e in lib.catalog.list_source("notes").documents} == {None}


def test_listing_text_counts_entries_and_shows_notes(tmp_path: Path) -> None:
    """issue 7 follow-up: the head counts entries (paths), as ``total`` does."""
    folder = tmp_path / "notes"
    _notes(folder)
    with Library(Settings(home=tmp_path / "home")) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        text = render.listing_text(lib.catalog.list_source("notes"))
        past_end = render.listing_text(lib.catalog.list_source("notes", offset=5))
    assert text.splitlines()[0] == "source notes: entries 1-2 of 2 (one per path, newest first)"
    assert f"  note: {NOTE}" in text.splitlines()
    assert past_end == "source notes: no entries at offset 5 (2 in all)"


def test_list_command_shows_the_note(tmp_path: Path, kb_cli: Callable[..., object]) -> None:
    """issue 7 follow-up: the CLI shows the note too, in text and JSON."""
    folder = tmp_path / "notes"
    _notes(folder)
    assert kb_cli("add", str(folder), "--yes").returncode == 0
    assert kb_cli("sync").returncode == 0
    text = kb_cli("list", "notes")
    assert f"  note: {NOTE}" in text.stdout, text.stderr
    listed = json.loads(kb_cli("list", "notes", "--json").stdout)
    assert {d["path"]: d["note"] for d in listed["documents"]} == {
        "aliased.md": NOTE,
        "plain.md": None,
    }
