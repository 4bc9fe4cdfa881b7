"""Folders named in the configuration are sources; unnamed again, they leave the library."""

from __future__ import annotations

from pathlib import Path

from kb_mcp.library import Library
from kb_mcp.settings import load


def test_configured_folders_sync_as_sources_and_leave_when_unlisted(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "otter.md").write_text("# Otters\n\nThe otter holt is by the weir.\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'folders = ["{notes}"]\n', encoding="utf-8")

    with Library(load(home=home, environ={})) as library:
        [report] = library.folders.sync()
        assert (report.source, report.added) == ("notes", 1)
        assert [h.path for h in library.lookup.search("otter holt").hits] == ["otter.md"]
        assert not (home / "sources.json").exists()  # configured, not registered

    (home / "config.toml").write_text("folders = []\n", encoding="utf-8")
    with Library(load(home=home, environ={})) as library:
        assert library.folders.sync() == []
        assert library.lookup.search("otter holt").hits == ()
        assert [s.name for s in library.catalog.overview().sources] == []
