"""Many machines on one library (issue 24): locks of the library, sources of a host, and
other writers' edits.

Two homes on one PostgreSQL URL stand for two machines (``KB_MCP_HOST`` names each);
a lock held in another process is held by a real subprocess, and ``kill -9`` is a real
SIGKILL. Every wait here waits for a condition (a ready file, a lock coming free), never
for a duration.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from hash_embedder import hash_factory

from kb_mcp.ingest import synclock
from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store
from kb_mcp.store import documents as rows
from kb_mcp.store.db import Database
from kb_mcp.store.host import this_host
from kb_mcp.store.locks import advisory_key
from kb_mcp.store.postgres.database import PostgresDatabase
from tests.test_postgres_folders import FILES, Kb, _machines, _paths

# How long a condition may take to come true before the test fails (a dead backend's
# locks go within milliseconds; this only bounds a broken run).
PATIENCE_S = 60.0

# A process holding the library lock ``name`` until it is killed: it opens the library
# on either engine, takes the lock, says so in the ready file, then blocks on stdin.
HOLDER = """
import sys
from pathlib import Path

engine, target, name, ready = sys.argv[1:5]
if engine == "sqlite":
    from kb_mcp.store.db import Database
    db = Database(Path(target))
else:
    from kb_mcp.store.postgres.database import PostgresDatabase
    db = PostgresDatabase(target)
lock = db.lock(name)
assert lock.acquire()
Path(ready).write_text("held")
sys.stdin.read()
"""

# A home syncing its folder that stops, for good, once the source is marked ``syncing``
# and before its first batch: ``should_stop`` writes the ready file and blocks on stdin.
SYNCER = """
import dataclasses, sys
from pathlib import Path

from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store

home, url, folder, ready = sys.argv[1:5]
settings = dataclasses.replace(
    Settings(home=Path(home)), embedder="none", store=Store(url), folders=(folder,)
)
library = Library(settings)

def hold() -> bool:
    Path(ready).write_text("syncing")
    sys.stdin.read()
    return True

library.folders.sync(should_stop=hold, link=False)
"""


def _eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds (or fail after ``PATIENCE_S``)."""
    give_up = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < give_up, f"still not: {what}"
        time.sleep(0.01)


@contextmanager
def _child(script: str, args: list[str], env: dict[str, str], ready: Path) -> Iterator[int]:
    """Run ``script`` in a subprocess until it writes ``ready``; its pid. Killed after."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdin=subprocess.PIPE, env=env
    )
    try:
        _eventually(lambda: ready.exists() or process.poll() is not None, "child ready")
        assert process.poll() is None, "the child exited before it was ready"
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.fixture(params=["sqlite", "postgresql"])
def library_target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(engine, where): a library on either engine, the lock's behaviour the same."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "home" / "kb.db")
    return "postgresql", request.getfixturevalue("postgres_url")


def _open(engine: str, target: str) -> Database | PostgresDatabase:
    return Database(Path(target)) if engine == "sqlite" else PostgresDatabase(target)


def _settings(home: Path, url: str, **changes: object) -> Settings:
    base = dataclasses.replace(
        Settings(home=home), allow_agent_writes=True, embedder="none", store=Store(url)
    )
    return dataclasses.replace(base, **changes)


# --- the library lock ---------------------------------------------------------------------


def test_a_library_lock_another_process_holds_is_refused_until_it_is_killed(
    library_target: tuple[str, str],
    tmp_path: Path,
    child_env: dict[str, str],
) -> None:
    engine, target = library_target
    db = _open(engine, target)
    ready = tmp_path / "held"
    env = {**child_env, "KB_MCP_HOST": "machine-a"}
    try:
        with _child(HOLDER, [engine, target, "links", str(ready)], env, ready) as pid:
            lock = db.lock("links")
            assert not lock.acquire()
            holder = pid if engine == "sqlite" else f"machine-a:{pid}"
            assert lock.holder_pid() == holder
            assert db.lock("embed-0123456789ab").acquire()  # another name is free
            os.kill(pid, signal.SIGKILL)
            _eventually(lock.acquire, "the killed holder's lock is free")
            lock.release()
    finally:
        db.close()


def test_an_advisory_lock_lives_on_a_session_of_its_own_and_goes_with_it(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two objects conflict even in one process (as two ``FileLock``s do); a released
    lock's session is closed, and nothing of it stays in the pool."""
    monkeypatch.setenv("KB_MCP_HOST", "build-box")
    db = PostgresDatabase(postgres_url)
    try:
        with db.lock("links") as first:
            assert first.acquire()
            second = db.lock("links")
            assert not second.acquire()
            assert second.holder_pid() == f"build-box:{os.getpid()}"
            db.conn.execute("SELECT 1").fetchone()  # the pool works beside it
        assert second.acquire()
        second.release()
        lock_sessions = (
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'kb-mcp lock%'"
        )
        # A closed session's backend leaves the server's view a moment after the close.
        _eventually(lambda: db.query(lock_sessions) == [(0,)], "the lock's session ended")
        assert db.lock("links").holder_pid() is None
    finally:
        db.close()


