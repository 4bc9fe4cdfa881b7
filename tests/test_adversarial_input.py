"""Bad input, property-based: every tool's arguments and raw JSON-RPC lines (issue 11).

One real ``kb-mcp serve`` per module (``tests/raw_server.py``) takes hypothesis-made
arguments for every tool, built from the tool's own JSON schema as the server lists it
(so a new tool or argument is fuzzed without a new strategy), and hypothesis-made raw
lines. For every case: a result or a clear ``[code]`` error (never ``[internal]``) within
``CALL_BOUND_S``, the server alive, nothing but JSON-RPC on stdout, and a rejected
``add_document`` leaves every table of ``kb.db`` as it was (digest before and after).

The normal run tries ``CI_CASES`` per tool; ``pytest -m adversarial`` tries
``LONG_CASES`` (the issue's ≥ 10,000). A new tool is one more entry of ``TOOLS``;
``test_fuzz_covers_every_tool_the_server_lists`` fails until it is. The entity graph is
read by ``kb-mcp entities`` (``library.entities.find``), not by a tool: its lookup is fuzzed
in-process. Document relations get their own case: hostile frontmatter and prose
through ``add_document`` (references to the folder's documents, to itself, cycles, a
10k-long list, SQL and regex metacharacters): every call answers in time, no agent
document ever changes one of the folder's, cycles end, and search and read still answer.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from library_checks import integrity_problems, opened, relation_problems, table_digest
from raw_server import STARTUP_TIMEOUT_S, RawServer

from kb_mcp import limits
from kb_mcp.chunk.sections import HEADING_PATH_CHARS
from kb_mcp.errors import InvalidInput, KbError
from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings

TOOLS = ("search", "grep", "read", "list", "add_document")
WRITES = frozenset({"add_document"})
CI_CASES = 40
LONG_CASES = 10_000
PROFILES = [
    pytest.param(CI_CASES, id="ci"),
    pytest.param(LONG_CASES, id="long", marks=pytest.mark.adversarial),
]
# Each relations case is an add_document, a search and the table checks (~0.1 s).
CI_RELATION_CASES = 15
LONG_RELATION_CASES = 1_000
RELATION_PROFILES = [
    pytest.param(CI_RELATION_CASES, id="ci"),
    pytest.param(LONG_RELATION_CASES, id="long", marks=pytest.mark.adversarial),
]
# One call of any tool on this small library answers in milliseconds; the bound is for a
# loaded 2-core machine and still catches a hang (the grep time limit is 2 s).
CALL_BOUND_S = 15.0
ERROR_SHAPE = re.compile(
    r"\A\[(invalid_input|not_found|refused|unavailable|conflict|unreadable)\] "
)

# Strings that have broken parsers, regex engines, FTS5 queries, cites and paths.
NASTY = [
    "",
    " ",
    "\x00",
    "\ud800",
    "a\u202eb",
    "NOT OR AND NEAR(",
    '"',
    "*",
    "(a+)+$",
    "(?:a|a)*b",
    "[",
    "\\",
    "a-1#L1-L99999999",
    "#L0-L0",
    "../../etc/passwd",
    "/etc/passwd",
    "file:///etc/shadow",
    "AKIA" + "2345672345672345",
    "x" * 5000,
    "索引 备份 データ",
    "getUserById",
    "{{7*7}}",
    "%s%n",
    "agent",
    "upload",
    "notes",
]
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
TEXT = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=60),
    st.text(st.characters(codec="utf-8"), max_size=30),
    st.from_regex(r"[a-z]{2,8}-[0-9a-f]{4,12}(#L[0-9]{1,3}-L[0-9]{1,3})?", fullmatch=True),
)


def value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for one argument: mostly of its type (edges included), sometimes anything."""
    if "anyOf" in schema:
        typed = st.one_of([value_for(option) for option in schema["anyOf"]])
    elif "enum" in schema:
        typed = st.sampled_from(schema["enum"]) | TEXT
    else:
        typed = _typed(schema)
    return st.one_of(typed, typed, typed, typed, typed, JUNK)


