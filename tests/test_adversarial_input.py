"""Bad input, property-based: every tool's arguments and raw JSON-RPC lines (issue 11).

One real ``kb-mcp serve`` per module (``tests/raw_server.py``) takes hypothesis-made
arguments for every tool, built from the tool's own JSON schema as the server lists it
(so a new tool or argument is fuzzed without a new strategy), and hypothesis-made raw
lines. For every case: a result or a clear ``[code]`` error (never ``[internal]``) within
``CALL_BOUND_S``, the server alive, nothing but JSON-RPC on stdout, and a rejected
``add_document`` leaves every table of ``kb.db`` as it was (digest before and after).

The normal run tries ``CI_CASES`` per tool; ``pytest -m adversarial`` tries
``LONG_CASES`` (the issue's ≥ 10,000). A new tool (the graph's ``entities``) is one more
entry of ``TOOLS``; ``test_fuzz_covers_every_tool_the_server_lists`` fails until it is.
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
from library_checks import integrity_problems, table_digest
from raw_server import RawServer

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
        library.add_folder(folder)
        library.sync()
        library.add_document("Notes", "# Notes\n\nindex 索引 backup\n", "t://notes", by_agent=False)
    server = RawServer(home, root / "stderr.log", child_env)
    server.handshake()
    listed = server.request("tools/list", {})["result"]["tools"]
    yield Fuzzed(server, home, {t["name"]: t["inputSchema"] for t in listed})
    server.close()


def test_fuzz_covers_every_tool_the_server_lists(fuzzed: Fuzzed) -> None:
    """issue 11: a tool added to the server is fuzzed only once it is a row of TOOLS."""
    assert sorted(fuzzed.schemas) == sorted(TOOLS)


def check_call(fuzzed: Fuzzed, tool: str, arguments: Any) -> str:
    """One call and every promise about it; the outcome's name."""
    server = fuzzed.server
    before = table_digest(fuzzed.home / DB_FILE) if tool in WRITES else None
    started = time.monotonic()
    reply = server.request("tools/call", {"name": tool, "arguments": arguments}, CALL_BOUND_S)
    elapsed = time.monotonic() - started
    fuzzed.slowest[tool] = max(fuzzed.slowest.get(tool, 0.0), elapsed)
    assert elapsed < CALL_BOUND_S
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
        assert table_digest(fuzzed.home / DB_FILE) == before, "a rejected write changed kb.db"
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