def test_a_taker_waiting_for_a_lock_keeps_one_session(postgres_url: str) -> None:
    """``take`` tries every ``POLL_S`` while it waits: each try must not log in anew."""
    db = PostgresDatabase(postgres_url)
    sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'kb-mcp lock%'"
    try:
        with db.lock("links") as first, db.lock("links") as second:
            assert first.acquire()
            backends = set()
            for _ in range(3):
                assert not second.acquire()
                backends.add(second._pg.info.backend_pid if second._pg else None)
            assert len(backends) == 1 and None not in backends
            assert db.query(sessions) == [(2,)]
            first.release()
            assert second.acquire()
        _eventually(lambda: db.query(sessions) == [(0,)], "both sessions ended")
    finally:
        db.close()


def test_a_lock_key_is_the_same_in_every_process() -> None:
    """Python's ``hash`` of a string changes per process; the key must not."""
    assert advisory_key("links") == advisory_key("links")
    assert advisory_key("links") != advisory_key("links2")
    script = "from kb_mcp.store.locks import advisory_key; print(advisory_key('links'))"
    other = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert int(other.stdout) == advisory_key("links")


# --- two homes on one URL ---------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """machine-a's ``notes`` (the files ``tests/test_postgres_folders.py`` searches)."""
    root = tmp_path / "notes"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_two_homes_never_sync_one_source_at_once(
    tmp_path: Path, postgres_url: str, folder: Path
) -> None:
    """Both homes list the same folder (the ``folders`` setting); while one syncs it,
    the other's sync that must not wait leaves it, and nothing of the source changes."""
    home_a = Library(_settings(tmp_path / "a", postgres_url, folders=(str(folder),)))
    home_b = Library(_settings(tmp_path / "b", postgres_url, folders=(str(folder),)))
    seen: list[object] = []

    def during_a(*_: object) -> bool:
        if not seen:
            seen.append(home_b.folders.sync(wait=False, link=False))
        return False

    try:
        [report] = home_a.folders.sync(should_stop=during_a, link=False)
        assert seen == [[]]  # home b skipped the source: its sync was running
        assert report.added == 3
        assert rows.get_source(home_b.db.conn, "notes").sync_state == "idle"
    finally:
        home_a.close()
        home_b.close()


def test_two_homes_never_embed_one_signature_at_once(tmp_path: Path, postgres_url: str) -> None:
    def embedding(home: Path) -> Library:
        settings = _settings(home, postgres_url, embedder="test", embed_model="hash-64")
        return Library(settings, make_embedder=hash_factory())

    home_a, home_b = embedding(tmp_path / "a"), embedding(tmp_path / "b")
    seen: list[object] = []

    def during_a(*_: object) -> None:
        if not seen:
            seen.append(home_b.vectors.embed_pending(wait=False))

    try:
        for i in range(3):
            home_a.writing.add_document(f"Note {i}", f"The gateway restarts at {i}.", f"notes/{i}")
        report = home_a.vectors.embed_pending(progress=during_a)
        assert seen == [None]  # home b's run found the signature's lock held
        assert report is not None and report.complete
    finally:
        home_a.close()
        home_b.close()


