"""``kb-mcp add`` / ``sync`` / ``list`` / ``remove`` as a user runs them: real subprocesses.

Every command is ``python -m kb_mcp <command> ... --home <tmp>`` with stdin closed (so
"no TTY" is what the command sees, never a prompt waiting on the developer's terminal)
and without the developer's ``KB_MCP_*`` environment. What the commands did is checked
from the outside: their output, ``sources.json``, the files under the home folder, and
what ``search`` / ``list`` answer afterwards. (GitHub issue "Folder sources and real file
formats".)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kb_mcp.errors import Conflict, NotFound, Refused
from kb_mcp.ingest.sources import REGISTRY_FILE
from kb_mcp.library import Library
from kb_mcp.settings import Settings

CLI_TIMEOUT_S = 60

Cli = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def kb(home: Path, child_env: dict[str, str]) -> Cli:
    """Run ``python -m kb_mcp <args> --home <home>`` with stdin closed; the finished process."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)],
            env=child_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )

    return run


def ok(kb: Cli, *args: str) -> str:
    """Run a command that must succeed; its stdout."""
    done = kb(*args)
    assert done.returncode == 0, f"kb-mcp {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def as_json(kb: Cli, *args: str) -> Any:
    return json.loads(ok(kb, *args, "--json"))


def search_paths(kb: Cli, query: str) -> list[tuple[str, str]]:
    return [(r["source"], r["path"]) for r in as_json(kb, "search", query)["results"]]


