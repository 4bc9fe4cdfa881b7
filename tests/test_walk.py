"""The folder walk, on real folders built in ``tmp_path``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from kb_mcp.errors import InvalidInput, NotFound, Refused
from kb_mcp.ingest.walk import WalkResult, walk_folder

SUPPORTED = {".md", ".txt", ".py", ".json", ".yaml", ".html", ""}


def accept(path: Path) -> bool:
    """Stands in for ``readers.is_supported``: a suffix allow-list."""
    return path.suffix.lower() in SUPPORTED


def make(root: Path, files: Iterable[str], text: str = "x") -> None:
    """Create each relative path under ``root`` (a trailing ``/`` makes a folder)."""
    for rel in files:
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def walk(root: Path, **kwargs: object) -> WalkResult:
    return walk_folder(root, accept=accept, **kwargs)  # type: ignore[arg-type]


def rels(result: WalkResult) -> list[str]:
    return sorted(f.rel for f in result.files)


def test_walk_keeps_supported_files_with_posix_rel_and_stat(tmp_path: Path) -> None:
    make(tmp_path, ["a.md", "sub/deeper/b.txt"])
    result = walk(tmp_path)
    assert rels(result) == ["a.md", "sub/deeper/b.txt"]
    found = {f.rel: f for f in result.files}["sub/deeper/b.txt"]
    assert found.path == tmp_path / "sub" / "deeper" / "b.txt"
    assert (found.size, found.mtime_ns) == (1, found.path.stat().st_mtime_ns)
    assert result.total_bytes == 2
    assert result.skipped == {}


def test_walk_prunes_vcs_dependency_and_build_folders(tmp_path: Path) -> None:
    make(
        tmp_path,
        [
            "keep.md",
            ".git/HEAD",
            "node_modules/pkg/readme.md",
            "__pycache__/x.py",
            "dist/out.html",
            "pkg.egg-info/PKG-INFO",
            "Build/notes.md",
        ],
    )
    result = walk(tmp_path)
    assert rels(result) == ["Build/notes.md", "keep.md"]
    assert result.skipped == {"pruned": 5}


def test_walk_prunes_every_dot_folder(tmp_path: Path) -> None:
    make(tmp_path, ["keep.md", ".obsidian/workspace.json", ".trash/old.md", "a/.hidden/x.md"])
    result = walk(tmp_path)
    assert rels(result) == ["keep.md"]
    assert result.skipped == {"hidden": 3}


def test_walk_prunes_virtualenv_and_tagged_cache_by_marker(tmp_path: Path) -> None:
    make(
        tmp_path, ["keep.md", "myenv/pyvenv.cfg", "myenv/lib/x.py", "out/CACHEDIR.TAG", "out/a.md"]
    )
    result = walk(tmp_path)
    assert rels(result) == ["keep.md"]
    assert result.skipped == {"pruned": 2}


def test_walk_keeps_vendor_and_env_folders(tmp_path: Path) -> None:
    make(tmp_path, ["vendor/acme-contract.md", "env/staging.md"])
    assert rels(walk(tmp_path)) == ["env/staging.md", "vendor/acme-contract.md"]


def test_walk_skips_junk_and_lock_files(tmp_path: Path) -> None:
    junk = [
        ".DS_Store",
        "Thumbs.db",
        "desktop.ini",
        "notes.md~",
        ".notes.md.swp",
        "notes.md.swo",
        ".#notes.md",
        "#notes.md#",
        "upload.tmp",
        "~$report.docx",
        "._notes.md",
    ]
    locks = [
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Cargo.lock",
        "Gemfile.lock",
        "composer.lock",
        "uv.lock",
        "Pipfile.lock",
        "go.sum",
        "flake.lock",
    ]
    make(tmp_path, ["notes.md", *junk, *locks])
    result = walk(tmp_path)
    assert rels(result) == ["notes.md"]
    assert result.skipped == {"junk": len(junk) + len(locks)}


def test_walk_skips_dot_files(tmp_path: Path) -> None:
    make(tmp_path, ["notes.md", ".editorconfig", "sub/.prettierrc"])
    result = walk(tmp_path)
    assert rels(result) == ["notes.md"]
    assert result.skipped == {"hidden": 2}


def test_walk_skips_sensitive_files_and_never_enters_credential_folders(tmp_path: Path) -> None:
    make(
        tmp_path,
        [
            "notes.md",
            "id_rsa",
            "deploy.pem",
            ".env",
            "config/secrets.yaml",
            "gcp-service-account.json",
            "Keychains/login.md",
            ".ssh/config",
        ],
    )
    result = walk(tmp_path)
    assert rels(result) == ["notes.md"]
    assert result.skipped == {"sensitive": 7}


def test_walk_counts_unsupported_and_too_large(tmp_path: Path) -> None:
    make(tmp_path, ["small.md", "photo.jpg", "tool.exe"])
    (tmp_path / "big.md").write_text("x" * 101)
    result = walk(tmp_path, max_file_bytes=100)
    assert rels(result) == ["small.md"]
    assert result.skipped == {"unsupported": 2, "too_large": 1}


def test_walk_skips_fifo_as_unsupported(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    assert walk(tmp_path).skipped == {"unsupported": 1}


def test_walk_kbignore_applies_each_syntax(tmp_path: Path) -> None:
    (tmp_path / ".kbignore").write_text(
        "# generated\n"
        "*.log.md\n"
        "/todo.md\n"
        "docs/old\n"
        "**/scratch/\n"
        "archive/**\n"
        "drafts/\n"
        "*.txt\n"
        "!keep.txt\n"
        "\\#inbox.md\n"
    )
    make(
        tmp_path,
        [
            "run.log.md",
            "a/run.log.md",
            "todo.md",
            "a/todo.md",
            "docs/old/x.md",
            "x/docs/old/y.md",
            "deep/er/scratch/z.md",
            "archive/2020/a.md",
            "drafts/d.md",
            "sub/drafts",  # a file of that name: the dir-only rule spares it
            "notes.txt",
            "sub/keep.txt",
            "#inbox.md",
        ],
    )
    result = walk(tmp_path)
    assert rels(result) == ["a/todo.md", "sub/drafts", "sub/keep.txt", "x/docs/old/y.md"]
    # Five files, and four folders that count once each: docs/old, deep/er/scratch,
    # drafts, and archive/2020 (archive/** excludes folders inside archive too).
    assert result.skipped == {"hidden": 1, "ignored": 9}


def test_walk_kbignore_prunes_folder_without_listing_it(tmp_path: Path) -> None:
    (tmp_path / ".kbignore").write_text("generated/\n")
    make(tmp_path, ["keep.md", *(f"generated/{i}.md" for i in range(50))])
    result = walk(tmp_path)
    assert rels(result) == ["keep.md"]
    assert result.skipped == {"hidden": 1, "ignored": 1}


def test_walk_ignore_globs_follow_kbignore(tmp_path: Path) -> None:
    (tmp_path / ".kbignore").write_text("*.md\n")
    make(tmp_path, ["a.md", "readme.md", "b.txt"])
    result = walk(tmp_path, ignore_globs=["!readme.md", "*.txt"])
    assert rels(result) == ["readme.md"]


def test_walk_broken_kbignore_pattern_raises(tmp_path: Path) -> None:
    (tmp_path / ".kbignore").write_text("x[z-a]\n")
    with pytest.raises(InvalidInput, match="kbignore line 1"):
        walk(tmp_path)


def test_walk_kbignore_linked_to_key_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make(tmp_path, ["home/.ssh/id_rsa", "root/"])
    (root / ".kbignore").symlink_to(tmp_path / "home" / ".ssh" / "id_rsa")
    with pytest.raises(Refused, match=r"credential folder \.ssh"):
        walk(root)


def test_walk_skips_harmless_name_linked_to_key(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make(root, ["real.md", ".ssh/id_rsa"])
    (root / "notes.md").symlink_to(root / ".ssh" / "id_rsa")
    (root / "docs").symlink_to(root / ".ssh")
    result = walk(root)
    assert rels(result) == ["real.md"]
    assert result.skipped == {"sensitive": 3}


def test_walk_skips_symlinks_leading_outside_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make(tmp_path, ["root/real.md", "outside/x.md"])
    (root / "linked.md").symlink_to(tmp_path / "outside" / "x.md")
    (root / "linked-dir").symlink_to(tmp_path / "outside")
    result = walk(root)
    assert rels(result) == ["real.md"]
    assert result.skipped == {"outside_root_symlink": 2}


def test_walk_follows_symlinks_inside_root_under_their_own_name(tmp_path: Path) -> None:
    make(tmp_path, ["docs/a.md", "other/b.md"])
    (tmp_path / "alias.md").symlink_to(tmp_path / "docs" / "a.md")
    (tmp_path / "shortcut").symlink_to(tmp_path / "other", target_is_directory=True)
    (tmp_path / "other-alias").symlink_to(tmp_path / "docs")
    result = walk(tmp_path)
    # docs/ is reached for real first, so its second route is walked no more.
    assert rels(result) == ["alias.md", "docs/a.md", "other/b.md"]
    assert result.skipped == {"revisited_dir": 2}


def test_walk_symlink_loop_terminates(tmp_path: Path) -> None:
    make(tmp_path, ["a/b/note.md"])
    (tmp_path / "a" / "b" / "up").symlink_to(tmp_path / "a")
    (tmp_path / "a" / "self").symlink_to(tmp_path)
    result = walk(tmp_path)
    assert rels(result) == ["a/b/note.md"]
    assert result.skipped == {"revisited_dir": 2}


def test_walk_counts_dangling_symlink(tmp_path: Path) -> None:
    (tmp_path / "gone.md").symlink_to(tmp_path / "nowhere.md")
    assert walk(tmp_path).skipped == {"broken_symlink": 1}


def test_walk_cap_keeps_newest_first_and_reports_the_rest(tmp_path: Path) -> None:
    for i in range(5):
        path = tmp_path / f"n{i}.md"
        path.write_text("x" * (i + 1))
        os.utime(path, ns=(1_000_000_000 * (i + 1),) * 2)
    result = walk(tmp_path, max_files=3)
    assert [f.rel for f in result.files] == ["n4.md", "n3.md", "n2.md"]
    assert result.over_cap == 2
    assert result.beyond_cap == ("n1.md", "n0.md")
    assert result.total_bytes == 5 + 4 + 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their mode")
def test_walk_counts_unreadable_folder_without_raising(tmp_path: Path) -> None:
    make(tmp_path, ["ok.md", "locked/secret-ish.md"])
    (tmp_path / "locked").chmod(0)
    try:
        result = walk(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert rels(result) == ["ok.md"]
    assert result.skipped == {"unreadable_dir": 1}
    assert result.unreadable_dirs == ("locked",)


def test_walk_folder_vanishing_mid_walk_is_counted_not_raised(tmp_path: Path) -> None:
    make(tmp_path, ["a.md", "sub/b.md"])

    def accept_and_delete_sub(path: Path) -> bool:
        if path.name == "a.md":
            (tmp_path / "sub" / "b.md").unlink()
            (tmp_path / "sub").rmdir()
        return True

    result = walk_folder(tmp_path, accept=accept_and_delete_sub)
    assert rels(result) == ["a.md"]
    assert result.skipped == {"unreadable_dir": 1}
    assert result.unreadable_dirs == ("sub",)


def test_walk_reports_every_skip_reason_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root).mkdir()
    (root / ".kbignore").write_text("ignored.md\n")
    make(
        root,
        [
            "kept.md",
            "ignored.md",
            "photo.jpg",
            "id_rsa",
            "node_modules/x.md",
            ".cfg",
            "yarn.lock",
        ],
    )
    (root / "big.md").write_text("x" * 20)
    (root / "out.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("x")
    (root / "loop").symlink_to(root)
    result = walk(root, max_file_bytes=10)
    assert rels(result) == ["kept.md"]
    assert result.skipped == {
        "sensitive": 1,
        "pruned": 1,
        "hidden": 2,
        "junk": 1,
        "ignored": 1,
        "unsupported": 1,
        "too_large": 1,
        "outside_root_symlink": 1,
        "revisited_dir": 1,
    }


def test_walk_missing_root_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        walk(tmp_path / "nope")


def test_walk_root_that_is_a_file_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x")
    with pytest.raises(InvalidInput, match="is not a folder"):
        walk(tmp_path / "a.md")


def test_walk_refuses_root_inside_credential_folder(tmp_path: Path) -> None:
    make(tmp_path, [".aws/notes/a.md"])
    with pytest.raises(Refused, match=r"credential folder \.aws"):
        walk(tmp_path / ".aws" / "notes")