def _typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum", -(2**31)), schema.get("maximum", 2**31)
        edges = [low - 1, low, high, high + 1, 2**63, -(2**63), 2**64, 0, -1]
        return st.sampled_from(edges) | st.integers(low, high) | st.integers()
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            _typed(schema.get("items", {})) if schema.get("items") else JUNK, max_size=40
        )
    if kind == "string":
        return TEXT
    return JUNK


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Argument objects: the schema's shape with fuzzed values, or any object at all."""
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    shaped = st.fixed_dictionaries(
        {name: value_for(p) for name, p in properties.items() if name in required},
        optional={name: value_for(p) for name, p in properties.items() if name not in required},
    )
    loose = st.dictionaries(st.sampled_from([*properties, "extra", "__proto__"]), JUNK, max_size=4)
    return st.one_of(shaped, shaped, shaped, loose)


class Fuzzed:
    """The module's server, its home, the tool schemas it lists, and what was tried."""

    def __init__(self, server: RawServer, home: Path, schemas: dict[str, dict]) -> None:
        self.server = server
        self.home = home
        self.schemas = schemas
        self.outcomes: dict[str, Counter[str]] = {}
        self.slowest: dict[str, float] = {}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str]) -> Iterator[Fuzzed]:
    """A small real library (two agent documents, a folder) behind one server."""
    root = tmp_path_factory.mktemp("fuzz")
    home, folder = root / "home", root / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text(
        "# Guide\n\nThe backup runs nightly.\n\n## Restore\n\nUse the restore script.\n"
    )
    (folder / "code.py").write_text("def getUserById(user_id):\n    return user_id\n")
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        library.writing.add_document(
            "Notes", "# Notes\n\nindex 索引 backup\n", "t://notes", by_agent=False
        )
    synced = _synced_at(home)
    time.sleep(1.0)  # ``synced_at`` counts seconds: the server's stamp is then a later one
    # The server's own sync stamps ``sources`` (state, time): its start-up sync is waited
    # for below and the periodic one is off, so the digest around a refused write sees
    # only what the call itself did (the marker run once caught the start-up sync's stamp).
    server = RawServer(home, root / "stderr.log", {**child_env, "KB_MCP_SYNC_INTERVAL_S": "0"})
    server.handshake()
    # The first call waits for the library to open after the handshake: seconds under
    # load 15, so it gets the start-up timeout.
    listed = server.request("tools/list", {}, STARTUP_TIMEOUT_S)["result"]["tools"]
    _wait_for_sync_after(home, synced)
    # One search first: the library's one-time lazy work (the FTS check, the first
    # statements) is not a fuzzed call's, and took past CALL_BOUND_S at load 15.
    warm = {"name": "search", "arguments": {"query": "backup"}}
    server.request("tools/call", warm, STARTUP_TIMEOUT_S)
    yield Fuzzed(server, home, {t["name"]: t["inputSchema"] for t in listed})
    server.close()


def _synced_at(home: Path) -> list[tuple[Any, ...]]:
    """State and time of each folder source's last sync (the other sources are not synced)."""
    with opened(home / DB_FILE) as conn:
        query = "SELECT sync_state, synced_at FROM sources WHERE kind = 'folder' ORDER BY id"
        return [tuple(r) for r in conn.execute(query)]


def _wait_for_sync_after(home: Path, before: list[tuple[Any, ...]]) -> None:
    """Until the server's start-up sync has stamped every folder source and is idle."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        now = _synced_at(home)
        if all(a[1] != b[1] and b[0] == "idle" for a, b in zip(before, now, strict=True)):
            return
        time.sleep(0.1)
    raise AssertionError(f"the server's start-up sync did not finish: {_synced_at(home)}")


def _wait_for_links(home: Path) -> None:
    """Until the server's linking thread has linked every document an earlier accepted
    write queued (issue 22: it empties ``link_queue`` after the call returned), so the
    digest around the next write sees only what that call did."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        with opened(home / DB_FILE) as conn:
            [(queued,)] = conn.execute("SELECT count(*) FROM link_queue").fetchall()
        if not queued:
            return
        time.sleep(0.05)
    raise AssertionError("the server's linking thread did not empty link_queue")


