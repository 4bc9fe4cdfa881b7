"""The server's instructions are built from the live library (issue 12, "Install and wiring").

An agent reads them once, at ``initialize``: what the library holds, whether agent writes
are on, which search modes exist. Read here over the real stdio protocol (fastmcp's
Client against ``kb-mcp serve``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.server.instructions import server_instructions
from kb_mcp.settings import Settings

pytestmark = pytest.mark.anyio


def build_library(home: Path, tmp_path: Path) -> None:
    """A library with a folder of two notes and one agent document."""
    notes = tmp_path / "team-notes"
    notes.mkdir()
    (notes / "deploy.md").write_text("# Deploy\n\nRun the blue-green deploy script.\n")
    (notes / "keys.md").write_text("# Keys\n\nRotate the signing key every 90 days.\n")
    library = Library(Settings(home=home, embedder="none", allow_agent_writes=True))
    try:
        library.folders.add_folder(notes)
        library.folders.sync()
        library.writing.add_document(
            "Saved page", "Caching notes from a web page.", "https://x.test/c"
        )
    finally:
        library.close()


async def test_instructions_over_stdio_say_what_the_library_holds(
    home: Path, tmp_path: Path, mcp_client
) -> None:
    """issue 12: sources with document counts, writes off, keyword only (embedder none)."""
    build_library(home, tmp_path)
    async with mcp_client() as client:
        text = client.instructions or ""
    assert "This library holds 3 documents" in text
    assert "team-notes (folder, 2 documents)" in text and "(agent, 1 document)" in text
    assert "Agent writes are off" in text and "`add_document` will refuse" in text
    assert "keyword only" in text and "hybrid" not in text.split("Search modes:")[1][:60]


async def test_instructions_over_stdio_follow_writes_and_embedder(
    home: Path, tmp_path: Path, spawn_mcp, child_env: dict[str, str], server_log: Path
) -> None:
    """issue 12: with --allow-agent-writes and an embedder configured, the instructions
    say `add_document` works and that hybrid search exists."""
    env = {**child_env, "KB_MCP_EMBEDDER": "ollama", "KB_MCP_OLLAMA_HOST": "http://127.0.0.1:9"}
    async with spawn_mcp(home, log_file=server_log, allow_agent_writes=True, env=env) as client:
        text = client.instructions or ""
    assert "The library is empty so far" in text
    assert "Agent writes are on" in text
    assert "vector / hybrid by meaning through the `ollama` embedder" in text


def test_instructions_are_cheap_on_a_real_library(home: Path, tmp_path: Path) -> None:
    """issue 12: the server computes them before answering initialize: milliseconds."""
    build_library(home, tmp_path)
    settings = Settings(home=home, embedder="none")
    started = time.thread_time()  # CPU time: other processes on the machine do not count
    text = server_instructions(home, settings)
    elapsed = time.thread_time() - started
    assert "3 documents" in text
    assert elapsed < 0.25, elapsed  # ~1 ms measured


def test_instructions_of_a_missing_library_create_nothing(tmp_path: Path) -> None:
    """issue 12: reading the summary never creates the library (read-only)."""
    home = tmp_path / "nowhere"
    text = server_instructions(home, Settings(home=home, embedder="local"))
    assert "empty so far" in text and "`local` embedder" in text
    assert not home.exists()


def test_instructions_count_a_file_held_at_two_paths_once(tmp_path: Path) -> None:
    """issue 12: the instructions' per-source documents agree with the library page
    (``store/counts``): an identical file at two paths of one folder is one document."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings
    from kb_mcp.store.summary import library_summary

    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a.md", "copy-of-a.md"):
        (folder / name).write_text("# Same\n\nThe very same text.\n", encoding="utf-8")
    (folder / "b.md").write_text("# Other\n\nAnother text.\n", encoding="utf-8")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        library.folders.sync()
        [source] = library.catalog.overview().sources
    summary = library_summary(tmp_path / "home" / "kb.db")
    assert summary is not None
    assert [s.documents for s in summary.sources] == [source.documents] == [2]
