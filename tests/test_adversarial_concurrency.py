"""Local multi-process use: two servers, a CLI sync, a re-embedding and agents, at once (issue 11).

Eight client threads share two real ``kb-mcp serve`` processes (four each, calls in
flight together, as an agent's parallel tool calls are) and add, search, grep, read and
list while ``kb-mcp sync`` ingests a folder in a third process and a fourth thread of
this process embeds whatever has no vector yet. Then: no call got an error (a "database
is locked" among them), every acknowledged document is there exactly once and findable
by its own word, every folder file is there, and ``kb.db`` passes SQLite's and FTS5's
integrity checks with vectors (and, once the graph lands, mentions) pointing at live
chunks only and covering every chunk after a last embedding run.

The normal run makes ``CI_CALLS`` calls per client; ``pytest -m adversarial`` the issue's
200. A new writer (the file watcher) is one more thread in ``run_writers``.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import hash_factory
from library_checks import integrity_problems, opened
from raw_server import RawServer

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings

CLIENTS = 8
CI_CALLS = 9
LONG_CALLS = 200
FOLDER_FILES = 40
CALL_BOUND_S = 60.0  # a call waits at most the busy timeout (10 s) per statement


def embedding_settings(home: Path) -> Settings:
    return Settings(home=home, embedder="test", embed_model="hash-64")


def client_run(server: RawServer, client: int, calls: int, acked: list[str], errors: list[str]):
    """One agent: every third call adds a document, the others read the library."""
    rng = random.Random(client)
    mine: list[str] = []
    for n in range(calls):
        word = f"conc{client}x{n}q"
        if n % 3 == 0:
            reply = server.tool(
                "add_document",
                CALL_BOUND_S,
                title=f"Client {client} note {n}",
                content=f"# Note {n}\n\nThe word {word} is here, with backup and restore.\n",
                source_uri=f"t://c{client}/{n}",
            )
            if _ok(reply, errors):
                mine.append(word)
                acked.append(word)
            continue
        tool, arguments = rng.choice(
            [
                ("search", {"query": rng.choice(mine) if mine else "backup"}),
                ("grep", {"pattern": "restore", "max_matches": 20}),
                ("list", {}),
                ("list", {"source": "agent", "limit": 20}),
                ("read", {"doc": "a-nope"}),
            ]
        )
        reply = server.tool(tool, CALL_BOUND_S, **arguments)
        if tool == "read":  # an unknown document: the one error that is expected
            text = reply.get("result", {}).get("content", [{}])[0].get("text", "")
            if not text.startswith("[not_found]"):
                errors.append(f"read: {text[:200]}")
        else:
            _ok(reply, errors)


def _ok(reply: dict[str, Any], errors: list[str]) -> bool:
    if "error" in reply:
        errors.append(f"protocol: {reply['error']}")
        return False
    result = reply["result"]
    if result.get("isError"):
        errors.append(result["content"][0]["text"][:300])
        return False
    return True


def embed_until(home: Path, stop: threading.Event, runs: Counter) -> None:
    """Re-embedding beside everything else: embed what is new until told to stop."""
    with Library(embedding_settings(home), make_embedder=hash_factory()) as library:
        while not stop.is_set():
            report = library.embed_pending(batch=16)
            runs["runs"] += 1
            runs["embedded"] += report.embedded if report else 0
            stop.wait(0.05)


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(CI_CALLS, id="ci"),
        pytest.param(LONG_CALLS, id="long", marks=pytest.mark.adversarial),
    ],
)
def test_concurrency_two_servers_sync_embedding_and_agents_lose_and_double_nothing(
    tmp_path: Path, child_env: dict[str, str], calls: int, figures
) -> None:
    """issue 11 (concurrency; issue 7 item 18 kept): 8 clients x calls on two servers."""
    home, folder = tmp_path / "home", tmp_path / "folder"
    folder.mkdir()
    for i in range(FOLDER_FILES):
        sections = "\n\n".join(f"## Part {j}\n\nfolder{i}y{j} restore steps." for j in range(6))
        (folder / f"page{i:03}.md").write_text(f"# Page {i}\n\n{sections}\n")
    with Library(Settings(home=home, embedder="none")) as library:
        library.add_folder(folder)
    servers = [RawServer(home, tmp_path / f"server{i}.log", child_env) for i in range(2)]
    for server in servers:
        server.handshake()
    sync = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "sync", "--home", str(home), "--no-wait"],
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, runs = threading.Event(), Counter()
    embedder = threading.Thread(target=embed_until, args=(home, stop, runs))
    embedder.start()
    acked: list[str] = []
    errors: list[str] = []
    clients = [
        threading.Thread(target=client_run, args=(servers[i % 2], i, calls, acked, errors))
        for i in range(CLIENTS)
    ]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=CALL_BOUND_S * calls)
    out, err = sync.communicate(timeout=300)
    stop.set()
    embedder.join(timeout=120)
    for server in servers:
        assert server.stray_output() == []
        assert server.close() == 0

    assert errors == []
    assert sync.returncode == 0, out + err
    assert "locked" not in out + err
    assert integrity_problems(home / DB_FILE) == []
    with opened(home / DB_FILE) as conn:
        uris = [r[0] for r in conn.execute("SELECT uri FROM documents WHERE uri LIKE 't://c%'")]
        folder_docs = conn.execute(
            "SELECT count(*) FROM locations l JOIN sources s ON s.id = l.source_id "
            "WHERE s.kind = 'folder' AND l.document_id IS NOT NULL"
        ).fetchone()[0]
    assert len(uris) == len(set(uris)) == len(acked)  # nothing lost, nothing doubled
    assert folder_docs == FOLDER_FILES
    with Library(embedding_settings(home), make_embedder=hash_factory()) as library:
        library.embed_pending()
        missing = [w for w in acked if not library.search(w, mode="keyword").hits]
        assert missing == []
        state = library.vector_state()
    assert integrity_problems(home / DB_FILE) == []
    with opened(home / DB_FILE) as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        vec_tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'vec_floats_%'"
            )
        ]
        (vectors,) = [conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in vec_tables]
    assert vectors == chunks, state
    figures(
        "concurrency",
        f"{CLIENTS} clients x {calls} calls on 2 servers + CLI sync of {FOLDER_FILES} files + "
        f"{runs['runs']} embedding runs ({runs['embedded']} chunks): {len(acked)} adds "
        f"acknowledged, all present once, 0 errors, integrity ok",
    )