def test_fuzz_covers_every_tool_the_server_lists(fuzzed: Fuzzed) -> None:
    """issue 11: a tool added to the server is fuzzed only once it is a row of TOOLS."""
    assert sorted(fuzzed.schemas) == sorted(TOOLS)


def check_call(
    fuzzed: Fuzzed,
    tool: str,
    arguments: Any,
    *,
    digest: bool = True,
    bound_s: float = CALL_BOUND_S,
) -> str:
    """One call and every promise about it; the outcome's name. ``digest`` False skips
    the whole-library digest around a write (its caller checks what it cares about)."""
    server = fuzzed.server
    if tool in WRITES and digest:
        _wait_for_links(fuzzed.home)
    before = table_digest(fuzzed.home / DB_FILE) if tool in WRITES and digest else None
    started = time.monotonic()
    reply = server.request("tools/call", {"name": tool, "arguments": arguments}, bound_s)
    elapsed = time.monotonic() - started
    fuzzed.slowest[tool] = max(fuzzed.slowest.get(tool, 0.0), elapsed)
    assert elapsed < bound_s
    assert server.alive(), "the server died"
    if "error" in reply:  # a protocol-level error: fine if it says what is wrong
        assert isinstance(reply["error"].get("code"), int) and reply["error"].get("message")
        outcome = "protocol error"
    else:
        result = reply["result"]
        text = result["content"][0]["text"] if result.get("content") else ""
        if result.get("isError"):
            assert ERROR_SHAPE.match(text), text[:300]
            outcome = text[1 : text.index("]")]
        else:
            outcome = "result"
    if before is not None and outcome != "result":
        after = table_digest(fuzzed.home / DB_FILE)
        changed = sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
        assert not changed, f"a rejected write ({outcome}) changed kb.db's tables {changed}"
    return outcome


@pytest.mark.parametrize("cases", PROFILES)
@pytest.mark.parametrize("tool", TOOLS)
def test_fuzz_tool_arguments_answer_clearly_in_time_and_change_nothing_when_refused(
    fuzzed: Fuzzed, tool: str, cases: int, figures
) -> None:
    """issue 11 (bad input): hypothesis over every tool's arguments, against stdio."""
    outcomes = fuzzed.outcomes.setdefault(tool, Counter())

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(arguments=arguments_for(fuzzed.schemas[tool]))
    def one(arguments: dict[str, Any]) -> None:
        outcomes[check_call(fuzzed, tool, arguments)] += 1

    one()
    assert fuzzed.server.stray_output() == []
    tried = sum(outcomes.values())
    shown = ", ".join(f"{name} {n}" for name, n in outcomes.most_common())
    figures("bad input", f"{tool}: {tried} calls ({shown}); slowest {fuzzed.slowest[tool]:.2f} s")


def raw_lines() -> st.SearchStrategy[bytes]:
    """Lines a buggy client might send: bytes, near-JSON-RPC objects, cut-off JSON."""
    methods = st.sampled_from(
        ["tools/call", "tools/list", "ping", "initialize", "resources/list", "prompts/get",
         "notifications/cancelled", "notifications/initialized", "logging/setLevel"]
    ) | st.text(max_size=12)  # fmt: skip
    message = st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0", 2, None, ""]),
            "id": st.one_of(st.integers(), st.text(max_size=8), st.none(), JUNK),
            "method": methods,
            "params": st.one_of(
                JUNK,
                st.fixed_dictionaries(
                    {"name": st.sampled_from([*TOOLS, "nope"]), "arguments": JUNK}
                ),
            ),
        },
    )
    encoded = message.map(lambda m: json.dumps(m).encode())
    cut = st.tuples(encoded, st.integers(0, 200)).map(lambda pair: pair[0][: pair[1]])
    raw = st.binary(max_size=200)
    return st.one_of(encoded, encoded, cut, raw).map(lambda b: b.replace(b"\n", b" "))


