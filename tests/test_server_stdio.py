"""The MCP server as an agent meets it: ``kb-mcp serve`` spawned over stdio, a real client.

Every test here talks JSON-RPC to a real subprocess on a real ``kb.db`` in ``tmp_path``
(built by the production migrations). Nothing is mocked in the test process; the one
test that needs a misbehaving server patches the server subprocess itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from fastmcp import Client
from inline_snapshot import snapshot

from kb_mcp.index.fts import FTS_VERSION
from kb_mcp.library import Library

pytestmark = pytest.mark.anyio

TOOLS = {"list", "search", "grep", "read", "add_document"}
HIT_FIELDS = {
    "rank",
    "score",
    "doc",
    "title",
    "path",
    "section",
    "start_line",
    "end_line",
    "text",
    "cite",
}


# --- helpers ----------------------------------------------------------------------------------


def text_of(result: Any) -> str:
    """The text content blocks of a tool result, joined."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    assert not result.is_error, f"{tool}({arguments}) failed: {text_of(result)}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; the error text the agent sees."""
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    assert result.is_error, f"{tool}({arguments}) succeeded: {result.structured_content}"
    return text_of(result)


async def add(client: Client, title: str, content: str, uri: str) -> dict[str, Any]:
    return await ok(client, "add_document", title=title, content=content, source_uri=uri)


async def search_docs(client: Client, query: str) -> list[str]:
    """Document ids of a search, best first."""
    return [hit["doc"] for hit in (await ok(client, "search", query=query))["results"]]


def fts_version(home: Path) -> str | None:
    conn = apsw.Connection(str(home / "kb.db"))
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'fts_version'").fetchone()
        return row[0] if row else None
    finally:
        conn.close()


# --- the tool surface -------------------------------------------------------------------------


async def test_tools_list_is_exactly_five_tools_with_snapshotted_contracts(mcp_client) -> None:
    async with mcp_client() as client:
        tools = await client.list_tools()
    assert {t.name for t in tools} == TOOLS
    contracts = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in sorted(tools, key=lambda t: t.name)
    ]
    assert contracts == snapshot(
        [
            {
                "name": "add_document",
                "description": """\
Save text you have already read into the knowledge base so later searches find it.
`source_uri` identifies the document (its URL or path): adding again with the same uri
replaces the earlier version; it is a label only and is never opened. Secrets in the text
are redacted before storage. Disabled unless the user allowed agent writes.\
""",
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "title": {
                            "description": "A short descriptive title.",
                            "maxLength": 300,
                            "minLength": 1,
                            "type": "string",
                        },
                        "content": {
                            "description": "The text, as Markdown.",
                            "minLength": 1,
                            "type": "string",
                        },
                        "source_uri": {
                            "description": "Where the text came from; the document's identity.",
                            "maxLength": 2048,
                            "minLength": 1,
                            "type": "string",
                        },
                        "tags": {
                            "anyOf": [
                                {"items": {"type": "string"}, "maxItems": 32, "type": "array"},
                                {"type": "null"},
                            ],
                            "default": None,
                            "description": "Optional tags.",
                        },
                    },
                    "required": ["title", "content", "source_uri"],
                },
            },
            {
                "name": "grep",
                "description": """\
Find lines containing an exact string (or a regular expression with regex=true) in the
stored text of every document. Regexes are RE2 syntax: no lookaround or backreferences,
repeats up to {1000}; \\w and \\d are ASCII, \\pL matches any letter. Returns {doc, path,
line_number, line} per matching line, and says when it stopped at max_matches or at the
time limit. Use it for identifiers, error messages, config keys; use `search` for
questions in natural language.\
""",
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "pattern": {
                            "description": "Text to find (a regex if regex=true).",
                            "maxLength": 1000,
                            "minLength": 1,
                            "type": "string",
                        },
                        "regex": {
                            "default": False,
                            "description": "Treat pattern as a regular expression.",
                            "type": "boolean",
                        },
                        "ignore_case": {
                            "default": False,
                            "description": "Match regardless of case.",
                            "type": "boolean",
                        },
                        "source": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "description": "Only this source.",
                        },
                        "path_glob": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "description": "Only paths matching this glob, e.g. 'docs/*.md'.",
                        },
                        "max_matches": {
                            "default": 200,
                            "description": "Stop after this many lines.",
                            "maximum": 1000,
                            "minimum": 1,
                            "type": "integer",
                        },
                    },
                    "required": ["pattern"],
                },
            },
            {
                "name": "list",
                "description": """\