def folder_sources(kb: Cli) -> list[dict[str, Any]]:
    return [s for s in as_json(kb, "list")["sources"] if s["kind"] == "folder"]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A folder of two notes, one of them large enough to weigh a quarter megabyte."""
    folder = tmp_path / "notes"
    folder.mkdir()
    paragraph = "The estimate counts chunks from file sizes before reading anything. " * 6
    (folder / "big.txt").write_text((paragraph + "\n\n") * 750, encoding="utf-8")
    (folder / "small.md").write_text("# Small\n\nthe ptarmigan note\n", encoding="utf-8")
    (folder / ".env").write_text("TOKEN=never-read\n", encoding="utf-8")
    return folder


# The first line of `kb-mcp add PATH`: "<path>: 2 files, 0.3 MB, about 170 chunks".
ESTIMATE = re.compile(
    r"^(?P<path>.+): (?P<files>\d+) files, (?P<mb>[\d.]+) MB, about (?P<chunks>\d+) chunks$"
)


# --- add PATH ---------------------------------------------------------------------------------


def test_add_folder_with_yes_prints_the_estimate_before_adding(
    kb: Cli, notes: Path, home: Path
) -> None:
    lines = ok(kb, "add", str(notes), "--yes").splitlines()
    estimate = ESTIMATE.match(lines[0])
    assert estimate, lines
    assert (estimate["path"], estimate["files"], estimate["mb"]) == (
        str(notes.resolve()),
        "2",
        "0.3",
    )
    added = lines.index(f"added source 'notes' → {notes.resolve()}")
    assert added > 0  # the cost comes first
    assert "skipped: sensitive 1" in lines[1:added]
    assert lines[added + 1].startswith(
        "notes: 2 added, 0 updated, 0 unchanged, 0 removed, 0 failed"
    )
    # "about N chunks" is an estimate from sizes; it should be near what was stored.
    stored = as_json(kb, "list")["chunks"]
    assert 0.5 * stored <= int(estimate["chunks"]) <= 1.5 * stored
    assert search_paths(kb, "ptarmigan") == [("notes", "small.md")]
    registry = json.loads((home / REGISTRY_FILE).read_text(encoding="utf-8"))
    # a new source honours .gitignore (issue 20 item 12), and says so in the registry
    assert registry == [
        {"name": "notes", "root": str(notes.resolve()), "ignore": [], "gitignore": True}
    ]


def test_add_folder_with_name_and_ignore_registers_both(kb: Cli, notes: Path, home: Path) -> None:
    ok(kb, "add", str(notes), "--name", "field-notes", "--ignore", "*.txt", "--yes")
    [source] = folder_sources(kb)
    assert (source["name"], source["documents"]) == ("field-notes", 1)
    registry = json.loads((home / REGISTRY_FILE).read_text(encoding="utf-8"))
    assert registry[0]["ignore"] == ["*.txt"]
    assert search_paths(kb, "estimate counts chunks") == []


def test_add_folder_without_yes_and_no_tty_refuses_and_registers_nothing(
    kb: Cli, notes: Path, home: Path
) -> None:
    done = kb("add", str(notes))
    assert done.returncode == Refused.exit_code
    assert ESTIMATE.match(done.stdout.splitlines()[0])  # the cost is still shown
    assert "added source" not in done.stdout
    assert "--yes" in done.stderr
    assert not (home / REGISTRY_FILE).exists()
    assert folder_sources(kb) == []
    assert search_paths(kb, "ptarmigan") == []


def test_add_folder_already_a_source_or_name_taken_is_refused_before_the_walk(
    kb: Cli, notes: Path, tmp_path: Path
) -> None:
    """Outsider run: adding a folder again walked it and printed its cost before saying it
    was already a source; a taken ``--name`` was refused only after the user said yes."""
    ok(kb, "add", str(notes), "--yes")
    again = kb("add", str(notes), "--yes")
    assert again.returncode == Conflict.exit_code
    assert "is already a source, named 'notes'" in again.stderr
    assert again.stdout == ""  # no estimate: nothing was walked
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("# A\n\nthe bittern note\n", encoding="utf-8")
    taken = kb("add", str(other), "--name", "notes")  # no --yes, no tty: would be asked
    assert taken.returncode == Conflict.exit_code
    assert "a source named 'notes' exists already" in taken.stderr
    assert taken.stdout == ""
    assert [s["name"] for s in folder_sources(kb)] == ["notes"]


# --- sync, list, remove -----------------------------------------------------------------------


def test_sync_command_reports_added_updated_removed_and_failures(kb: Cli, notes: Path) -> None:
    ok(kb, "add", str(notes), "--yes")
    (notes / "small.md").write_text("# Small\n\nthe ptarmigan note, edited\n", encoding="utf-8")
    (notes / "big.txt").unlink()
    (notes / "new.md").write_text("# New\n\na note on the wolverine\n", encoding="utf-8")
    (notes / "blob.txt").write_bytes(b"\x00\x01\x02\x03binary" * 20)
    lines = ok(kb, "sync").splitlines()
    assert lines[0].startswith("notes: 1 added, 1 updated, 0 unchanged, 1 removed, 1 failed in ")
    assert lines[1].startswith("  failed: blob.txt: binary data")
    assert search_paths(kb, "wolverine") == [("notes", "new.md")]
    assert search_paths(kb, "estimate counts chunks") == []
    again = ok(kb, "sync").splitlines()
    assert again[0].startswith("notes: 0 added, 0 updated, 2 unchanged, 0 removed, 1 failed")
    assert again[1].startswith("  failed: blob.txt: binary data")  # still listed, not retried


def test_sync_command_without_sources_says_how_to_add_one(kb: Cli) -> None:
    assert ok(kb, "sync").strip() == (
        "no folder or web sources; add one with `kb-mcp add PATH` or `kb-mcp add URL`"
    )


def test_list_command_shows_the_folder_source_and_its_documents(kb: Cli, notes: Path) -> None:
    ok(kb, "add", str(notes), "--yes")
    [source] = folder_sources(kb)
    assert (source["name"], source["root"], source["documents"], source["failed"]) == (
        "notes",
        str(notes.resolve()),
        2,
        0,
    )
    assert source["sync_state"] == "idle"
    listing = as_json(kb, "list", "notes")
    assert sorted(d["path"] for d in listing["documents"]) == ["big.txt", "small.md"]
    assert "(small.md, " in ok(kb, "list", "notes")


def test_remove_command_forgets_the_source_and_leaves_the_folder(
    kb: Cli, notes: Path, home: Path
) -> None:
    ok(kb, "add", str(notes), "--yes")
    before = {p: p.read_bytes() for p in notes.rglob("*")}
    assert ok(kb, "remove", "notes").strip() == "removed source 'notes' (2 paths unindexed)"
    assert {p: p.read_bytes() for p in notes.rglob("*")} == before
    assert json.loads((home / REGISTRY_FILE).read_text(encoding="utf-8")) == []
    assert folder_sources(kb) == []
    assert search_paths(kb, "ptarmigan") == []
    again = kb("remove", "notes")
    assert again.returncode == NotFound.exit_code
    assert "no source named 'notes'" in again.stderr


# --- add FILE ---------------------------------------------------------------------------------

PAGE = """\
<html><head><title>Field Guide</title></head>
<body><nav>site menu</nav><main><h1>Snow birds</h1>
<p>The ptarmigan turns white in winter.</p></main></body></html>
"""


def test_add_file_imports_an_upload_with_frontmatter_and_keeps_the_original(
    kb: Cli, tmp_path: Path, home: Path
) -> None:
    page = tmp_path / "guide.html"
    page.write_text(PAGE, encoding="utf-8")
    out = ok(kb, "add", str(page))
    created = re.match(
        r"^created: (?P<doc>u-[0-9a-f]{16}) “Field Guide” \(1 chunks\)$", out.strip()
    )
    assert created, out
    doc = created["doc"]
    stored = (home / "docs" / f"{doc}.md").read_text(encoding="utf-8")
    frontmatter, body = stored.split("\n---\n", 1)
    assert frontmatter.startswith("---\n")
    for field in (f"id: {doc}", "title: Field Guide", "source: uploads", "kind: html"):
        assert field in frontmatter.split("\n"), field
    assert "The ptarmigan turns white in winter." in body
    assert "<p>" not in body and "site menu" not in body
    assert (home / "originals" / f"{doc}.html").read_bytes() == page.read_bytes()
    assert search_paths(kb, "ptarmigan") == [("uploads", "guide.html")]
    assert not (home / REGISTRY_FILE).exists()  # an upload is not a folder source

    assert ok(kb, "add", str(page)).startswith(f"unchanged: {doc} ")
    page.write_text(PAGE.replace("turns white", "turns ivory"), encoding="utf-8")
    assert ok(kb, "add", str(page)).startswith(f"replaced: {doc} ")
    assert as_json(kb, "read", doc)["text"].count("turns ivory in winter") == 1
    assert search_paths(kb, "ivory") == [("uploads", "guide.html")]
    assert (home / "originals" / f"{doc}.html").read_bytes() == page.read_bytes()


def test_add_file_refuses_a_sensitive_file_and_stores_nothing(
    kb: Cli, tmp_path: Path, home: Path
) -> None:
    secret = tmp_path / ".env"
    secret.write_text("API_TOKEN=uploadsecretvalue\n", encoding="utf-8")
    done = kb("add", str(secret))
    assert done.returncode == Refused.exit_code
    assert "environment file" in done.stderr
    assert "uploadsecretvalue" not in done.stdout + done.stderr
    assert not (home / "docs").exists() and not (home / "originals").exists()
    assert as_json(kb, "grep", "uploadsecretvalue")["matches"] == []


def test_add_file_keeps_the_upload_kind_for_read(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><title>Page</title><body><main><p>The ibis wades.</p></main></body></html>",
        encoding="utf-8",
    )
    with Library(Settings(home=tmp_path / "home")) as library:
        added = library.writing.import_file(page)
        assert library.lookup.read(added.doc).kind == "html"


def test_cli_text_output_shows_control_characters_as_escapes(tmp_path: Path, kb: Cli) -> None:
    """A file name or text holding terminal escapes never reaches the terminal raw (found
    by a new user: ``kb-mcp grep`` / ``list`` / ``read`` printed ``ESC[31m`` from a
    hostile folder as is, so a document could recolour, retitle or clear the user's
    terminal). Newlines and tabs of the text stay; ``--json`` is JSON's own escaping."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "esc\x1b[32mname.md").write_text(
        "# Esc\n\nescape \x1b]0;pwned\x07 \x1b[31mRED\x1b[0m quixotic\r\n", encoding="utf-8"
    )
    assert kb("add", str(folder), "--yes", "--embedder", "none").returncode == 0
    outputs = [
        kb("grep", "quixotic"),
        kb("list", "hostile"),
        kb("read", "esc\x1b[32mname.md"),
        kb("search", "quixotic", "--embedder", "none"),
    ]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert "quixotic" in done.stdout or "name.md" in done.stdout
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", done.stdout), done.stdout
    assert "esc\\x1b[32mname.md" in outputs[0].stdout
    assert "\\x1b]0;pwned\\x07" in outputs[2].stdout
    as_json = kb("grep", "quixotic", "--json")
    assert json.loads(as_json.stdout)["matches"][0]["path"] == "esc\x1b[32mname.md"