def test_a_sync_killed_on_one_machine_is_recovered_by_another_homes_open(
    tmp_path: Path, postgres_url: str, folder: Path, child_env: dict[str, str]
) -> None:
    """While the sync runs, another home's open leaves it ``syncing`` (a live holder);
    after ``kill -9`` the next open anywhere marks it ``error``, saying why."""
    ready = tmp_path / "syncing"
    args = [str(tmp_path / "a"), postgres_url, str(folder), str(ready)]
    with _child(SYNCER, args, child_env, ready) as pid:
        running = Library(_settings(tmp_path / "b", postgres_url))
        try:
            assert rows.get_source(running.db.conn, "notes").sync_state == "syncing"
        finally:
            running.close()
        os.kill(pid, signal.SIGKILL)
    db = PostgresDatabase(postgres_url)
    try:
        lock = synclock.source_lock(db, "notes")
        _eventually(lock.acquire, "the killed sync's lock is free")
        lock.release()
    finally:
        db.close()
    after = Library(_settings(tmp_path / "b", postgres_url))
    try:
        source = rows.get_source(after.db.conn, "notes")
        assert (source.sync_state, source.sync_error) == ("error", synclock.INTERRUPTED)
    finally:
        after.close()


# --- folder sources belong to their machine -------------------------------------------


@pytest.fixture
def machines(tmp_path: Path, child_env: dict[str, str], postgres_url: str) -> tuple[Kb, Kb]:
    """The CLI of two machines (``KB_MCP_HOST`` machine-a and machine-b) on one URL."""
    return _machines(tmp_path, child_env, postgres_url)


@pytest.fixture
def theirs(tmp_path: Path) -> Path:
    """machine-b's own folder: another name than machine-a's ``notes``."""
    root = tmp_path / "machine-b" / "runbooks"
    root.mkdir(parents=True)
    (root / "cache.md").write_text("# Cache\n\nWarm the cache before the release.\n")
    return root


def _configured(kb: Kb, *folders: Path) -> Kb:
    """``kb`` with the ``folders`` setting naming ``folders`` (``KB_MCP_FOLDERS``)."""
    named = os.pathsep.join(str(folder) for folder in folders)

    def run(command: str, *args: str, exit_code: int = 0) -> subprocess.CompletedProcess:
        return kb(command, *args, exit_code=exit_code, env={"KB_MCP_FOLDERS": named})

    return run


def test_list_says_which_machine_each_folder_belongs_to(
    machines: tuple[Kb, Kb], folder: Path, theirs: Path
) -> None:
    machine_a, machine_b = machines
    machine_a("add", str(folder), "--yes")
    machine_b("add", str(theirs), "--yes")
    listed = json.loads(machine_a("list", "--json").stdout)
    hosts = {s["name"]: s["host"] for s in listed["sources"]}
    assert hosts == {"notes": "machine-a", "runbooks": "machine-b"}
    text = machine_b("list").stdout
    assert f"(folder, {folder} on machine-a)" in text
    assert f"(folder, {theirs} on machine-b)" in text


def test_a_sync_drops_its_own_machines_unlisted_folders_and_never_anothers(
    machines: tuple[Kb, Kb], folder: Path, theirs: Path
) -> None:
    """machine-b stops configuring its folder: its bare sync drops that folder's
    documents, and keeps machine-a's, which machine-b never listed either."""
    machine_a, machine_b = machines
    machine_a("add", str(folder), "--yes")
    _configured(machine_b, theirs)("sync")
    assert _paths(machine_a, "warm the cache") == ["cache.md"]

    machine_b("sync")
    assert _paths(machine_a, "warm the cache") == []
    assert _paths(machine_b, "restart the gateway")[0] == "deploy.md"


def test_removing_another_machines_folder_is_refused_naming_it(
    machines: tuple[Kb, Kb], folder: Path
) -> None:
    machine_a, machine_b = machines
    machine_a("add", str(folder), "--yes")
    refused = machine_b("remove", "notes", exit_code=4)
    assert "belongs to the machine 'machine-a'" in refused.stderr
    assert "--force" in refused.stderr
    assert _paths(machine_b, "restart the gateway")[0] == "deploy.md"

    machine_a("remove", "notes")  # its own machine removes it
    assert _paths(machine_b, "restart the gateway") == []