Without `source`: the library's sources (folders, agent-added, uploads) with document
and chunk counts, sync state, index health and the search modes available. With
`source`: that source's documents, newest first, a page at a time (limit / offset), and
the files its last sync could not index or left out, with the reason for each.\
""",
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "source": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "description": "A source name to browse.",
                        },
                        "limit": {
                            "default": 50,
                            "description": "Documents per page.",
                            "maximum": 200,
                            "minimum": 1,
                            "type": "integer",
                        },
                        "offset": {
                            "default": 0,
                            "description": "Documents to skip.",
                            "maximum": 1000000000,
                            "minimum": 0,
                            "type": "integer",
                        },
                    },
                },
            },
            {
                "name": "read",
                "description": """\
Read a document, or part of it, as Markdown with its metadata. `doc` is a document id,
a `cite` string from search (`<doc>#L12-L40` reads exactly those lines), a source uri or a
file path. Optional start_line / end_line (1-based, inclusive) select lines. `relations`
lists what corrects, withdraws, supersedes or updates it, and what it changes.\
""",
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "doc": {
                            "description": "Document id, cite string, uri or path.",
                            "maxLength": 4096,
                            "minLength": 1,
                            "type": "string",
                        },
                        "start_line": {
                            "anyOf": [
                                {"maximum": 100000000, "minimum": 1, "type": "integer"},
                                {"type": "null"},
                            ],
                            "default": None,
                            "description": "First line (1-based).",
                        },
                        "end_line": {
                            "anyOf": [
                                {"maximum": 100000000, "minimum": 1, "type": "integer"},
                                {"type": "null"},
                            ],
                            "default": None,
                            "description": "Last line (inclusive).",
                        },
                    },
                    "required": ["doc"],
                },
            },
            {
                "name": "search",
                "description": """\
Search the knowledge base for passages that answer a question: ranked keyword search
(Chinese/Japanese aware, code identifiers split: `user id lookup` finds `getUserById`),
fused with search by meaning when vectors are available; `legs` can add the entity graph
(the names in the question and what other passages say about them, for answers that join
two documents). Returns the best passage of each matching document with its title, path,
section, line span, `score` (the ranking model's estimate, 0 to 1, that it answers;
results come in score order), the `legs` that found it with their `leg_scores`, the
`adjustments` that moved it after ranking (a correction placed above what it corrects),
its `relations` to other documents (`corrected by <cite>`, `withdrawn on <date> by
<cite>`, `superseded by <cite>`, `corrects <cite>`, `contradicts <cite>`: tell the user
what changed, and never pick silently between contradicting results) and a `cite` string
(`<doc>#L12-L40`) that `read` accepts. If vector or hybrid mode cannot run, you get
keyword results with `fallback: "keyword"` and the `reason`. An empty `results` list means
the answer is probably not stored (the `reason` says why): say so rather than guessing.
Use `grep` instead for an exact string or regex, `read` to see more around a result.\
""",
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "query": {
                            "description": "What to look for, in words.",
                            "maxLength": 4000,
                            "minLength": 1,
                            "type": "string",
                        },
                        "top_k": {
                            "default": 8,
                            "description": "How many documents to return.",
                            "maximum": 100,
                            "minimum": 1,
                            "type": "integer",
                        },
                        "mode": {
                            "default": "auto",
                            "description": (
                                "auto: hybrid when vectors are ready, else keyword; keyword, "
                                "vector or hybrid to choose."
                            ),
                            "enum": ["auto", "keyword", "vector", "hybrid"],
                            "type": "string",
                        },
                        "source": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "description": "Only this source (see `list`).",
                        },
                        "legs": {
                            "anyOf": [
                                {
                                    "items": {
                                        "enum": [
                                            "keyword",
                                            "vector",
                                            "graph",
                                            "document",
                                            "feedback",
                                        ],
                                        "type": "string",
                                    },
                                    "maxItems": 5,
                                    "minItems": 1,
                                    "type": "array",
                                },
                                {"type": "null"},
                            ],
                            "default": None,
                            "description": "Run only these legs instead of the mode's plan "
                            "(to compare them); document ranks whole documents, feedback "
                            "searches again with the rare words of the first results, graph "
                            "follows the entities the question names to related passages.",
                        },
                    },
                    "required": ["query"],
                },
            },
        ]
    )


# --- add → search → read → grep ---------------------------------------------------------------

RUNBOOK = """\
# Deploy runbook

