"""``reindex`` on a library two homes share on PostgreSQL (issue 24).

Two homes (two machines, as far as the library can tell) on one URL, each with agent
documents and a folder of its own. A reindex from home A must keep home B's agent
documents (whose file copies live only in B's home) and B's folder (on B's disk), re-read
A's own folder from disk, and with ``--rebuild`` remake every derived row (passages,
keyword indexes, vectors, graph) from the database's own copy of the text: search then
answers exactly as before, scores included.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hash_embedder import hash_factory
from team_notes import DOCUMENTS

from kb_mcp.errors import Unavailable
from kb_mcp.library import Library
from kb_mcp.render import to_data
from kb_mcp.settings import Settings, Store
from tests.conftest import CLI_TIMEOUT_S

THEIRS = (
    (
        "On-call handbook",
        "# On-call\n\nPage the gateway owner; Redis alerts go to ops.\n",
        "agent://b/oncall",
        ["ops"],
    ),
    (
        "Postmortem 42",
        "# Postmortem\n\nThe gateway restart dropped sessions before ADR 7.\n",
        "agent://b/pm42",
        [],
    ),
)
QUESTIONS = ("restart the gateway", "redis sessions", "on-call page", "healthz rollback")


def _settings(home: Path, url: str) -> Settings:
    """Each home a machine of its own (``host``: a folder source is its machine's)."""
    return dataclasses.replace(
        Settings(home=home),
        allow_agent_writes=True,
        embedder="test",
        embed_model="hash-64",
        store=Store(url),
        host=f"machine-{home.name}",
    )


def _folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def homes(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Library, Library]]:
    """Home A (the team notes, folder ``a-notes``) and home B (its own notes, folder
    ``b-notes``) on one PostgreSQL library, every passage embedded."""
    a = Library(_settings(tmp_path / "home-a", postgres_url), make_embedder=hash_factory())
    b = Library(_settings(tmp_path / "home-b", postgres_url), make_embedder=hash_factory())
    try:
        for title, content, uri, tags in DOCUMENTS:
            a.writing.add_document(title, content, uri, tags)
        for title, content, uri, tags in THEIRS:
            b.writing.add_document(title, content, uri, tags)
        a_notes = {"deploy.md": "# Deploy\n\nRestart the gateway, then check /healthz.\n"}
        b_notes = {"ops/redis.md": "# Redis\n\nSessions live in Redis; rollback keeps them.\n"}
        a.folders.add_folder(_folder(tmp_path / "a-notes", a_notes))
        a.folders.sync()
        b.folders.add_folder(_folder(tmp_path / "b-notes", b_notes))
        b.folders.sync()
        assert a.vectors.embed_pending().complete
        yield a, b
    finally:
        a.close()
        b.close()


def _state(library: Library) -> dict[str, object]:
    """What the library answers: searches (keyword and hybrid), its sources and documents."""
    found: dict[str, object] = {}
    for question in QUESTIONS:
        for mode in ("keyword", "auto"):
            result = library.lookup.search(question, mode=mode)
            found[f"{mode} {question}"] = (
                result.mode,
                [(h.doc, h.cite, h.legs) for h in result.hits],
                [h.score for h in result.hits],
            )
    overview = library.catalog.overview()
    # When a folder was last synced moves with every sync; how many vectors, with a rebuild.
    moving = ("synced_at", "embedded", "embed_pending")
    sources = [{k: v for k, v in s.items() if k not in moving} for s in to_data(overview.sources)]
    found["sources"] = (sources, overview.documents)
    for source in ("agent", "a-notes", "b-notes"):
        found[source] = to_data(library.catalog.list_source(source))
    found["read theirs"] = to_data(library.lookup.read("agent://b/pm42"))
    return found


def _same(got: dict[str, object], want: dict[str, object]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key.split(" ", 1)[0] in ("keyword", "auto"):
            mode, hits, scores = value
            assert got[key][:2] == (mode, hits), key
            assert got[key][2] == pytest.approx(scores, abs=1e-5), key
        else:
            assert got[key] == value, key


def test_a_reindex_keeps_the_other_homes_documents_and_folder(
    homes: tuple[Library, Library],
) -> None:
    a, b = homes
    before = _state(a)
    assert any(v[0] == "hybrid" for k, v in before.items() if k.startswith("auto"))
    report = a.writing.reindex()
    assert report.failed == ()
    _same(_state(a), before)
    _same(_state(b), before)


def test_a_reindex_rereads_this_homes_folder_from_disk(
    homes: tuple[Library, Library], tmp_path: Path
) -> None:
    a, _ = homes
    (tmp_path / "a-notes" / "deploy.md").write_text("# Deploy\n\nDrain the load balancer.\n")
    a.writing.reindex()
    assert a.lookup.search("drain the load balancer", mode="keyword").hits[0].path == "deploy.md"


def test_a_rebuild_remakes_every_derived_row_and_answers_as_before(
    homes: tuple[Library, Library],
) -> None:
    a, b = homes
    before = _state(a)
    chunks_before = {row[0] for row in a.db.query("SELECT id FROM chunks")}
    report = a.writing.reindex(rebuild=True)
    chunks_after = {row[0] for row in a.db.query("SELECT id FROM chunks")}
    assert len(chunks_after) == len(chunks_before) and not chunks_after & chunks_before
    assert a.db.query("SELECT COUNT(*) FROM kw_dead")[0][0] == 0  # no tombstone survives
    assert report.rebuilt and report.failed == ()
    state = a.vectors.state()
    assert state.embedded == 0 and state.pending > 0  # the vectors went with the rest
    assert a.vectors.embed_pending().complete
    _same(_state(a), before)
    _same(_state(b), before)
    entities = a.db.query("SELECT COUNT(*) FROM entities")[0][0]
    assert entities > 0  # the graph was made again


REBUILD = (sys.executable, "-m", "kb_mcp", "reindex", "--rebuild", "--embedder", "none")


def _rebuild(home: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``kb-mcp reindex --rebuild --embedder none --home HOME`` as a user runs it."""
    return subprocess.run(
        [*REBUILD, "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def test_kb_mcp_reindex_rebuild_through_the_cli_keeps_the_other_home(
    homes: tuple[Library, Library], tmp_path: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    _a, b = homes
    keyword_before = {k: v for k, v in _state(b).items() if not k.startswith("auto")}
    env = {**child_env, "KB_MCP_STORE": postgres_url, "KB_MCP_HOST": "machine-home-a"}
    done = _rebuild(tmp_path / "home-a", env)
    assert done.returncode == 0, done.stderr
    _same({k: v for k, v in _state(b).items() if not k.startswith("auto")}, keyword_before)


def test_a_rebuild_with_the_server_down_leaves_the_homes_sqlite_file_alone(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """A rebuild sets an unreadable ``kb.db`` aside to start afresh; an unreachable
    PostgreSQL server is not that file's fault (it may be the library just moved from)."""
    home = tmp_path / "home"
    with Library(dataclasses.replace(Settings(home=home), embedder="none")) as library:
        library.writing.add_document(
            "Kept", "# Kept\n\nThe SQLite library.\n", "agent://kept", by_agent=False
        )
    down = f"postgresql://kb@/kb?host={tmp_path / 'no-server'}"
    done = _rebuild(home, {**child_env, "KB_MCP_STORE": down})
    assert done.returncode == Unavailable.exit_code, done.stderr
    assert "moved it aside" not in done.stderr
    assert (home / "kb.db").exists()
    assert not list(home.glob("kb.db.broken-*"))