def test_a_folder_named_as_another_machines_is_not_synced_into_it(
    machines: tuple[Kb, Kb], folder: Path, theirs: Path, tmp_path: Path
) -> None:
    """The ``folders`` setting names a folder by its basename: machine-b's ``notes``
    would sync into machine-a's source and remove the files only machine-a's holds. It
    is refused, naming the machine, and machine-b's other folder still syncs."""
    machine_a, machine_b = machines
    machine_a("add", str(folder), "--yes")
    other = tmp_path / "machine-b" / "notes"
    other.mkdir(parents=True)
    (other / "stale.md").write_text("# Stale\n\nAn old page about the wagon schedule.\n")

    refused = _configured(machine_b, other, theirs)("sync", exit_code=4)
    assert "name of a folder of the machine 'machine-a'" in refused.stderr
    assert _paths(machine_a, "restart the gateway")[0] == "deploy.md"
    assert _paths(machine_a, "wagon schedule") == []
    assert _paths(machine_a, "warm the cache") == ["cache.md"]


def test_a_folder_recorded_before_hosts_is_claimed_by_its_next_sync(tmp_path: Path) -> None:
    """Migration 16 on an existing SQLite library: its folder rows have no host (NULL),
    and the first sync after records this machine's."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nText.\n")
    settings = dataclasses.replace(Settings(home=tmp_path / "home"), embedder="none")
    library = Library(settings)
    library.folders.add_folder(folder)
    library.folders.sync()
    with library.db.write() as conn:
        conn.execute("ALTER TABLE sources DROP COLUMN host")
        conn.execute("PRAGMA user_version = 15")
    library.close()

    library = Library(settings)
    try:
        assert rows.get_source(library.db.conn, "notes").host is None
        library.folders.sync()
        assert rows.get_source(library.db.conn, "notes").host == this_host(settings.host)
    finally:
        library.close()


# --- one machine's edits, searchable on another's server at once ------------------------


async def _add(client, title: str, content: str, uri: str) -> str:
    added = await client.call_tool(
        "add_document", {"title": title, "content": content, "source_uri": uri}
    )
    assert added.structured_content["outcome"] == "created"
    return added.structured_content["doc"]


async def _found(client, question: str) -> list[str]:
    found = await client.call_tool("search", {"query": question, "mode": "keyword"})
    return [r["doc"] for r in found.structured_content["results"]]


async def _relations(client, doc: str) -> list[str]:
    return (await client.call_tool("read", {"doc": doc})).structured_content["relations"]


@pytest.mark.anyio
async def test_another_servers_edit_is_found_by_the_next_call_caches_included(
    spawn_mcp, child_env: dict[str, str], postgres_url: str, tmp_path: Path
) -> None:
    """Two ``kb-mcp serve`` on one URL, each with a home of its own. Server b has
    searched, listed and written first (its keyword index, counts and name index are
    built); then a's document is in b's very next search, list and grep, and b's next
    document resolves a reference to it (b's name index caught up with a's write)."""
    env = child_env | {"KB_MCP_STORE": postgres_url}
    serve = dict(allow_agent_writes=True, env=env)
    async with (
        spawn_mcp(tmp_path / "a", log_file=tmp_path / "a.log", **serve) as server_a,
        spawn_mcp(tmp_path / "b", log_file=tmp_path / "b.log", **serve) as server_b,
    ):
        await _add(
            server_b,
            "Health checks",
            "# Health\n\nEvery service answers /healthz.\n",
            "agent://notes/health",
        )
        assert await _found(server_b, "sticky sessions") == []
        listed = (await server_b.call_tool("list", {})).structured_content
        assert listed["documents"] == 1

        adr7 = await _add(
            server_a,
            "ADR-7: sessions in Redis",
            "# ADR-7: sessions in Redis\n\nWe rejected sticky sessions.\n",
            "agent://adr/7",
        )
        assert await _found(server_b, "sticky sessions") == [adr7]
        listed = (await server_b.call_tool("list", {})).structured_content
        assert listed["documents"] == 2
        grep = (await server_b.call_tool("grep", {"pattern": "sticky"})).structured_content
        assert [m["doc"] for m in grep["matches"]] == [adr7]

        adr12 = await _add(
            server_b,
            "ADR-12: sessions in PostgreSQL",
            "# ADR-12: sessions in PostgreSQL\n\nSupersedes ADR-7.\n",
            "agent://adr/12",
        )
        # The server links in the background (``Writing.add_document(link=False)``).
        give_up = time.monotonic() + PATIENCE_S
        while not any(adr12 in r for r in await _relations(server_a, adr7)):
            assert time.monotonic() < give_up, "b's document never linked to a's"
            await anyio.sleep(0.05)
