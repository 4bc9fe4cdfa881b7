"""``.gitignore`` and ``.kbignore`` at every level of a folder source (issue 20 item 12).

A walk of a real folder decides; each test names the rule it pins: git's semantics
within a file, deeper files over shallower ones, ``.kbignore`` over ``.gitignore``, the
source's ``--ignore`` patterns over both, lenient ``.gitignore`` and strict ``.kbignore``
errors, the per-source choice, and the file watcher reading ignore files again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.ingest.readers import is_supported
from kb_mcp.ingest.sources import FolderSource
from kb_mcp.ingest.walk import walk_folder
from kb_mcp.ingest.watch import FolderWatcher


def make(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def kept(root: Path, *, gitignore: bool = True, ignore: tuple[str, ...] = ()) -> set[str]:
    walk = walk_folder(root, accept=is_supported, ignore_globs=ignore, gitignore=gitignore)
    return {f.rel for f in walk.files}


def test_gitignore_patterns_apply_below_the_folder_that_holds_them(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "*.log.md\n/top-only.md\nout/\n",
            "a.log.md": "",
            "top-only.md": "",
            "sub/top-only.md": "",
            "sub/out/gen.md": "",
            "sub/.gitignore": "local.md\n",
            "sub/local.md": "",
            "local.md": "",
            "sub/deeper/b.log.md": "",
        },
    )
    assert kept(tmp_path) == {"sub/top-only.md", "local.md"}


def test_a_deeper_gitignore_overrides_a_shallower_one(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "*.gen.md\n",
            "docs/.gitignore": "!keep.gen.md\n",
            "docs/keep.gen.md": "",
            "docs/drop.gen.md": "",
            "drop.gen.md": "",
        },
    )
    assert kept(tmp_path) == {"docs/keep.gen.md"}


def test_kbignore_sits_on_top_of_gitignore_and_ignore_patterns_on_top_of_both(
    tmp_path: Path,
) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "scratch.md\ndrafts/\n",
            ".kbignore": "!scratch.md\nprivate.md\n",
            "scratch.md": "",
            "private.md": "",
            "drafts/a.md": "",
            "notes/.kbignore": "*.md\n!wanted.md\n",
            "notes/wanted.md": "",
            "notes/other.md": "",
        },
    )
    assert kept(tmp_path) == {"scratch.md", "notes/wanted.md"}
    assert kept(tmp_path, ignore=("scratch.md",)) == {"notes/wanted.md"}


def test_without_gitignore_only_the_root_kbignore_counts_as_before(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "gen.md\n",
            ".kbignore": "private.md\n",
            "gen.md": "",
            "private.md": "",
            "sub/.kbignore": "nested.md\n",
            "sub/nested.md": "",
        },
    )
    assert kept(tmp_path, gitignore=False) == {"gen.md", "sub/nested.md"}


def test_a_gitignore_line_git_would_drop_is_dropped_a_kbignore_one_is_an_error(
    tmp_path: Path,
) -> None:
    make(tmp_path, {".gitignore": "\\\nold.md\n", "old.md": "", "new.md": ""})
    assert kept(tmp_path) == {"new.md"}
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".kbignore").write_text("ok.md\n\\\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"sub/\.kbignore line 2"):
        kept(tmp_path)


def test_a_pruned_or_hidden_folder_named_by_a_negation_is_read(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".kbignore": "!.github/\n!dist/\n",
            ".github/workflows/ci.md": "",
            "dist/notes.md": "",
            "node_modules/x/readme.md": "",
            ".env": "API_KEY=x\n",
        },
    )
    assert kept(tmp_path) == {".github/workflows/ci.md", "dist/notes.md"}
    (tmp_path / ".kbignore").write_text("!.env\n", encoding="utf-8")
    assert ".env" not in kept(tmp_path)  # a sensitive file is never re-included


def test_the_watcher_reads_a_changed_nested_gitignore_again(tmp_path: Path) -> None:
    make(tmp_path, {"docs/a.md": "", "docs/gen.md": ""})
    source = FolderSource("notes", str(tmp_path), gitignore=True)
    watcher = FolderWatcher([source], lambda names: None, mode="off")
    assert watcher.sources_changed([str(tmp_path / "docs" / "gen.md")]) == {"notes"}
    (tmp_path / "docs" / ".gitignore").write_text("gen.md\n", encoding="utf-8")
    assert watcher.sources_changed([str(tmp_path / "docs" / ".gitignore")]) == {"notes"}
    assert watcher.sources_changed([str(tmp_path / "docs" / "gen.md")]) == set()
    assert watcher.sources_changed([str(tmp_path / "docs" / "a.md")]) == {"notes"}


def test_a_gitignore_whitelist_does_not_reopen_pruned_folders(tmp_path: Path) -> None:
    """A ``.gitignore`` of the form "ignore all, re-include *.md and every folder" speaks
    of what git tracks: node_modules, .git and dot-folders stay pruned; a ``.kbignore``
    ``!*/`` re-includes pruned folders, but never version-control internals."""
    make(
        tmp_path,
        {
            ".gitignore": "*\n!*.md\n!*/\n",
            "notes.md": "",
            "notes.txt": "",
            "node_modules/pkg/readme.md": "",
            ".git/description.md": "",
            ".github/ci.md": "",
        },
    )
    assert kept(tmp_path) == {"notes.md"}
    (tmp_path / ".kbignore").write_text("!*/\n", encoding="utf-8")
    assert kept(tmp_path) == {"notes.md", "node_modules/pkg/readme.md", ".github/ci.md"}
