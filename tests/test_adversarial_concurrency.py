"""Local multi-process use: two servers, a CLI sync, a re-embedding and agents, at once (issue 11).

Eight client threads share two real ``kb-mcp serve`` processes (four each, calls in
flight together, as an agent's parallel tool calls are) and add, search, grep, read and
list while ``kb-mcp sync`` ingests a folder in a third process and a fourth thread of
this process embeds whatever has no vector yet. Then: no call got an error (a "database
is locked" among them), every acknowledged document is there exactly once and findable
by its own word, every folder file is there, and ``kb.db`` passes SQLite's and FTS5's
integrity checks with vectors (and, once the graph lands, mentions) pointing at live
chunks only and covering every chunk after a last embedding run.

One more writer is a third server with its file watcher on (the first two have it off,
so the watcher's syncs are its own) while a thread edits, adds and deletes folder files
through the whole run: after a last sync every file on disk is there in its last text,
no deleted one is, and no server logged a failed or locked-out background sync. Every
sixth agent call adds a note that supersedes the client's previous one, so
``doc_relations`` is written concurrently too; the integrity checks cover the entity
graph's counts and those rows (``library_checks``).

The normal run makes ``CI_CALLS`` calls per client; ``pytest -m adversarial`` the issue's
200.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
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
CALL_BOUND_S = 60.0
# A server ends its background threads at stdin's close, each joined up to 5 s
# (server/background.py); a watching one mid-sync under load 15 took over 10 s.
CLOSE_S = 60.0
# One folder change every this many seconds: the long run's pace is a person saving often
# (and a git checkout's bursts are the watcher's debounce, tests/test_watch.py); the normal
# run's is gentler so the watching server's syncs do not dominate its time on 2 cores.
CI_EDIT_PAUSE_S, LONG_EDIT_PAUSE_S = (
    0.4,
    0.12,
)  # a call waits at most the busy timeout (10 s) per statement


def embedding_settings(home: Path) -> Settings:
    return Settings(home=home, embedder="test", embed_model="hash-64")


def client_run(
    server: RawServer,
    client: int,
    calls: int,
    acked: list[str],
    errors: list[str],
    add_s: list[float],
):
    """One agent: every third call adds a document, the others read the library; how
    long each add took goes to ``add_s`` (a write waiting on others shows there)."""
    rng = random.Random(client)
    mine: list[str] = []
    for n in range(calls):
        word = f"conc{client}x{n}q"
        if n % 3 == 0:
            # Every other add supersedes the client's note before (a document relation).
            front = f"---\nsupersedes: CONC-{client}{n - 3:04}\n---\n" if n % 6 == 0 and n else ""
            started = time.monotonic()
            reply = server.tool(
                "add_document",
                CALL_BOUND_S,
                title=f"CONC-{client}{n:04} client {client} note {n}",
                content=f"{front}# Note {n}\n\nThe word {word} is here, with backup and "
                f"restore by `Client{client}Agent`.\n",
                source_uri=f"t://c{client}/{n}",
            )
            add_s.append(time.monotonic() - started)
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
            report = library.vectors.embed_pending(batch=16)
            runs["runs"] += 1
            runs["embedded"] += report.embedded if report else 0
            stop.wait(0.05)


def edit_folder(folder: Path, stop: threading.Event, edits: Counter, pause_s: float) -> None:
    """A person saving, adding and deleting files in the watched folder during the run,
    one change every ``pause_s`` on average."""
    rng = random.Random("editor")
    n = 0
    while not stop.wait(rng.uniform(0.5, 1.5) * pause_s):
        n += 1
        files = sorted(folder.glob("*.md"))
        action = rng.random()
        if action < 0.2 and len(files) > FOLDER_FILES // 2:
            rng.choice(files).unlink()
            edits["deleted"] += 1
        elif action < 0.4:
            (folder / f"new{n}.md").write_text(f"# New {n}\n\nedited{n}e restore steps.\n")
            edits["added"] += 1
        else:
            rng.choice(files).write_text(f"# Edited {n}\n\nedited{n}e restore steps.\n")
            edits["edited"] += 1


def with_watch(env: dict[str, str], mode: str) -> dict[str, str]:
    return {**env, "KB_MCP_WATCH": mode}


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
        library.folders.add_folder(folder)
    servers = [
        RawServer(home, tmp_path / f"server{i}.log", with_watch(child_env, "off")) for i in range(2)
    ]
    watching = RawServer(home, tmp_path / "watching.log", with_watch(child_env, "auto"))
    for server in [*servers, watching]:
        server.handshake()
    edits, editing = Counter(), threading.Event()
    pause_s = CI_EDIT_PAUSE_S if calls == CI_CALLS else LONG_EDIT_PAUSE_S
    editor = threading.Thread(target=edit_folder, args=(folder, editing, edits, pause_s))
    editor.start()
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
    add_s: list[float] = []
    clients = [
        threading.Thread(target=client_run, args=(servers[i % 2], i, calls, acked, errors, add_s))
        for i in range(CLIENTS)
    ]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=CALL_BOUND_S * calls)
    out, err = sync.communicate(timeout=300)
    editing.set()
    editor.join()
    stop.set()
    embedder.join(timeout=120)
    for server in [*servers, watching]:
        assert server.stray_output() == []
        assert server.close(CLOSE_S) == 0
        logged = "\n".join(server.stderr_lines())
        assert not re.search(r"locked|background sync (failed|stopped)|Traceback", logged), logged

    assert errors == []
    assert sync.returncode == 0, out + err
    assert "locked" not in out + err
    assert integrity_problems(home / DB_FILE) == []
    with opened(home / DB_FILE) as conn:
        uris = [r[0] for r in conn.execute("SELECT uri FROM documents WHERE uri LIKE 't://c%'")]
        superseding = conn.execute(
            "SELECT count(*) FROM doc_relations WHERE kind = 'supersedes' AND state = 'resolved'"
        ).fetchone()[0]
    assert len(uris) == len(set(uris)) == len(acked)  # nothing lost, nothing doubled
    with Library(embedding_settings(home), make_embedder=hash_factory()) as library:
        library.folders.sync()  # the watcher's last events may still be on their way
        library.vectors.embed_pending()
        missing = [w for w in acked if not library.lookup.search(w, mode="keyword").hits]
        assert missing == []
        on_disk = {p.name: p.read_text() for p in folder.glob("*.md")}
        stale = [
            name
            for name, text in on_disk.items()
            if (word := re.search(r"edited\d+e", text))
            and not library.lookup.search(word.group(), mode="keyword").hits
        ]
        assert stale == []
        state = library.vectors.state()
    with opened(home / DB_FILE) as conn:
        folder_docs = {
            Path(r[0]).name
            for r in conn.execute(
                "SELECT l.path FROM locations l JOIN sources s ON s.id = l.source_id "
                "WHERE s.kind = 'folder' AND l.document_id IS NOT NULL"
            )
        }
    assert folder_docs == set(on_disk)
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
        f"{runs['runs']} embedding runs ({runs['embedded']} chunks) + a watching server over "
        f"{sum(edits.values())} file changes ({dict(edits)}): {len(acked)} adds acknowledged, "
        f"all present once, {superseding} supersessions resolved, every folder file current, "
        f"0 errors, integrity ok; add_document median {sorted(add_s)[len(add_s) // 2]:.2f} s, "
        f"max {max(add_s):.2f} s, {sum(s > 1 for s in add_s)} over 1 s",
    )
