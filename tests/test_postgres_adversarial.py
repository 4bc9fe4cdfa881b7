"""Bad input against a server on a PostgreSQL library: the adversarial fuzz of issue 11.

``tests/test_adversarial_input.py`` fuzzes every tool of a server on a SQLite home; the
same strategies (built from each tool's own JSON schema) go here to a ``kb-mcp serve``
whose library is on the test PostgreSQL server (``KB_MCP_STORE``). PostgreSQL refuses
what SQLite takes (a NUL in text, a string past an index's row size, a lone surrogate
as UTF-8), so a value SQLite stores or merely fails to find can reach psycopg's own
error here: every case must still answer a result or a clear ``[code]`` error (never
``[internal]``) within the bound, the server alive, and a refused ``add_document`` must
leave every table of the library as it was (a digest of each table read on the server).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from postgres_server import drop_database, fresh_database
from raw_server import STARTUP_TIMEOUT_S, RawServer
from test_adversarial_input import CALL_BOUND_S, ERROR_SHAPE, NASTY, TOOLS, arguments_for

from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store

CASES = 25  # per tool; the SQLite module's long profile covers depth
# Rows a search or a read may write without any caller asking (counters kept by the server).
VOLATILE = frozenset({"meta"})


class Fuzzed:
    def __init__(self, server: RawServer, url: str, schemas: dict[str, dict]) -> None:
        self.server, self.url, self.schemas = server, url, schemas
        self.outcomes: Counter[str] = Counter()


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str], postgres_server: Any
) -> Iterator[Fuzzed]:
    """A small library (a folder, an agent document) on its own database, one server."""
    url = fresh_database(postgres_server, "kb_fuzz")
    root = tmp_path_factory.mktemp("pgfuzz")
    home, folder = root / "home", root / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nThe backup runs nightly.\n")
    settings_ = Settings(home=home, embedder="none", store=Store(url))
    with Library(settings_) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        library.writing.add_document("Notes", "index 索引 backup\n", "t://notes", by_agent=False)
    env = {**child_env, "KB_MCP_STORE": url, "KB_MCP_SYNC_INTERVAL_S": "0"}
    server = RawServer(home, root / "stderr.log", env)
    server.handshake()
    listed = server.request("tools/list", {}, STARTUP_TIMEOUT_S)["result"]["tools"]
    warm = {"name": "search", "arguments": {"query": "backup"}}
    server.request("tools/call", warm, STARTUP_TIMEOUT_S)
    _wait_for_quiet(url)
    try:
        yield Fuzzed(server, url, {t["name"]: t["inputSchema"] for t in listed})
    finally:
        server.close()
        drop_database(postgres_server, url)


def _digest(url: str) -> dict[str, str]:
    """A sha256 over each table's rows (as text, sorted), read in one snapshot."""
    digests = {}
    with psycopg.connect(url) as pg, pg.transaction():
        pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        tables = [
            name
            for (name,) in pg.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        ]
        for table in sorted(set(tables) - VOLATILE):
            rows = pg.execute(f'SELECT t::text FROM "{table}" t ORDER BY 1').fetchall()
            digests[table] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return digests


def _wait_for_quiet(url: str) -> None:
    """Until the server's background work (start-up sync, linking) has settled: the
    digest around a refused write then sees only what that call did."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with psycopg.connect(url, autocommit=True) as pg:
        while time.monotonic() < deadline:
            queued = pg.execute("SELECT count(*) FROM link_queue").fetchone()[0]
            syncing = pg.execute(
                "SELECT count(*) FROM sources WHERE sync_state = 'syncing'"
            ).fetchone()[0]
            if not queued and not syncing:
                return
            time.sleep(0.05)
    raise AssertionError("the server's background work did not settle")


def _call(fuzzed: Fuzzed, tool: str, arguments: Any) -> str:
    """One call and its promises (answer in time, a clear error, nothing changed by a
    refused write); the outcome's name."""
    write = tool == "add_document"
    if write:
        _wait_for_quiet(fuzzed.url)
    before = _digest(fuzzed.url) if write else None
    started = time.monotonic()
    reply = fuzzed.server.request(
        "tools/call", {"name": tool, "arguments": arguments}, CALL_BOUND_S
    )
    assert time.monotonic() - started < CALL_BOUND_S
    assert fuzzed.server.alive(), "the server died"
    if "error" in reply:
        assert isinstance(reply["error"].get("code"), int) and reply["error"].get("message")
        return "protocol error"
    result = reply["result"]
    text = result["content"][0]["text"] if result.get("content") else ""
    if not result.get("isError"):
        return "result"
    assert ERROR_SHAPE.match(text), text[:300]
    if before is not None:
        after = _digest(fuzzed.url)
        changed = sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
        assert not changed, f"a refused write changed the tables {changed}"
    return text[1 : text.index("]")]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_answers_nasty_strings_clearly_on_postgresql(fuzzed: Fuzzed, tool: str) -> None:
    """Each string that broke a parser once, in every string argument of the tool."""
    properties = fuzzed.schemas[tool].get("properties", {})
    strings = [name for name, schema in properties.items() if _takes_a_string(schema)]
    assert strings
    base = {"search": {"query": "backup"}, "grep": {"pattern": "backup"}, "read": {"doc": "x"}}
    base["add_document"] = {"title": "T", "content": "c", "source_uri": "u://x"}
    for name in strings:
        for value in [*NASTY, "a\x00b", "\x00" * 3]:
            fuzzed.outcomes[_call(fuzzed, tool, {**base.get(tool, {}), name: value})] += 1
    assert fuzzed.server.stray_output() == []


def _takes_a_string(schema: dict[str, Any]) -> bool:
    options = schema.get("anyOf", [schema])
    return any(option.get("type") == "string" for option in options)


@pytest.mark.parametrize("tool", TOOLS)
def test_fuzzed_arguments_answer_clearly_in_time_on_postgresql(fuzzed: Fuzzed, tool: str) -> None:
    """hypothesis over the tool's arguments, as on SQLite (issue 11)."""

    @settings(
        max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(arguments=arguments_for(fuzzed.schemas[tool]))
    def one(arguments: dict[str, Any]) -> None:
        fuzzed.outcomes[_call(fuzzed, tool, arguments)] += 1

    one()
    assert fuzzed.server.stray_output() == []
