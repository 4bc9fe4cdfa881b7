"""The prelude's fast path answers ``tools/list`` and ``tools/call`` before FastMCP is ready
(issue 10, "Start-up"), and must be indistinguishable from FastMCP on the wire.

The fast path runs here over real pipes on a real library; its "FastMCP" is a real
``StackLoader`` whose build waits until the test lets it finish, so a test decides when
the handover may happen. Its bytes are compared with the real FastMCP server's
(``snapshot.real_reply_lines``) for the same requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from raw_server import STARTUP_TIMEOUT_S, RawServer, tool_call

from kb_mcp.library import Library
from kb_mcp.server import prelude, snapshot
from kb_mcp.server.audit import AUDIT_FILE
from kb_mcp.server.calls import LibraryHolder
from kb_mcp.server.fastpath import FastPath
from kb_mcp.server.snapshot import valid_arguments
from kb_mcp.settings import Settings

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fastpath-test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: dict[str, Any] | bytes) -> bytes:
    return message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"


# A grep that runs until its time limit (1.5 s in these tests): RE2 steps this pattern
# byte by byte (its DFA outgrows the memory cap), 3.3 s a megabyte here, and the text is
# 1.9 MB (add_document's limit is 2 MB), so a machine several times faster still reaches
# the limit (tests/test_grep.py).
SLOW_GREP = {"pattern": r"(?i)\p{L}{200}z", "regex": True}
LETTERS = ("ab" * 5_000 + "\n") * 190


def library_home(root: Path) -> Settings:
    settings = Settings(home=root / "home", embedder="none", sync_interval_s=0)
    body = "\n\n".join(f"## Part {i}\n\n" + "restore steps here. " * 60 for i in range(160))
    with Library(settings) as library:
        library.writing.add_document(
            "Backups", "# Backups\n\nRestore with `kb restore`.\n", "t://b", by_agent=False
        )
        library.writing.add_document("Big", f"# Big\n\n{body}\n", "t://big", by_agent=False)
        library.writing.add_document("Many a", "a" * 5000 + "b\n", "t://aaaa", by_agent=False)
        library.writing.add_document("Letters", LETTERS, "t://letters", by_agent=False)
    return settings


class Session:
    """A fast path over pipes: send lines, collect reply lines, let FastMCP 'load'."""

    def __init__(self, settings: Settings) -> None:
        self.holder = LibraryHolder(settings)
        self.ready = threading.Event()
        self.stack = prelude.StackLoader(lambda: self.ready.wait(60)).start()
        self.stdin_r, self.stdin_w = os.pipe()
        self.wire_r, self.wire_w = os.pipe()
        self.replies: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        os.write(self.stdin_w, line(INITIALIZE))
        early = prelude.answer_initialize(self.stdin_r, self.wire_w, settings)
        tools = snapshot.load(settings)
        self.path = FastPath(self.holder, tools, self.stdin_r, self.wire_w, self.stack, early)
        self.result: prelude.EarlyStart | None = None
        self._runner = threading.Thread(target=self._run, daemon=True)
        self._runner.start()

    def _run(self) -> None:
        self.result = self.path.run()

    def _read(self) -> None:
        with os.fdopen(self.wire_r, "rb") as wire:
            for got in wire:
                self.replies.append(got.rstrip(b"\n"))

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        os.write(self.stdin_w, b"".join(line(m) for m in messages))

    def wait_replies(self, count: int, timeout_s: float = 30) -> list[bytes]:
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.05)):
            if len(self.replies) >= count:
                break
            deadline.wait(0.05)
        assert len(self.replies) >= count, self.replies
        return self.replies

    def by_id(self) -> dict[Any, bytes]:
        return {json.loads(r)["id"]: r for r in self.replies}

    def finish(self, timeout_s: float = 30) -> prelude.EarlyStart | None:
        """Close stdin (or not, if already closed) and wait for the fast path to end."""
        with contextlib.suppress(OSError):
            os.close(self.stdin_w)
        self._runner.join(timeout_s)
        assert not self._runner.is_alive(), "the fast path did not end"
        self.ready.set()
        self.holder.close()
        os.close(self.wire_w)
        self._reader.join(5)
        os.close(self.stdin_r)
        return self.result


CALLS = [
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    tool_call(3, "search", query="restore backups"),
    tool_call(4, "search", query="restore", mode="keyword", top_k=2, legs=["keyword"]),
    tool_call(5, "grep", pattern="kb restore"),
    tool_call(6, "read", doc="t://b"),
    tool_call(7, "list"),
    tool_call(8, "read", doc="no-such-document"),  # a KbError: not_found
    tool_call(9, "search", query="x", source="no-such-source"),
    tool_call(10, "add_document", title="T", content="text", source_uri="t://x"),  # refused
]


@pytest.mark.parametrize("changed", [False, True])
def test_fastpath_answers_are_fastmcps_byte_for_byte(tmp_path: Path, changed: bool) -> None:
    """Issue 10 start-up: tools/list, each tool's result and each error shape are the
    bytes FastMCP sends, under default and changed settings (schema defaults)."""
    settings = library_home(tmp_path)
    if changed:
        settings = replace(settings, search_top_k=3, grep_max_matches=7, max_title_chars=90)
    real = {json.loads(r)["id"]: r for r in snapshot.real_reply_lines(settings, CALLS)}
    session = Session(settings)
    session.send(INITIALIZED, *CALLS)
    session.wait_replies(1 + len(CALLS))
    assert session.finish() is None  # nothing was left for FastMCP
    fast = session.by_id()
    for request in CALLS:
        assert fast[request["id"]] == real[request["id"]], request


def test_fastpath_leaves_everything_else_to_fastmcp_in_order(tmp_path: Path) -> None:
    """Issue 10 start-up: prompts, ping, a malformed line, arguments FastMCP must judge and
    a call before notifications/initialized are replayed to FastMCP, unanswered here."""
    settings = library_home(tmp_path)
    session = Session(settings)
    early_call = tool_call(1, "list")  # before notifications/initialized
    left = [
        line(early_call),
        line(INITIALIZED),
        line({"jsonrpc": "2.0", "id": 3, "method": "prompts/list"}),
        b"not json\n",
        line({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        line(tool_call(5, "search", query="x", top_k="5")),  # pydantic may coerce: FastMCP's
        line(tool_call(6, "search", query="x", colour="red")),
        line(tool_call(7, "no_such_tool")),
    ]
    session.send(*left)
    session.send(tool_call(8, "grep", pattern="restore"))  # still answered by the fast path
    session.wait_replies(2)
    session.ready.set()  # FastMCP has loaded: the fast path hands over
    session._runner.join(30)
    result = session.result
    session.finish()
    assert result is not None and result.answered and result.answered_id == "init"
    assert result.pending == line(INITIALIZE) + b"".join(left)
    assert [json.loads(r)["id"] for r in session.replies] == ["init", 8]


def test_fastpath_cancelled_call_is_never_answered_and_stdin_eof_waits_for_calls(
    tmp_path: Path,
) -> None:
    """Issue 10 start-up: a cancelled call's reply is dropped (as the SDK drops it); EOF
    mid-call ends the session after the call in flight has answered; what was kept for
    FastMCP is dropped, as FastMCP drops what it has not answered at EOF."""
    settings = replace(library_home(tmp_path), grep_timeout_ms=1500)
    session = Session(settings)
    slow = SLOW_GREP  # runs until the time limit
    session.send(INITIALIZED, tool_call(2, "grep", **slow), tool_call(3, "grep", **slow))
    session.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    )
    session.send(tool_call(4, "list"))
    session.send({"jsonrpc": "2.0", "id": 5, "method": "prompts/list"})  # kept for FastMCP
    session.wait_replies(2)  # init and list, while both greps still run
    assert session.finish() is None  # EOF: waited for call 3, nothing for FastMCP
    assert sorted(session.by_id(), key=str) == [3, 4, "init"]
    audit = (settings.home / AUDIT_FILE).read_text().splitlines()
    assert sorted(json.loads(a)["tool"] for a in audit) == ["grep", "grep", "list"]


def test_fastpath_hands_over_after_the_call_in_flight(tmp_path: Path) -> None:
    """Issue 10 start-up: FastMCP ready while a call runs: no new call starts here, the
    one in flight answers, then everything after it is FastMCP's, in order."""
    settings = replace(library_home(tmp_path), grep_timeout_ms=1500)
    session = Session(settings)
    session.send(INITIALIZED, tool_call(2, "grep", **SLOW_GREP))
    session.send(tool_call(5, "list"))
    session.wait_replies(2)  # list answered: the grep, read before it, is running
    session.ready.set()  # FastMCP has loaded
    session.stack.result()
    later = [line(tool_call(3, "list")), line({"jsonrpc": "2.0", "id": 4, "method": "ping"})]
    session.send(*later)
    session.wait_replies(3)
    session._runner.join(30)
    result = session.result
    assert result is not None
    assert result.pending.startswith(line(INITIALIZE) + line(INITIALIZED))
    assert result.pending.endswith(b"".join(later))
    assert [json.loads(r)["id"] for r in session.replies] == ["init", 5, 2]
    session.finish()


