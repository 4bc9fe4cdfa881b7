"""Paging a source: ``total`` counts what the pages hold (issue 7 item 20).

A real folder in which some files are byte-identical copies (stored once, held at two or
three paths), synced into a real ``kb.db``. An agent pages with ``limit`` / ``offset``
until ``offset`` reaches ``total``; it must see every path exactly once.
"""

from __future__ import annotations

from pathlib import Path

from kb_mcp.library import Library
from kb_mcp.settings import Settings

UNIQUE_FILES = 11
COPIES = {"shared.md": ("copy-a/shared.md", "copy-b/shared.md"), "twin.md": ("x/twin.md",)}


def _folder(root: Path) -> set[str]:
    """Write the folder; return every relative path it holds."""
    paths = set()
    for n in range(UNIQUE_FILES):
        (root / f"note-{n:02d}.md").write_text(f"# Note {n}\n\nbody {n}\n", encoding="utf-8")
        paths.add(f"note-{n:02d}.md")
    for original, copies in COPIES.items():
        for rel in (original, *copies):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"# {original}\n\nthe same text in every copy\n", encoding="utf-8")
            paths.add(rel)
    return paths


def test_list_source_paging_to_total_covers_every_path_exactly_once(tmp_path: Path) -> None:
    """issue 7 item 20: total was unique documents (fewer) while rows were paths."""
    folder = tmp_path / "notes"
    folder.mkdir()
    expected = _folder(folder)
    with Library(Settings(home=tmp_path / "home")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        seen: list[str] = []
        offset, total = 0, None
        while total is None or offset < total:
            page = library.catalog.list_source("notes", limit=4, offset=offset)
            total = page.total
            assert page.documents, f"empty page at offset {offset} of {total}"
            seen += [entry.path for entry in page.documents]
            offset += len(page.documents)
        documents = library.catalog.overview().documents
    assert total == len(expected)
    assert sorted(seen) == sorted(expected)  # each path once: no overlap, nothing skipped
    assert documents == UNIQUE_FILES + len(COPIES)  # dedup still stores each text once
