"""The prelude answers ``initialize`` before the MCP stack is imported (issue 10, "Start-up").

Its answer must be the one the full server gives, for every protocol version a client may
ask for, and the full server must still run the handshake itself (its reply dropped
once), so nothing after it can tell the difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from test_server_protocol import INITIALIZE, RawServer, tool_call

from kb_mcp.server import prelude
from kb_mcp.settings import Settings

pytestmark = pytest.mark.anyio


def initialize_line(version: str, request_id: str | int = 1) -> bytes:
    message = {**INITIALIZE, "id": request_id}
    message["params"] = {**INITIALIZE["params"], "protocolVersion": version}
    return json.dumps(message).encode() + b"\n"


def server_settings(home: Path) -> Settings:
    return Settings(home=home, embedder="none", sync_interval_s=0)


async def full_server_reply(home: Path, line: bytes) -> dict:
    """The reply of the full server (no prelude) to ``line``, over real pipes."""
    from kb_mcp.server.stdio import serve_stdio
    from kb_mcp.server.tools import build_server

    mcp, holder = build_server(server_settings(home))
    stdin_r, stdin_w = os.pipe()
    wire_r, wire_w = os.pipe()
    os.write(stdin_w, line)
    os.close(stdin_w)
    try:
        await serve_stdio(mcp, wire_w, stdin_r)
    finally:
        holder.close()
        os.close(wire_w)
        os.close(stdin_r)
    with os.fdopen(wire_r, "rb") as wire:
        return json.loads(wire.readline())


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28", "1.0"])
async def test_prelude_initialize_result_is_the_full_servers(tmp_path: Path, version: str) -> None:
    """Issue 10 start-up: the early answer equals FastMCP's, whatever version is asked."""
    line = initialize_line(version)
    reply = await full_server_reply(tmp_path / "home", line)
    request_id, params = prelude.early_initialize(line.strip())
    assert reply == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": prelude.initialize_result(params, server_settings(tmp_path / "home")),
    }


def test_prelude_handshake_versions_are_the_sdks() -> None:
    """The versions the prelude negotiates are the SDK's (a test, so an upgrade cannot drift)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert prelude.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{}}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"x"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',
        b"not json",
        b"[]",
    ],
)
def test_prelude_leaves_anything_but_a_well_formed_initialize_to_the_full_server(
    line: bytes,
) -> None:
    """Issue 10 start-up: the prelude is a fast path only, never a second implementation."""
    assert prelude.early_initialize(line) is None


def test_serve_answers_initialize_once_and_then_runs_as_before(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Issue 10 start-up: one reply to initialize (the prelude's), then tools work."""
    server = RawServer(tmp_path / "home", tmp_path / "stderr.log", child_env)
    try:
        server.send(initialize_line("2025-06-18", "first"))
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        server.send((json.dumps(tool_call(2, "list")) + "\n").encode())
        first, second = server.reply(), server.reply()
        assert first["id"] == "first" and first["result"]["serverInfo"]["name"] == "kb-mcp"
        assert second["id"] == 2 and "result" in second, second
        assert server.no_reply(0.5)
    finally:
        server.close()


def test_serve_first_line_not_initialize_is_answered_by_the_full_server(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Issue 10 start-up: a request before initialize still gets the full server's error."""
    server = RawServer(tmp_path / "home", tmp_path / "stderr.log", child_env)
    try:
        reply = server.call(tool_call(7, "list"))
        assert reply["id"] == 7 and "not initialized" in reply["error"]["message"]
        server.handshake()
        assert "result" in server.call(tool_call(8, "list"))
    finally:
        server.close()


def test_cli_parser_and_prelude_import_no_mcp_stack_or_library() -> None:
    """Issue 10 start-up: what runs before the early answer imports neither FastMCP, the
    SDK nor the library (``bench questions`` once pulled the library into every command)."""
    code = (
        "import sys\n"
        "from kb_mcp.cli.main import build_parser\n"
        "from kb_mcp.server import prelude\n"
        "build_parser()\n"
        "heavy = [m for m in ('fastmcp', 'mcp', 'mcp_types', 'pydantic', 'kb_mcp.library')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


async def test_pending_bytes_reach_the_full_server_before_stdin(tmp_path: Path) -> None:
    """What the prelude read is replayed first; the full server's initialize reply is
    dropped, the next request answered."""
    from kb_mcp.server.stdio import serve_stdio
    from kb_mcp.server.tools import build_server

    mcp, holder = build_server(Settings(home=tmp_path / "home", embedder="none"))
    stdin_r, stdin_w = os.pipe()
    wire_r, wire_w = os.pipe()
    line = initialize_line("2025-06-18", 41)
    early = prelude.EarlyStart(line, answered=True, answered_id=41)
    os.write(stdin_w, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    os.write(stdin_w, (json.dumps({"jsonrpc": "2.0", "id": 42, "method": "ping"}) + "\n").encode())
    os.close(stdin_w)
    try:
        with anyio.fail_after(30):
            await serve_stdio(mcp, wire_w, stdin_r, early)
    finally:
        holder.close()
        os.close(wire_w)
        os.close(stdin_r)
    with os.fdopen(wire_r, "rb") as wire:
        replies = [json.loads(line) for line in wire]
    assert replies == [{"jsonrpc": "2.0", "id": 42, "result": {}}]