def test_fastpath_argument_check_is_conservative(tmp_path: Path) -> None:
    """Issue 10 start-up: only plainly valid arguments are run here."""
    settings = Settings(home=tmp_path, embedder="none")
    tools = {t["name"]: t["inputSchema"] for t in snapshot.load(settings)["tools"]}
    search = tools["search"]
    assert valid_arguments({"query": "q", "top_k": 3, "legs": ["graph"]}, search)
    assert valid_arguments({"query": "q", "source": None}, search)
    for bad in (
        {},
        {"query": ""},
        {"query": "q", "top_k": 0},
        {"query": "q", "top_k": True},
        {"query": "q", "top_k": 2.0},
        {"query": "q", "mode": "fuzzy"},
        {"query": "q", "legs": []},
        {"query": "q", "legs": ["keyword", "x"]},
        {"query": 5},
    ):
        assert not valid_arguments(bad, search), bad


def test_serve_first_search_then_handover_answers_every_request_once(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Issue 10 start-up, end to end: over the real ``kb-mcp serve``, calls answered early,
    a prompts/list that waits for FastMCP, calls after the handover: each answered once."""
    settings = library_home(tmp_path)
    server = RawServer(settings.home, tmp_path / "stderr.log", child_env)
    try:
        server.handshake()
        server.send(line(tool_call(1, "search", query="restore")))
        server.send(line({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}))
        server.send(line(tool_call(3, "grep", **SLOW_GREP)))
        # prompts/list waits for FastMCP's import: over 20 s at load 15 on 2 cores.
        replies = [server.reply(STARTUP_TIMEOUT_S) for _ in range(3)]
        server.send(line(tool_call(4, "read", doc="t://b")))
        replies.append(server.reply())
        assert sorted(r["id"] for r in replies) == [1, 2, 3, 4]
        assert all("result" in r for r in replies), replies
        assert server.no_reply(0.5)
        assert server.stray_output() == []
    finally:
        server.close()


def test_fastpath_json_is_pydantics_json_floats_included() -> None:
    """Issue 10 start-up: the fast path writes JSON as FastMCP's serializer (pydantic-core)
    does: floats of every magnitude, escapes, non-ASCII text."""
    import random

    import pydantic_core

    rng = random.Random(10)
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(20_000)]
    floats += [0.0, -0.0, 1e16, 1e15, 5e-324, 1e-5, 1e-4, 2.156e-06, 3.0, float(10**17)]
    value = {"f": floats, "s": 'é "q" \\ \u2028 \x00 \x1f 中文', "n": None, "b": [True, 7]}
    assert snapshot.encode(value) == pydantic_core.to_json(value)
