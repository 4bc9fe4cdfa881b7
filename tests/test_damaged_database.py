"""One damaged kb.db page is diagnosed, answered clearly, and recovered (issue 20 item 4).

An outside run overwrote one 4 KB page in the middle of a 150-file library's kb.db:
``list`` still said healthy (exit 0); ``grep``, ``doctor`` and ``reindex --rebuild``
each ended in "internal error (CorruptError …)" (exit 70), and MCP tools answered
``[internal]``. Here the same damage (the middle page of the ``documents`` table, so
grep must read it) is made to a real library of folder files and an agent document.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from raw_server import STARTUP_TIMEOUT_S, RawServer

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings

FILES = 60
REBUILD = "kb-mcp reindex --rebuild"
PAGE_BYTES = 4096


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of ``FILES`` folder notes and one agent document (kept undamaged)."""
    root = tmp_path_factory.mktemp("damage")
    folder = root / "notes"
    folder.mkdir()
    for n in range(FILES):
        body = "\n".join(f"Line {k} of note {n} about the backup rotation." for k in range(60))
        (folder / f"note{n:03}.md").write_text(f"# Note {n}\n\n{body}\n")
    home = root / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        library.writing.add_document(
            "Zebras", "Agent notes about zebras.\n", "t://zebras", by_agent=False
        )
    return home


@pytest.fixture
def damaged(intact: Path, tmp_path: Path) -> Path:
    """A copy of the library with one page of the ``documents`` table overwritten."""
    home = tmp_path / "home"
    shutil.copytree(intact, home)
    with apsw.Connection(str(home / DB_FILE)) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name='documents'")]
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_BYTES
    page = sorted(pages)[len(pages) // 2]
    with open(home / DB_FILE, "r+b") as db:
        db.seek((page - 1) * PAGE_BYTES)
        db.write(os.urandom(PAGE_BYTES))
    return home


def kb(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_reports_the_damaged_database_and_exits_non_zero(
    damaged: Path, child_env: dict[str, str]
) -> None:
    done = kb(damaged, child_env, "list")
    assert done.returncode == 1, done.stderr
    assert "database=damaged: " in done.stdout and REBUILD in done.stdout


def test_list_of_a_sound_database_says_ok(intact: Path, child_env: dict[str, str]) -> None:
    done = kb(intact, child_env, "list", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["health"]["database"] == "ok"


def test_doctor_finds_the_damage_and_says_how_to_fix_it(
    damaged: Path, child_env: dict[str, str]
) -> None:
    done = kb(damaged, child_env, "doctor")
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("FAIL database")]
    assert REBUILD in line and "moves the damaged file aside (kept" in line


def test_cli_grep_is_unavailable_naming_the_fix(damaged: Path, child_env: dict[str, str]) -> None:
    done = kb(damaged, child_env, "grep", "no such words")
    assert done.returncode == 5, done.stderr
    assert "is damaged" in done.stderr and REBUILD in done.stderr


def test_mcp_tools_answer_unavailable_naming_the_fix_never_internal(
    damaged: Path, child_env: dict[str, str]
) -> None:
    server = RawServer(damaged, damaged.parent / "stderr.log", child_env)
    try:
        server.handshake()
        server.request("tools/list", {}, STARTUP_TIMEOUT_S)
        grep = server.tool("grep", timeout_s=STARTUP_TIMEOUT_S, pattern="no such words")["result"]
        assert grep["isError"] is True
        assert grep["content"][0]["text"].startswith("[unavailable] the library database ")
        assert REBUILD in grep["content"][0]["text"]
        for tool, arguments in [
            ("search", {"query": "backup rotation"}),
            ("read", {"doc": "t://zebras"}),
            ("list", {}),
            ("add_document", {"title": "T", "content": "new text", "source_uri": "t://new"}),
        ]:
            result = server.tool(tool, timeout_s=STARTUP_TIMEOUT_S, **arguments)["result"]
            text = result["content"][0]["text"]
            assert not text.startswith("[internal]"), (tool, text)
            if result.get("isError"):
                assert text.startswith("[unavailable]") and REBUILD in text, (tool, text)
        assert server.alive()
    finally:
        server.close()


def test_rebuild_moves_the_damaged_file_aside_and_rebuilds_from_the_files(
    damaged: Path, child_env: dict[str, str]
) -> None:
    before = (damaged / DB_FILE).read_bytes()
    done = kb(damaged, child_env, "reindex", "--rebuild")
    assert done.returncode == 0, done.stderr
    assert "is damaged" in done.stderr and "moved it aside" in done.stderr
    (kept,) = damaged.glob("kb.db.broken-*")
    assert kept.read_bytes() == before  # kept, byte for byte
    listed = kb(damaged, child_env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    overview = json.loads(listed.stdout)
    assert (overview["documents"], overview["health"]["database"]) == (FILES + 1, "ok")
    for query, path in [("zebras", "t://zebras"), ("note 7 backup rotation", "note007.md")]:
        found = json.loads(kb(damaged, child_env, "search", query, "--json").stdout)
        assert path in [r["path"] for r in found["results"]], query
    assert "note 42" in kb(damaged, child_env, "grep", "of note 42 about").stdout


def test_web_pages_name_the_fix_instead_of_an_internal_error(damaged: Path) -> None:
    """The web view meets the damage where the tools do, and says the same."""
    from starlette.testclient import TestClient

    from kb_mcp.web.app import build_app
    from kb_mcp.web.guard import Policy

    with Library(Settings(home=damaged, embedder="none")) as library:
        app = build_app(library, Policy("127.0.0.1", None))
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            page = client.get("/search", params={"q": "backup rotation"})
    assert page.status_code == 503, page.text[:300]
    assert "is damaged" in page.text and "reindex --rebuild" in page.text


def test_a_damaged_cell_is_named_by_its_finding_not_sqlites_heading(
    intact: Path, tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Cell pointers overwritten in one page: ``quick_check`` heads its findings with
    "*** in database main ***", which ``list`` showed as the whole diagnosis."""
    home = tmp_path / "home"
    shutil.copytree(intact, home)
    with apsw.Connection(str(home / DB_FILE)) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name='chunks'")]
    with open(home / DB_FILE, "r+b") as db:
        db.seek((sorted(pages)[len(pages) // 2] - 1) * PAGE_BYTES + 8)
        db.write(b"\xff" * 8)  # the page's first cell pointers point past its end
    done = kb(home, child_env, "list")
    [health] = [line for line in done.stdout.splitlines() if "database=damaged: " in line]
    assert "***" not in health and "Tree " in health and REBUILD in health, health
