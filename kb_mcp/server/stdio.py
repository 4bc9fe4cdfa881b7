"""Protected stdout for the stdio server.

The JSON-RPC stream must be the only thing on the wire. ``protect_stdout`` runs as the
first lines of ``kb-mcp serve``: it snapshots fd 1 (``os.dup``) and points fd 1 at
stderr. From then on a stray ``print``, a logging handler bound to stdout, or a C
extension writing straight to fd 1 lands on stderr, and JSON-RPC goes out only through
the snapshot, which ``serve_stdio`` hands to the MCP transport explicitly.
"""

from __future__ import annotations

import os
import sys
from io import TextIOWrapper

import anyio


def protect_stdout() -> int:
    """Snapshot fd 1 for the protocol, point fd 1 at stderr; return the snapshot fd."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    return wire


async def serve_stdio(mcp: object, wire_fd: int) -> None:
    """Run a FastMCP server over stdin and the protected stdout snapshot.

    FastMCP's ``run_stdio_async`` would claim whatever fd 1 is now (stderr), so the
    transport is opened here with the snapshot as its explicit stdout stream. This uses
    two FastMCP internals (``_lifespan_manager``, ``_mcp_server``); ``pyproject.toml``
    pins FastMCP's major version and ``tests/test_server_stdio.py`` covers the path.
    """
    from mcp.server.stdio import stdio_server

    wire = TextIOWrapper(os.fdopen(wire_fd, "wb", closefd=False), encoding="utf-8")
    low_level = mcp._mcp_server  # type: ignore[attr-defined]
    async with (
        mcp._lifespan_manager(),  # type: ignore[attr-defined]
        stdio_server(stdout=anyio.wrap_file(wire)) as (read_stream, write_stream),
    ):
        await low_level.run(read_stream, write_stream, low_level.create_initialization_options())