@pytest.mark.parametrize("cases", PROFILES)
def test_fuzz_raw_json_rpc_lines_never_hang_or_kill_the_server(
    fuzzed: Fuzzed, cases: int, figures
) -> None:
    """issue 11 (bad input): after any line, the next ping is answered within the bound."""
    sent = Counter()

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(line=raw_lines())
    def one(line: bytes) -> None:
        fuzzed.server.send(line + b"\n")
        reply = fuzzed.server.request("ping", {}, CALL_BOUND_S)
        assert reply.get("result") == {}, reply
        assert fuzzed.server.alive()
        sent["lines"] += 1

    one()
    assert fuzzed.server.stray_output() == []
    assert integrity_problems(fuzzed.home / DB_FILE) == []
    figures("bad input", f"raw JSON-RPC lines: {sent['lines']} lines, each followed by a ping")


# --- document relations from hostile documents ---------------------------------------------

RELATION_KEYS = ["supersedes", "replaces", "corrects", "withdraws", "updates", "superseded_by"]
# References an agent's document might make: the folder's files by name, path, title and
# id, the module's other documents, ids of the relation documents themselves (so cycles
# A → B → A and self-references occur), and strings that break SQL, LIKE and regexes.
REFERENCES = st.one_of(
    st.sampled_from(
        ["guide.md", "code.py", "Guide", "the Guide", "Restore", "Notes", "notes/guide.md",
         "'; DROP TABLE documents; --", "%", "_", "(a+)+$", ".*", "[", "\\", "ADR-0001' OR '1'='1",
         "SELF", "this document", "last week's minutes", "our post of 1 December", ""]
    ),
    st.integers(0, 11).map(lambda n: f"ADR-{n:04}"),
    st.integers(0, 11).map(lambda n: f"t://rel/{n}"),
    TEXT,
)  # fmt: skip
PROSE = st.sampled_from(
    ["WITHDRAWN: {ref}", "This notice withdraws {ref}.", "Errata for {ref}",
     "Correction to {ref}", "Supersedes {ref}", "Status: Superseded by {ref}", "Update to {ref}",
     "We are withdrawing {ref}.", "Addendum to {ref}", "{ref} was withdrawn."]
)  # fmt: skip


# A 10k-long reference list (the folder's names among them), tried once up front in every
# run and now and then by hypothesis: ~1 s of ingest each, so not in every case. Such a
# document is ~130 KB on one line; ingest runs at ~0.1-0.15 MB/s here (README's perf
# table), and the long run at load 16 once took over 15 s for one: its bound is wider.
LIST_BOUND_S = 60.0
LONG_LIST = [f"ADR-{i:05}" if i % 100 else "guide.md" for i in range(10_000)]
LONG_LIST_DOCUMENT = {
    "title": "ADR-0000 long list",
    "content": "---\n"
    + json.dumps({"withdraws": LONG_LIST, "supersedes": LONG_LIST[::-1]})
    + "\n---\n# ADR-0000\n\nWITHDRAWN: the Guide\n\nbackup and restore.\n",
    "source_uri": "t://rel/0",
}
# A cycle A → B → A (both agent documents: allowed to resolve) and a self-withdrawal.
CYCLE = [
    {"title": f"ADR-{a:04} cycle", "content": f"---\nsupersedes: ADR-{b:04}\ncorrects: ADR-{b:04}"
     f"\n---\n# ADR-{a:04}\n\nbackup and restore {a}.\n", "source_uri": f"t://rel/{a}"}
    for a, b in ((1, 2), (2, 1))
] + [{"title": "ADR-0003 self", "content": "---\nwithdraws: ADR-0003\n---\n# ADR-0003\n\n"
      "This notice was withdrawn.\n", "source_uri": "t://rel/3"}]  # fmt: skip


@st.composite
def relation_documents(draw: st.DrawFn) -> dict[str, Any]:
    """An add_document whose frontmatter and opening prose name other documents."""
    n = draw(st.integers(0, 11))
    front = {}
    for key in draw(st.lists(st.sampled_from(RELATION_KEYS), max_size=4, unique=True)):
        if draw(st.integers(0, 400)) == 0:
            front[key] = LONG_LIST
        else:
            front[key] = draw(st.lists(REFERENCES, min_size=1, max_size=5))
    if draw(st.booleans()):
        front["status"] = draw(st.sampled_from(["withdrawn", "superseded", "current", "draft"]))
    lines = [draw(PROSE).format(ref=draw(REFERENCES)) for _ in range(draw(st.integers(0, 3)))]
    header = "---\n" + json.dumps(front) + "\n---\n" if front else ""  # JSON is YAML
    body = "\n\n".join(lines)
    return {
        "title": f"ADR-{n:04} {draw(st.sampled_from(['cache', 'Guide', 'backup', 'Notes']))}",
        "content": f"{header}# ADR-{n:04}\n\n{body}\n\nbackup and restore {n}.\n",
        "source_uri": f"t://rel/{n}",
    }


