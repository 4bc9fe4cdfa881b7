"""Three servers on one library, agents, a sync and ``kill -9``, on either store (issue 24).

The issue's "done when": three ``kb-mcp serve`` processes on one PostgreSQL library,
eight agents × 200 calls and a sync: 0 errors, every acknowledged add present once, and
``kill -9`` of any of them loses nothing. Every test here runs on both stores
(``team``): on SQLite the servers share one home, as one machine's do; on PostgreSQL
each has a home of its own and ``KB_MCP_STORE`` names the same database, as servers on
different machines do. The servers are real processes over MCP stdio (``RawServer``),
each agent a thread sending add_document, search, grep, read and list with calls of
other agents in flight beside it.

After a run the library is checked from a fresh process's view (``check_library``):
every acknowledged add is one document row with chunks and is found by a keyword
search for its own word, no source is doubled, every file of the synced folder is there
once and found, and the store reports no damage. A kill is never timed: the server is
killed once its agents have had a given number of adds acknowledged (and they keep
adding until it dies), and ``kb-mcp sync`` is held, by a wrapper, inside the
transaction of its Nth document until it is killed there.

The default suite runs a small size of each; ``pytest -m adversarial`` the issue's
(3 servers × 8 agents × 200 calls) and kills each of the three servers in turn, and
prints its figures (calls, errors, wall time, calls/s, p50 / p95 per tool).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from library_checks import integrity_problems
from ollama_server import serve_ollama
from raw_server import CLOSED, RawServer
from team_notes import DOCUMENTS, QUESTIONS

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings, Store

CALL_BOUND_S = 120.0
CLOSE_S = 60.0
SYNC_BOUND_S = 600
# The gates below wait for an event, not for time; this only bounds a hang.
GATE_BOUND_S = 300.0


@dataclass(frozen=True)
class Size:
    servers: int
    agents: int
    calls: int
    folder_files: int


SMALL = Size(servers=3, agents=3, calls=20, folder_files=20)
FULL = Size(servers=3, agents=8, calls=200, folder_files=60)
# The default suite runs the small size on PostgreSQL; on SQLite the same runs are
# test_adversarial_concurrency's and test_adversarial_crash's, so its small size here
# waits for ``-m adversarial`` with the full ones.
SIZES = [
    pytest.param("postgresql", SMALL, id="postgresql-small"),
    pytest.param("sqlite", SMALL, id="sqlite-small", marks=pytest.mark.adversarial),
    pytest.param("postgresql", FULL, id="postgresql-full", marks=pytest.mark.adversarial),
    pytest.param("sqlite", FULL, id="sqlite-full", marks=pytest.mark.adversarial),
]


@dataclass(frozen=True)
class Team:
    """Where one test's servers keep their library: one SQLite home they all share, or
    one PostgreSQL database (``url``) with a home for each server."""

    root: Path
    env: dict[str, str]
    url: str | None

    def home(self, server: int) -> Path:
        return self.root / ("home" if self.url is None else f"home{server}")

    def settings(self, server: int = 0) -> Settings:
        return dataclasses.replace(
            Settings(home=self.home(server)),
            allow_agent_writes=True,
            embedder="none",
            store=Store(self.url) if self.url else Store(),
        )

    def serve(self, *servers: int, env: dict[str, str] | None = None) -> list[RawServer]:
        """``kb-mcp serve`` for each of ``servers``, started together, once each answered
        the handshake."""
        started = [
            RawServer(self.home(i), self.root / f"server{i}.log", {**self.env, **(env or {})})
            for i in servers
        ]
        for server in started:
            server.handshake()
        return started


@pytest.fixture
def team(request: pytest.FixtureRequest, tmp_path: Path, child_env: dict[str, str]) -> Team:
    """The store a test's parameter names: ``sqlite`` or ``postgresql``."""
    if request.param == "sqlite":
        return Team(tmp_path, child_env, None)
    url = request.getfixturevalue("postgres_url")
    return Team(tmp_path, {**child_env, "KB_MCP_STORE": url}, url)