## Rolling back

Run `make rollback ENV=prod` to return to the previous release.
The rollback takes about four minutes and keeps the database as it is.

## Feature flags

Flags live in flags.yaml; flip `checkout_v2` to disable the new checkout page.
Flag changes reach every server within thirty seconds.
"""


async def test_search_read_grep_round_trip_cites_exact_lines(mcp_client) -> None:
    lines = RUNBOOK.split("\n")
    async with mcp_client(allow_agent_writes=True) as client:
        added = await add(client, "Deploy runbook", RUNBOOK, "https://wiki.example/runbook")
        assert added["outcome"] == "created"

        found = await ok(client, "search", query="return to the previous release")
        hit = found["results"][0]
        assert set(hit) >= HIT_FIELDS
        assert (hit["rank"], hit["doc"], hit["title"]) == (1, added["doc"], "Deploy runbook")
        assert hit["path"] == "https://wiki.example/runbook"
        assert hit["section"][-1] == "Rolling back"
        assert hit["score"] > 0
        assert "previous release" in hit["text"]
        assert hit["cite"] == f"{added['doc']}#L{hit['start_line']}-L{hit['end_line']}"

        read = await ok(client, "read", doc=hit["cite"])
        assert (read["start_line"], read["end_line"]) == (hit["start_line"], hit["end_line"])
        assert read["text"] == "\n".join(lines[hit["start_line"] - 1 : hit["end_line"]])
        assert hit["text"] in read["text"]

        grep = await ok(client, "grep", pattern="checkout_v2")
        expected_line = next(i for i, line in enumerate(lines, 1) if "checkout_v2" in line)
        assert [(m["doc"], m["line_number"], m["line"]) for m in grep["matches"]] == [
            (added["doc"], expected_line, lines[expected_line - 1])
        ]
        assert (grep["truncated"], grep["timed_out"]) == (False, False)


# A lone "\r" is not here: add_document normalises it to "\n" on the way in, as files are
# decoded (tests/test_decode.py), so it is a real line break everywhere.
UNUSUAL_LINE_BREAKS = ("\f", "\v", "\x1c", "\x85", "\u2028")


async def test_read_cite_matches_search_passage_when_text_has_unusual_line_breaks(
    mcp_client,
) -> None:
    """Cites count lines at "\\n" only, as read and grep do.

    Regression: the chunker numbered lines with ``str.splitlines()``, which also breaks at
    form feed, vertical tab, U+001C, U+0085, U+2028 and a lone CR, so every cite after such
    a character pointed at the wrong lines.
    """
    async with mcp_client(allow_agent_writes=True) as client:
        for n, brk in enumerate(UNUSUAL_LINE_BREAKS):
            content = (
                f"# Notes {n}\n\n## One\n\npage one{brk}page two{brk}page three\n\n"
                f"## Two\n\nthe zebrafish{n} paragraph is here.\n\nlast line.\n"
            )
            added = await add(client, f"Notes {n}", content, f"test://breaks/{n}")
            hit = (await ok(client, "search", query=f"zebrafish{n}"))["results"][0]
            assert hit["doc"] == added["doc"]
            read = await ok(client, "read", doc=hit["cite"])
            assert read["text"] == hit["text"], repr(brk)
            grep = await ok(client, "grep", pattern=f"zebrafish{n}")
            assert [m["line_number"] for m in grep["matches"]] == [9], repr(brk)


# --- identity by uri --------------------------------------------------------------------------


async def test_add_document_same_uri_replaces_and_same_content_is_unchanged(mcp_client) -> None:
    uri = "https://notes.example/cache"
    old = "# Cache\n\nThe cache uses memcached with a ten minute expiry.\n"
    new = "# Cache\n\nThe cache now uses redis with a five minute expiry.\n"
    async with mcp_client(allow_agent_writes=True) as client:
        first = await add(client, "Cache notes", old, uri)
        created_at = (await ok(client, "read", doc=first["doc"]))["created_at"]
        second = await add(client, "Cache notes", new, uri)
        assert (first["outcome"], second["outcome"]) == ("created", "replaced")
        assert second["doc"] == first["doc"]

        assert await search_docs(client, "memcached") == []
        assert (await ok(client, "grep", pattern="memcached"))["matches"] == []
        assert await search_docs(client, "redis") == [first["doc"]]
        read = await ok(client, "read", doc=first["doc"])
        assert read["text"] == new
        assert read["created_at"] == created_at

        again = await add(client, "Cache notes", new, uri)
        assert (again["outcome"], again["doc"]) == ("unchanged", first["doc"])

        other = await add(client, "Cache notes", new, "https://notes.example/cache-copy")
        assert other["outcome"] == "created"
        assert other["doc"] != first["doc"]
        assert (await ok(client, "list"))["documents"] == 2


async def test_add_document_refused_without_allow_agent_writes_and_stores_nothing(
    mcp_client, home: Path
) -> None:
    async with mcp_client() as client:
        message = await fail(
            client, "add_document", title="Note", content="Some text.", source_uri="test://n"
        )
        overview = await ok(client, "list")
    assert message.startswith("[refused]")
    assert "--allow-agent-writes" in message
    assert "KB_MCP_ALLOW_AGENT_WRITES" in message
    assert (overview["documents"], overview["sources"]) == (0, [])
    assert list((home / "docs").glob("**/*")) == []


# --- redaction --------------------------------------------------------------------------------

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # ghp_ + 36 alphanumerics
PASSWORD = "Tr0ub4dor-3xyz-horse"
# Search ORs the parts of a query word (``getUserById`` → get, user, by, id), so these
# secrets are chosen to share no part with the prose left around them after redaction.
PEM_LINES = (
    "MIIEpAIBAAKCAQEA3Tz2mVx8Qw5Rk7Jp4Lc9Hn1Bf6Gd0Ys2Ux",
    "Qk7pL2mN8vR4tY6uI0oP3aS5dF7gH9jK",
)
SECRETS = (AWS_KEY, GITHUB_TOKEN, PASSWORD, *PEM_LINES)
CREDENTIALS_NOTE = f"""\
# Staging credentials