def folder_documents(home: Path) -> dict[str, tuple]:
    """The folder's documents as stored (key → title, text, status): relations must
    never change them."""
    with opened(home / DB_FILE) as conn:
        return {
            r[0]: tuple(r[1:])
            for r in conn.execute(
                "SELECT d.doc_key, d.title, d.text, d.status FROM documents d "
                "JOIN locations l ON l.document_id = d.id JOIN sources s ON s.id = l.source_id "
                "WHERE s.kind = 'folder'"
            )
        }


def two_document_cycles(home: Path) -> int:
    """Pairs of resolved relations A → B and B → A."""
    with opened(home / DB_FILE) as conn:
        return conn.execute(
            "SELECT count(*) FROM doc_relations a JOIN doc_relations b ON a.from_id = b.to_id "
            "AND a.to_id = b.from_id AND a.state = 'resolved' AND b.state = 'resolved' "
            "AND a.id < b.id"
        ).fetchone()[0]


@pytest.mark.parametrize("cases", RELATION_PROFILES)
def test_fuzz_document_relations_never_let_an_agent_change_the_users_documents(
    fuzzed: Fuzzed, cases: int, figures
) -> None:
    """issue 11 (bad input: document relations). Each hostile add_document answers in
    time; no resolved relation lets an agent's document change a folder document (the
    rule of ``relations/relink.py``); every derived-row check holds, so cycles and
    self-references were stored and matched and ended; search and read still answer."""
    server, home = fuzzed.server, fuzzed.home
    before = folder_documents(home)
    outcomes: Counter[str] = Counter(
        check_call(fuzzed, "add_document", document, digest=False, bound_s=LIST_BOUND_S)
        for document in [LONG_LIST_DOCUMENT, *CYCLE]
    )
    _wait_for_links(home)  # relations are recorded by the server's linking thread
    assert relation_problems(home / DB_FILE) == []
    assert two_document_cycles(home) >= 1
    reply = server.tool("search", CALL_BOUND_S, query="ADR-0001 cycle backup restore")
    assert len(reply["result"]["structuredContent"]["results"]) >= 2, reply

    @settings(
        max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(document=relation_documents())
    def one(document: dict[str, Any]) -> None:
        outcome = check_call(fuzzed, "add_document", document, digest=False, bound_s=LIST_BOUND_S)
        outcomes[outcome] += 1
        reply = server.tool("search", CALL_BOUND_S, query=f"{document['title']} backup restore")
        assert not reply["result"].get("isError"), reply
        _wait_for_links(home)
        assert relation_problems(home / DB_FILE) == []

    one()
    assert integrity_problems(home / DB_FILE) == []
    assert folder_documents(home) == before
    for doc in before:
        reply = server.tool("read", CALL_BOUND_S, doc=doc)
        assert not reply["result"].get("isError"), reply
    with opened(home / DB_FILE) as conn:
        states = Counter(dict(conn.execute("SELECT state, count(*) FROM doc_relations GROUP BY 1")))
    cycles = two_document_cycles(home)
    assert server.stray_output() == []
    figures(
        "bad input",
        f"document relations: {sum(outcomes.values())} hostile add_document calls "
        f"({dict(outcomes)}); relation rows {dict(states)}, {cycles} two-document cycles; "
        f"0 folder documents changed; "
        f"slowest add {fuzzed.slowest['add_document']:.2f} s",
    )


def test_relations_an_agent_document_cannot_change_a_folder_document(tmp_path: Path) -> None:
    """issue 11 (untrusted documents): an agent's notice that withdraws the user's guide
    by its file name and its title stays pending; the guide is neither demoted nor
    labelled withdrawn. The same notice in the user's folder does withdraw it."""
    home, folder = tmp_path / "home", tmp_path / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text("# Backup Guide\n\nThe backup runs nightly.\n")
    notice = "---\nwithdraws: guide.md\n---\n# Notice\n\nThis notice withdraws the Backup Guide.\n"
    with Library(Settings(home=home, embedder="none", allow_agent_writes=True)) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        library.writing.add_document("Notice", notice, "t://notice")
        rows = library.db.query("SELECT reference, state FROM doc_relations")
        [guide] = [
            h for h in library.lookup.search("backup guide nightly").hits if h.title != "Notice"
        ]
        assert sorted(rows) == [("guide.md", "pending"), ("the Backup Guide", "pending")]
        assert guide.relations == () and guide.adjustments == ()
        (folder / "notice.md").write_text(notice)
        library.folders.sync()
        resolved = library.db.query(
            "SELECT count(*) FROM doc_relations r JOIN documents d ON d.id = r.stated_by "
            "WHERE d.uri IS NULL AND r.state = 'resolved'"
        )
        assert resolved == [(2,)]


def test_entities_lookup_of_a_lone_surrogate_is_invalid_input(tmp_path: Path) -> None:
    """issue 11 (a defect the long entities fuzz found): a query holding half a UTF-16
    pair reached SQLite and raised UnicodeEncodeError; now it is InvalidInput."""
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.writing.add_document(
            "Guide", "# Guide\n\nThe `BlobStore` runs.\n", "t://g", by_agent=False
        )
        with pytest.raises(InvalidInput, match="half of a UTF-16 pair"):
            library.entities.find("Blob\ud800", 5)
        assert library.entities.find("BlobStore", 5)


LIMIT_SCHEMA = {"type": "integer", "minimum": limits.TOP_K.minimum, "maximum": limits.TOP_K.maximum}


def test_add_document_with_a_giant_heading_line_keeps_every_chunk_small(tmp_path: Path) -> None:
    """issue 11 (a defect the relations fuzz found): a 200 KB line over ``---`` is a
    setext heading, and its title was copied into the ``heading_path`` of each of the
    ~100 chunks under it (20k references: 23 s for one add_document). Now the path holds
    at most ``HEADING_PATH_CHARS`` of it, and the line's words are still found."""
    line = json.dumps({"supersedes": [f"ADR-{i:05}" for i in range(16_000)]}) + " zebrafinch"
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.writing.add_document(
            "Big", f"{line}\n---\n\nbody text.\n", "t://big", by_agent=False
        )
        [(chunks, longest)] = library.db.query(
            "SELECT count(*), max(length(json_extract(heading_path, '$[0]'))) FROM chunks"
        )
        assert chunks > 50
        assert longest == HEADING_PATH_CHARS
        assert library.lookup.search("zebrafinch", mode="keyword").hits


@pytest.mark.parametrize("cases", PROFILES)
def test_fuzz_entities_lookup_answers_clearly_in_time(fuzzed: Fuzzed, cases: int, figures) -> None:
    """issue 11 (bad input: the graph's lookup behind ``kb-mcp entities``): any query and
    limit give entities or a clear KbError within the bound, never another exception."""
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    with Library(Settings(home=fuzzed.home, embedder="none")) as library:

        @settings(
            max_examples=cases,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            query=st.none() | TEXT,
            limit=st.one_of(st.integers(1, 100), st.integers(1, 100), value_for(LIMIT_SCHEMA)),
        )
        def one(query: str | None, limit: Any) -> None:
            nonlocal slowest
            started = time.monotonic()
            try:
                found = library.entities.find(query, limit)
                outcomes["result" if found else "empty"] += 1
            except KbError as exc:
                assert exc.message and exc.code
                outcomes[exc.code] += 1
            slowest = max(slowest, time.monotonic() - started)
            assert time.monotonic() - started < CALL_BOUND_S

        one()
    shown = ", ".join(f"{name} {n}" for name, n in outcomes.most_common())
    figures("bad input", f"entities lookup: {sum(outcomes.values())} calls ({shown}); "
            f"slowest {slowest:.2f} s")  # fmt: skip