# --- agents -----------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the agents of one run saw: acknowledged adds (word → uri), errors, and how
    long each call took by tool. Appends from many threads (a list's is atomic)."""

    acked: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    gone: list[int] = field(default_factory=list)  # agents whose server died under them

    def calls(self) -> int:
        return sum(len(s) for s in self.seconds.values())


def agent_run(
    server: RawServer,
    agent: int,
    calls: int | None,
    tally: Tally,
    on_ack: Callable[[], None] = lambda: None,
) -> None:
    """One agent: every third call adds a note with a word of its own, the others search
    for its own words, grep, read its own notes and list. A search or read of its own
    acknowledged note must find it (the server wrote it before answering). ``calls`` None:
    add and read until the server dies (the victim of a kill)."""
    rng = random.Random(agent)
    mine: list[tuple[str, str]] = []  # (word, doc)
    n = 0
    while calls is None or n < calls:
        n += 1
        if n % 3 == 1:
            word, uri = f"soak{agent}x{n}q", f"t://a{agent}/{n}"
            reply = _timed(
                server,
                tally,
                "add_document",
                title=f"SOAK-{agent}-{n} agent {agent} note {n}",
                content=f"# Note {n}\n\nThe word {word} is here, with backup and "
                f"restore steps by `Agent{agent}`.\n",
                source_uri=uri,
            )
            if reply == CLOSED:
                tally.gone.append(agent)
                return
            data = _ok(reply, tally, "add_document")
            if data is not None:
                mine.append((word, data["doc"]))
                tally.acked[word] = uri
                on_ack()
            continue
        word, doc = rng.choice(mine) if mine else ("backup", None)
        tool, arguments = rng.choice(
            [
                ("search", {"query": word, "mode": "keyword"}),
                ("search", {"query": f"{word} restore"}),
                ("grep", {"pattern": word if doc else "restore", "max_matches": 20}),
                ("read", {"doc": doc} if doc else {"doc": "a-nope"}),
                ("list", {}),
                ("list", {"source": "agent", "limit": 20}),
            ]
        )
        reply = _timed(server, tally, tool, **arguments)
        if reply == CLOSED:
            tally.gone.append(agent)
            return
        if doc is None and tool == "read":  # an unknown document: the one expected error
            if not _text(reply).startswith("[not_found]"):
                tally.errors.append(f"read: {_text(reply)[:200]}")
            continue
        data = _ok(reply, tally, tool)
        if data is not None and doc and tool in ("search", "read"):
            found = data["doc"] == doc if tool == "read" else _docs(data).count(doc) == 1
            if not found:
                tally.errors.append(f"{tool} {word}: its own note {doc} not found once")


def _timed(server: RawServer, tally: Tally, tool: str, **arguments: Any) -> dict[str, Any]:
    started = time.monotonic()
    reply = server.tool(tool, CALL_BOUND_S, **arguments)
    if reply != CLOSED:
        tally.seconds[tool].append(time.monotonic() - started)
    return reply


def _text(reply: dict[str, Any]) -> str:
    return reply.get("result", {}).get("content", [{}])[0].get("text", "")


def _ok(reply: dict[str, Any], tally: Tally, tool: str) -> dict[str, Any] | None:
    """The reply's structured data, or None with the error recorded."""
    if "error" in reply:
        tally.errors.append(f"{tool} protocol: {reply['error']}")
        return None
    result = reply["result"]
    if result.get("isError"):
        tally.errors.append(f"{tool}: {_text(reply)[:300]}")
        return None
    return result.get("structuredContent") or json.loads(_text(reply))


def _docs(found: dict[str, Any]) -> list[str]:
    return [hit["doc"] for hit in found["results"]]


def run_agents(
    servers: list[RawServer], agents: int, calls: int | None, tally: Tally
) -> list[threading.Thread]:
    threads = [
        threading.Thread(
            target=agent_run, args=(servers[i % len(servers)], i, calls, tally), daemon=True
        )
        for i in range(agents)
    ]
    for thread in threads:
        thread.start()
    return threads


# --- the library afterwards -------------------------------------------------------------------


def write_folder(folder: Path, files: int, round_: int = 0) -> dict[str, str]:
    """Pages of a few sections each, every one with a word of its own; name → word."""
    folder.mkdir(exist_ok=True)
    words = {}
    for i in range(files):
        word = f"page{i}r{round_}w"
        sections = "\n\n".join(f"## Part {j}\n\n{word} section {j} restore." for j in range(6))
        (folder / f"page{i:03}.md").write_text(f"# Page {i}\n\n{sections}\n")
        words[f"page{i:03}.md"] = word
    return words


def register(team: Team, folder: Path) -> None:
    with Library(team.settings(0)) as library:
        library.folders.add_folder(folder)


def check_library(team: Team, acked: dict[str, str], pages: dict[str, str]) -> None:
    """Every acknowledged add once, with chunks and found by its word; no source twice;
    every page of the folder once and found; the store sound."""
    with Library(team.settings(0)) as library:
        db = library.db
        per_uri = dict(
            db.query("SELECT uri, count(*) FROM documents WHERE uri LIKE 't://a%' GROUP BY uri")
        )
        assert {u: per_uri.get(u) for u in acked.values()} == dict.fromkeys(acked.values(), 1)
        assert [u for u, count in per_uri.items() if count != 1] == []  # unacked: once at most
        assert (
            db.query(
                "SELECT d.uri FROM documents d WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.document_id = d.id)"
            )
            == []
        )
        assert (
            db.query(
                "SELECT kind, root, count(*) FROM sources GROUP BY kind, root HAVING count(*) > 1"
            )
            == []
        )
        unfound = [w for w in acked if not _found(library, w, acked[w])]
        assert unfound == []
        indexed = [
            Path(path).name
            for (path,) in db.query(
                "SELECT l.path FROM locations l JOIN sources s ON s.id = l.source_id "
                "WHERE s.kind = 'folder' AND l.document_id IS NOT NULL"
            )
        ]
        assert sorted(indexed) == sorted(pages)
        unfound = [name for name, word in pages.items() if not _found(library, word, name)]
        assert unfound == []
        assert db.integrity_problems() == []
    if team.url is None:
        assert integrity_problems(team.home(0) / DB_FILE) == []


def _found(library: Library, word: str, where: str) -> bool:
    """A keyword search for ``word`` finds it in exactly one document, the one at ``where``
    (its uri, or its file's name); other legs may bring its neighbours along."""
    hits = [h for h in library.lookup.search(word, mode="keyword").hits if "keyword" in h.legs]
    return len({h.doc for h in hits}) == 1 and (hits[0].path or "").endswith(where)


def close_all(servers: list[RawServer]) -> None:
    for server in servers:
        assert server.stray_output() == []
        assert server.close(CLOSE_S) == 0
        logged = "\n".join(server.stderr_lines())
        assert not re.search(r"locked|Traceback|background sync (failed|stopped)", logged), logged


def figures_of(tally: Tally, wall_s: float) -> str:
    calls = tally.calls()
    per_tool = ", ".join(
        f"{tool} {len(s)} p50 {statistics.median(s) * 1000:.0f} / p95 "
        f"{sorted(s)[int(0.95 * (len(s) - 1))] * 1000:.0f} ms"
        for tool, s in sorted(tally.seconds.items())
    )
    return (
        f"{calls} calls, {len(tally.errors)} errors, {len(tally.acked)} adds acknowledged, "
        f"wall {wall_s:.1f} s, {calls / wall_s:.1f} calls/s; {per_tool}"
    )


def cli(team: Team, server: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb_mcp", *args, "--home", str(team.home(server))]


# --- the runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("team", "size"), SIZES, indirect=["team"])
def test_servers_agents_and_a_sync_lose_and_double_nothing(
    team: Team, size: Size, figures: Callable[[str, str], None]
) -> None:
    """3 servers, agents × calls and a ``kb-mcp sync`` of a folder at once: 0 errors,
    every acknowledged add present once, every page of the folder once."""
    folder = team.root / "folder"
    pages = write_folder(folder, size.folder_files)
    register(team, folder)
    servers = team.serve(*range(size.servers))
    tally = Tally()
    started = time.monotonic()
    sync = subprocess.Popen(
        cli(team, 0, "sync"),
        env=team.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for thread in run_agents(servers, size.agents, size.calls, tally):
        thread.join(timeout=CALL_BOUND_S * size.calls)
    out, err = sync.communicate(timeout=SYNC_BOUND_S)
    wall_s = time.monotonic() - started
    close_all(servers)

    assert tally.errors == []
    assert tally.gone == []
    assert sync.returncode == 0, out + err
    check_library(team, tally.acked, pages)
    store = "PostgreSQL" if team.url else "SQLite"
    figures(
        "soak",
        f"{store}: {size.servers} servers x {size.agents} agents x {size.calls} calls + a sync "
        f"of {size.folder_files} files: {figures_of(tally, wall_s)}",
    )


KILLS = [
    pytest.param("postgresql", SMALL, 1, id="postgresql-small-kill-server-1"),
    pytest.param(
        "sqlite", SMALL, 1, id="sqlite-small-kill-server-1", marks=pytest.mark.adversarial
    ),
    *(
        pytest.param(
            store,
            FULL,
            victim,
            id=f"{store}-full-kill-server-{victim}",
            marks=pytest.mark.adversarial,
        )
        for store in ("postgresql", "sqlite")
        for victim in range(FULL.servers)
    ),
]


@pytest.mark.parametrize(("team", "size", "victim"), KILLS, indirect=["team"])
def test_a_server_killed_mid_adds_loses_no_acknowledged_add(
    team: Team, size: Size, victim: int, figures: Callable[[str, str], None]
) -> None:
    """``kill -9`` of one server while its agents add: once ``kill_after`` of its adds were
    acknowledged (its agents go on adding until it dies), it is killed. The others'
    agents finish with 0 errors; the killed server, started again on the same home and
    store, opens and finds every add any server acknowledged; the library is sound."""
    kill_after = max(3, size.calls // 4)
    servers = team.serve(*range(size.servers))
    doomed = servers[victim]
    tally, theirs, victims_acked = Tally(), Tally(), threading.Semaphore(0)
    doomed_agents = [
        threading.Thread(
            target=agent_run, args=(doomed, 100 + i, None, theirs, victims_acked.release)
        )
        for i in range(max(1, size.agents // size.servers))
    ]
    for thread in doomed_agents:
        thread.start()
    others = [s for s in servers if s is not doomed]
    threads = run_agents(others, size.agents - len(doomed_agents), size.calls, tally)
    for _ in range(kill_after):  # the gate: that many adds acknowledged by the victim
        assert victims_acked.acquire(timeout=GATE_BOUND_S)
    os.kill(doomed.pid, signal.SIGKILL)
    assert doomed.process.wait(timeout=CLOSE_S) == -signal.SIGKILL
    for thread in [*doomed_agents, *threads]:
        thread.join(timeout=CALL_BOUND_S * size.calls)

    assert tally.errors == []
    assert theirs.errors == []  # until the kill, nothing failed there either
    assert sorted(theirs.gone) == sorted(100 + i for i in range(len(doomed_agents)))
    [again] = team.serve(victim)
    acked = {**tally.acked, **theirs.acked}
    seen = [_ok(again.tool("search", query=w, mode="keyword"), tally, "search") for w in acked]
    assert [w for w, found in zip(acked, seen, strict=True) if not found or not _docs(found)] == []
    close_all([*others, again])
    check_library(team, acked, {})
    figures(
        "kill -9",
        f"{'PostgreSQL' if team.url else 'SQLite'}: server {victim} of {size.servers} killed "
        f"after {len(theirs.acked)} acknowledged adds; {len(acked)} adds acknowledged in all, "
        "all present once after the restart, 0 errors on the others",
    )


GATED_SYNC = '''\
"""kb-mcp, whose folder sync stops for good inside the write of its Nth new document
(the document and its chunks written, the transaction open), once the gate file holds
that document's title (written beside it and renamed: never seen half-written)."""
import sys
import time
from pathlib import Path

from kb_mcp.cli.main import main
from kb_mcp.ingest import pipeline

GATE, AFTER = Path(sys.argv.pop(1)), int(sys.argv.pop(1))
_index = pipeline._index_document
stored = 0


def gated(conn, doc, *args, **kwargs):
    global stored
    document_id = _index(conn, doc, *args, **kwargs)
    stored += 1
    if stored == AFTER:
        GATE.with_suffix(".new").write_text(doc.title)
        GATE.with_suffix(".new").rename(GATE)
        while True:
            time.sleep(60)
    return document_id


pipeline._index_document = gated
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.parametrize(
    ("team", "size"),
    [
        pytest.param("postgresql", SMALL, id="postgresql"),
        pytest.param("sqlite", SMALL, id="sqlite"),
    ],
    indirect=["team"],
)
def test_a_sync_killed_inside_a_write_is_finished_by_the_next(
    team: Team, size: Size, figures: Callable[[str, str], None]
) -> None:
    """``kill -9`` of ``kb-mcp sync`` while it holds a write open: nothing of that write
    stays, an agent whose adds wait for that write meanwhile gets them all acknowledged
    once it is gone, and the next sync takes every page, each once, in its newest text."""
    folder = team.root / "folder"
    write_folder(folder, size.folder_files)
    register(team, folder)
    [server] = team.serve(1 if team.url else 0)
    wrapper, gate = team.root / "gated_sync.py", team.root / "gate"
    wrapper.write_text(GATED_SYNC, encoding="utf-8")
    after = size.folder_files // 2
    victim = subprocess.Popen(
        [sys.executable, str(wrapper), str(gate), str(after), "sync", "--home", str(team.home(0))],
        env=team.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its reader workers die with it
    )
    deadline = time.monotonic() + GATE_BOUND_S
    while not gate.exists():
        assert victim.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    (held,) = re.findall(r"Page (\d+)", gate.read_text())
    pages = write_folder(folder, size.folder_files, round_=1)  # edited meanwhile: a later
    # sync cannot write the held page's first text again
    tally = Tally()
    agent = threading.Thread(target=agent_run, args=(server, 0, 9, tally))
    agent.start()  # its first add waits for the sync's write
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=CLOSE_S)
    agent.join(timeout=CALL_BOUND_S * 9)
    with Library(team.settings(0)) as library:  # the held write left nothing
        assert library.db.query(
            "SELECT count(*) FROM chunks WHERE text LIKE ?", (f"%page{held}r0w%",)
        ) == [(0,)]

    done = subprocess.run(
        cli(team, 0, "sync"), env=team.env, capture_output=True, text=True, timeout=SYNC_BOUND_S
    )
    assert done.returncode == 0, done.stdout + done.stderr
    close_all([server])
    assert tally.errors == []
    check_library(team, tally.acked, pages)
    with Library(team.settings(0)) as library:
        states = library.db.query("SELECT DISTINCT sync_state FROM sources WHERE kind = 'folder'")
        stale = library.db.query("SELECT count(*) FROM chunks WHERE text LIKE '%r0w%'")
    assert (states, stale) == ([("idle",)], [(0,)])
    figures(
        "kill -9",
        f"{'PostgreSQL' if team.url else 'SQLite'}: sync killed inside the write of page "
        f"{after} of {size.folder_files}; the next sync took all, 0 errors beside it",
    )


# --- hybrid over stdio with the server's own embedder -----------------------------------------


def _until_embedded(server: RawServer) -> dict[str, Any]:
    """Poll the server's ``list`` until its background embedder has a vector for every
    passage; the overview it last answered."""
    tally = Tally()
    deadline = time.monotonic() + GATE_BOUND_S
    while True:
        overview = _ok(server.tool("list"), tally, "list")
        assert tally.errors == []
        assert overview is not None
        sources = overview["sources"]
        if overview["health"]["embed_pending"] == 0 and all(
            s["embedded"] == s["chunks"] for s in sources
        ):
            return overview
        assert time.monotonic() < deadline, overview
        time.sleep(0.1)


def test_hybrid_over_stdio_with_the_servers_embedder_ranks_as_on_sqlite(
    tmp_path: Path, child_env: dict[str, str], postgres_url: str
) -> None:
    """Two servers with the embedder on (an Ollama-speaking loopback server), one on a
    SQLite home, one on the PostgreSQL URL: the same notes added over MCP, each server
    embeds them in the background; once both say every passage has its vector, the
    default mode (hybrid) gives the same documents, cites and legs, scores within 1e-5."""
    stores = {
        "sqlite": Team(tmp_path / "sqlite", child_env, None),
        "postgresql": Team(
            tmp_path / "postgresql", {**child_env, "KB_MCP_STORE": postgres_url}, postgres_url
        ),
    }
    with serve_ollama() as ollama, ThreadPoolExecutor(len(stores)) as pool:
        embedding = {"KB_MCP_EMBEDDER": "ollama", "KB_MCP_OLLAMA_HOST": ollama.url}
        running = {
            name: pool.submit(_embedded_answers, team, embedding) for name, team in stores.items()
        }
        answers = {name: future.result() for name, future in running.items()}
    assert len(answers["sqlite"]) == len(answers["postgresql"]) == len(QUESTIONS)
    for on_sqlite, on_postgres in zip(answers["sqlite"], answers["postgresql"], strict=True):
        assert "vector" in on_sqlite[0]["legs"]  # hybrid indeed, on both (the legs are equal)
        assert _ranking(on_postgres) == _ranking(on_sqlite)
        assert [h["score"] for h in on_postgres] == pytest.approx(
            [h["score"] for h in on_sqlite], abs=1e-5
        )


def _embedded_answers(team: Team, embedding: dict[str, str]) -> list[list[dict[str, Any]]]:
    """The team notes added over MCP to a server with ``embedding`` on, and its default
    mode's results for each question once it has embedded every passage."""
    team.root.mkdir()
    [server] = team.serve(0, env=embedding)
    tally = Tally()
    for title, content, uri, tags in DOCUMENTS:
        note = {"title": title, "content": content, "source_uri": uri, "tags": tags}
        _ok(server.tool("add_document", **note), tally, "add_document")
    overview = _until_embedded(server)
    answers = [_ok(server.tool("search", query=q), tally, "search") for q in QUESTIONS]
    close_all([server])
    assert tally.errors == []
    assert "hybrid" in overview["modes"], overview
    return [found["results"] for found in answers if found is not None]


def _ranking(results: list[dict[str, Any]]) -> list[tuple]:
    return [(h["doc"], h["cite"], tuple(h["legs"])) for h in results]