The staging deploy used these values, rotate them before launch.

aws_access_key_id: {AWS_KEY}
GITHUB_TOKEN={GITHUB_TOKEN}
db_password = "{PASSWORD}"

-----BEGIN RSA PRIVATE KEY-----
{PEM_LINES[0]}
{PEM_LINES[1]}
-----END RSA PRIVATE KEY-----

Ask the platform team before reusing them.
"""


async def test_add_document_redacts_secrets_before_storage_search_and_read(
    mcp_client, home: Path
) -> None:
    async with mcp_client(allow_agent_writes=True) as client:
        added = await add(client, "Staging credentials", CREDENTIALS_NOTE, "test://creds")
        assert added["redactions"] >= 4
        assert {"aws_access_key", "github_token", "password", "private_key"} <= set(
            added["redacted_kinds"]
        )
        for secret in SECRETS:
            assert await search_docs(client, secret) == [], secret
            assert (await ok(client, "grep", pattern=secret))["matches"] == [], secret
        result = await client.call_tool("read", {"doc": added["doc"]}, raise_on_error=False)
        # The document is there, minus its secrets.
        assert await search_docs(client, "platform team") == [added["doc"]]
    read_output = text_of(result) + json.dumps(result.structured_content)
    assert "Ask the platform team" in read_output

    (stored,) = (home / "docs").glob("*.md")
    stored_text = stored.read_text(encoding="utf-8")
    assert "[REDACTED:" in stored_text
    database = b"".join(p.read_bytes() for p in home.glob("kb.db*"))
    for secret in SECRETS:
        assert secret not in read_output
        assert secret not in stored_text
        assert secret.encode() not in database


# --- search quality through the wire ----------------------------------------------------------

ML_NOTE = """\
# 机器学习入门

机器学习是人工智能的一个分支。它让计算机从数据中发现规律。

常见的方法包括监督学习和无监督学习。模型需要大量的训练数据。

建立索引可以加快检索速度。
"""
TRAVEL_NOTE = """\
# 旅行日记

我们在机场等了很久。安检的仪器检查很严格。

后来去了一所学校参观。大家都有早起的习惯。
"""
DATABASE_NOTE = """\
# 数据库运维

数据库的备份每天凌晨执行。

恢复时先停止写入，再校验备份文件。
"""


USER_SERVICE = """\
# User service

```python
def getUserById(user_id):
    return db.fetch_one(user_id)
```
"""
TRANSPORT_NOTE = """\
# Transport layer

Every outgoing call goes through `HttpClient.send_request(req)`, which retries twice.
"""
# Shares "client", "send" and "user" with the identifier queries, none of the identifiers.
ONBOARDING_NOTE = """\
# Onboarding

Send a welcome email to every new client user.
"""
SYNTAX_ZOO = """\
# Syntax zoo

foo bar and start col val x y near a b unbalanced quotes.
"""
SEARCH_CORPUS = (
    ("机器学习入门", ML_NOTE, "test://ml"),
    ("旅行日记", TRAVEL_NOTE, "test://travel"),
    ("数据库运维", DATABASE_NOTE, "test://db"),
    ("User service", USER_SERVICE, "test://users"),
    ("Transport layer", TRANSPORT_NOTE, "test://http"),
    ("Onboarding", ONBOARDING_NOTE, "test://onboarding"),
    ("Syntax zoo", SYNTAX_ZOO, "test://zoo"),
)


@pytest.fixture(scope="module")
async def search_corpus(
    spawn_mcp, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Client, dict[str, str]]]:
    """One server over ``SEARCH_CORPUS``, shared by the read-only search tests; ids by uri."""
    root = tmp_path_factory.mktemp("search-corpus")
    async with spawn_mcp(
        root / "home", log_file=root / "server-stderr.log", allow_agent_writes=True
    ) as client:
        ids = {
            uri: (await add(client, title, text, uri))["doc"] for title, text, uri in SEARCH_CORPUS
        }
        yield client, ids


async def test_search_chinese_queries_of_one_two_and_four_characters(search_corpus) -> None:
    client, ids = search_corpus
    assert (await search_docs(client, "库"))[0] == ids["test://db"]
    assert (await search_docs(client, "索引"))[0] == ids["test://ml"]
    assert (await search_docs(client, "备份"))[0] == ids["test://db"]
    # 机, 器, 学 and 习 all occur in the travel diary, but never next to each other.
    assert all(char in TRAVEL_NOTE for char in "机器学习")
    assert "机器" not in TRAVEL_NOTE and "学习" not in TRAVEL_NOTE
    assert (await search_docs(client, "机器学习"))[0] == ids["test://ml"]


async def test_search_code_identifiers_by_parts_and_whole(search_corpus) -> None:
    client, ids = search_corpus
    assert (await search_docs(client, "user id lookup"))[0] == ids["test://users"]
    assert (await search_docs(client, "getUserById"))[0] == ids["test://users"]
    assert (await search_docs(client, "send request http client"))[0] == ids["test://http"]


FTS_SYNTAX_QUERIES = (
    '"',
    '"unbalanced',
    "*",
    "foo*",
    "NEAR(a b)",
    "a -b",
    "col:val",
    "(x OR y)",
    "AND",
    "^start",
)


async def test_search_fts_syntax_characters_are_words_never_errors(search_corpus) -> None:
    client, ids = search_corpus
    outcomes: dict[str, str] = {}
    for query in FTS_SYNTAX_QUERIES:
        result = await client.call_tool("search", {"query": query}, raise_on_error=False)
        if result.is_error:
            outcomes[query] = f"error: {text_of(result)}"
        elif isinstance(result.structured_content.get("results"), list):
            outcomes[query] = "results"
        else:
            outcomes[query] = f"no results list: {result.structured_content}"
    assert outcomes == dict.fromkeys(FTS_SYNTAX_QUERIES, "results")
    # The operators were read as words: "col:val" finds the document holding col and val.
    assert (await search_docs(client, "col:val"))[0] == ids["test://zoo"]


# --- grep bounds ------------------------------------------------------------------------------


async def test_grep_catastrophic_regex_returns_within_time_limit(mcp_client, home: Path) -> None:
    home.mkdir()
    # The real setting, lowered from 3 s so the test is quick; the bound is what is tested.
    (home / "config.toml").write_text("grep_timeout_ms = 500\n", encoding="utf-8")
    async with mcp_client(allow_agent_writes=True) as client:
        await add(client, "Many a", "a" * 5000 + "b\n", "test://aaaa")
        started = time.monotonic()
        with anyio.fail_after(20):
            result = await ok(client, "grep", pattern="(a|aa)+$", regex=True)
        elapsed = time.monotonic() - started
        # The server still answers afterwards.
        assert (await ok(client, "list"))["documents"] == 1
    # The line ends in "b": the pattern can never match, it can only run out of time.
    assert result["matches"] == []
    assert isinstance(result["timed_out"], bool)
    assert elapsed < 10  # 0.5 s limit, with room for a loaded machine


# --- the wire ---------------------------------------------------------------------------------

NOISY_SERVER = '''\
"""kb-mcp serve, with a search that first writes to fd 1 three ways."""
import ctypes
import os
import sys

import kb_mcp.library.lookup
from kb_mcp.cli.main import main

_search = kb_mcp.library.lookup.Lookup.search


def noisy_search(self, *args, **kwargs):
    print("NOISE", flush=True)
    os.write(1, b"garbage\\n")
    ctypes.CDLL(None).write(1, b"c-noise\\n", 8)
    return _search(self, *args, **kwargs)


kb_mcp.library.lookup.Lookup.search = noisy_search
sys.exit(main(sys.argv[1:]))
'''


async def test_stdout_writes_during_tool_call_do_not_corrupt_json_rpc(
    mcp_client, tmp_path: Path, server_log: Path
) -> None:
    wrapper = tmp_path / "noisy_server.py"
    wrapper.write_text(NOISY_SERVER, encoding="utf-8")
    async with mcp_client(allow_agent_writes=True, entry=[str(wrapper)]) as client:
        added = await add(client, "Runbook", RUNBOOK, "test://runbook")
        for _ in range(5):
            assert await search_docs(client, "previous release") == [added["doc"]]
        assert (await ok(client, "list"))["documents"] == 1
    # The noise happened, and landed on stderr instead of the protocol stream.
    log = server_log.read_text(encoding="utf-8", errors="replace")
    assert (log.count("NOISE"), log.count("garbage"), log.count("c-noise")) == (5, 5, 5)


# --- files are the truth ----------------------------------------------------------------------

REBUILD_DOCS = (
    ("Deploy runbook", RUNBOOK, "test://runbook"),
    ("机器学习入门", ML_NOTE, "test://ml"),
    ("数据库运维", DATABASE_NOTE, "test://db"),
    ("Cache notes", "# Cache\n\nThe cache uses redis with a five minute expiry.\n", "test://c"),
)
REBUILD_QUERIES = ("previous release", "机器学习", "备份", "redis expiry", "database")


def hit_summary(found: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(hit["doc"], hit["cite"], hit["text"]) for hit in found["results"]]


async def test_reindex_rebuild_after_deleting_db_gives_same_results(
    mcp_client, home: Path, kb_cli
) -> None:
    async with mcp_client(allow_agent_writes=True) as client:
        docs = [(await add(client, *spec))["doc"] for spec in REBUILD_DOCS]
        added_at = time.monotonic()
        before = {q: hit_summary(await ok(client, "search", query=q)) for q in REBUILD_QUERIES}
        reads_before = {d: await ok(client, "read", doc=d) for d in docs}
    assert all(before.values()), before

    # Timestamps have one-second resolution: make sure a re-stamp would show.
    await anyio.sleep(max(0.0, 1.1 - (time.monotonic() - added_at)))
    for name in ("kb.db", "kb.db-wal", "kb.db-shm"):
        (home / name).unlink(missing_ok=True)
    done = kb_cli("reindex", "--rebuild")
    assert done.returncode == 0, done.stderr

    async with mcp_client() as client:
        after = {q: hit_summary(await ok(client, "search", query=q)) for q in REBUILD_QUERIES}
        reads_after = {d: await ok(client, "read", doc=d) for d in docs}
    assert after == before
    assert reads_after == reads_before
    assert all(r["created_at"] and r["updated_at"] for r in reads_after.values())


# --- lazy FTS migration -----------------------------------------------------------------------

LEGACY_DOCS = (
    ("机器学习入门", ML_NOTE, "test://ml"),
    ("数据库运维", DATABASE_NOTE, "test://db"),
)


@pytest.fixture
def legacy_fts_library(library: Library, home: Path) -> dict[str, str]:
    """A library whose FTS index predates CJK segmentation; doc ids by uri.

    Built by the current code, then downgraded by hand to what an old version wrote: the
    default tokenizer over raw chunk text, and an older ``fts_version``.
    """
    ids = {
        uri: library.writing.add_document(title, text, uri, by_agent=False).doc
        for title, text, uri in LEGACY_DOCS
    }
    library.close()
    conn = apsw.Connection(str(home / "kb.db"))
    try:
        with conn:
            conn.execute("DROP TABLE chunks_fts")
            conn.execute(
                "CREATE VIRTUAL TABLE chunks_fts USING fts5(head, body, content='', "
                "contentless_delete=1)"
            )
            conn.execute(
                "INSERT INTO chunks_fts(rowid, head, body) SELECT c.id, d.title, c.text "
                "FROM chunks c JOIN documents d ON d.id = c.document_id"
            )
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_version', '0|old')")
        # The premise: the old index cannot find a two-character word inside a clause.
        old_hits = conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", ('"索引"',)
        ).fetchall()
        assert old_hits == []
    finally:
        conn.close()
    return ids


async def test_legacy_fts_index_is_migrated_by_first_search_not_by_initialize(
    legacy_fts_library: dict[str, str], home: Path, mcp_client
) -> None:
    async with mcp_client() as client:  # entering the client is the initialize handshake
        assert client.server_info.name == "kb-mcp"
        assert "search" in (client.instructions or "")
        assert {t.name for t in await client.list_tools()} == TOOLS
        # The handshake neither waited for nor ran the rebuild the database needs.
        assert fts_version(home) == "0|old"

        assert (await search_docs(client, "索引"))[0] == legacy_fts_library["test://ml"]
        assert (await search_docs(client, "备份"))[0] == legacy_fts_library["test://db"]
        assert fts_version(home) == FTS_VERSION


async def test_search_succeeds_when_lazy_fts_migration_outlasts_search_deadline(
    library: Library, home: Path, mcp_client
) -> None:
    # ~600 chunks: their rebuild takes several times the 50 ms deadline set below, while
    # a search of the rebuilt index takes about 1 ms.
    for i in range(50):
        sections = "\n\n".join(
            f"## Part {j}\n\n" + " ".join(f"note{i}x{j}x{k} getUserById" for k in range(60))
            for j in range(12)
        )
        library.writing.add_document(
            f"Doc {i}", f"# Doc {i}\n\n{sections}\n", f"t://{i}", by_agent=False
        )
    library.close()
    conn = apsw.Connection(str(home / "kb.db"))
    try:
        conn.execute("UPDATE meta SET value = '0|old' WHERE key = 'fts_version'")
    finally:
        conn.close()
    (home / "config.toml").write_text("search_timeout_ms = 50\n", encoding="utf-8")

    async with mcp_client() as client:
        for _ in range(2):  # a retry is not the way out either
            result = await client.call_tool("search", {"query": "note7x3x5"}, raise_on_error=False)
            if not result.is_error:
                break
    assert not result.is_error, text_of(result)
    assert fts_version(home) == FTS_VERSION


# --- audit ------------------------------------------------------------------------------------


async def test_audit_log_has_one_line_per_call_without_arguments_or_text(
    mcp_client, home: Path
) -> None:
    async with mcp_client(allow_agent_writes=True) as client:
        await add(client, "Pelican survey", "Pelicans cross the estuary each autumn.\n", "t://p")
        await ok(client, "search", query="pelican migration routes")
        await ok(client, "grep", pattern="estuary")
        await fail(client, "read", doc="a-nosuchdocument0")
        await ok(client, "list")
    raw = (home / "audit.log").read_text(encoding="utf-8")
    records = [json.loads(line) for line in raw.splitlines()]
    assert [(r["tool"], r["outcome"]) for r in records] == [
        ("add_document", "ok"),
        ("search", "ok"),
        ("grep", "ok"),
        ("read", "error:not_found"),
        ("list", "ok"),
    ]
    for record in records:
        assert set(record) == {"ts", "tool", "duration_ms", "outcome"}
        assert datetime.fromisoformat(record["ts"]).tzinfo is not None
        assert record["duration_ms"] >= 0
    for fragment in ("pelican", "estuary", "autumn", "migration", "nosuchdocument", "t://p"):
        assert fragment not in raw.lower()


async def test_audit_log_records_calls_rejected_by_argument_validation(
    mcp_client, home: Path
) -> None:
    async with mcp_client() as client:
        await fail(client, "search", query="anything", top_k=0)
    records = (home / "audit.log").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["tool"] for line in records] == ["search"]


# --- bad inputs -------------------------------------------------------------------------------


async def test_bad_inputs_are_clear_tool_errors_and_server_keeps_working(search_corpus) -> None:
    client, ids = search_corpus
    doc, total = ids["test://users"], len(USER_SERVICE.split("\n"))

    message = await fail(client, "search", query="getUserById", top_k=0)
    assert "top_k" in message
    assert "greater than or equal to 1" in message

    message = await fail(client, "search", query="getUserById", mode="bogus")
    assert "mode" in message
    assert all(f"'{mode}'" in message for mode in ("auto", "keyword", "vector", "hybrid"))

    message = await fail(client, "read", doc="a-nosuchdocument0")
    assert message.startswith("[not_found]")
    assert "'a-nosuchdocument0'" in message

    message = await fail(client, "read", doc=doc, start_line=total + 5, end_line=total + 9)
    assert message.startswith("[invalid_input]")
    assert f"has {total} lines; line {total + 5} is past its end" in message

    assert (await search_docs(client, "getUserById"))[0] == doc
    read = await ok(client, "read", doc=doc, start_line=3, end_line=4)
    assert read["text"] == "```python\ndef getUserById(user_id):"


async def test_read_start_line_past_end_without_end_line_says_past_end(search_corpus) -> None:
    client, ids = search_corpus
    total = len(USER_SERVICE.split("\n"))
    message = await fail(client, "read", doc=ids["test://users"], start_line=total + 5)
    assert f"has {total} lines; line {total + 5} is past its end" in message


async def test_error_messages_are_redacted_like_results(mcp_client) -> None:
    """A 'not found' message quotes what was asked for; a secret in it must not echo back."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    async with mcp_client() as client:
        message = await fail(client, "read", doc=f"notes/{token}.md")
    assert "not found" in message or "no document" in message
    assert token not in message and "[REDACTED:github_token]" in message
