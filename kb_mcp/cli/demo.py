"""``kb-mcp demo``: a bundled corpus, a real ``kb-mcp serve`` subprocess, a real MCP client.

It shows exactly what an agent sees: the same server, the same protocol, the same
tools. The library lives in a temporary folder and is removed afterwards (unless
``--keep``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.errors import Unavailable

if TYPE_CHECKING:
    from fastmcp import Client
    from fastmcp.client.client import CallToolResult

CORPUS = "kb_mcp.cli"
STEPS: tuple[tuple[str, dict], ...] = (
    ("list", {}),
    ("search", {"query": "how do I roll back a deploy", "top_k": 2}),
    ("search", {"query": "user id lookup", "top_k": 2}),
    ("search", {"query": "代码评审", "top_k": 2}),
    ("grep", {"pattern": "make \\w+", "regex": True, "max_matches": 5}),
)


def _build_library(home: Path) -> None:
    from kb_mcp.library import Library
    from kb_mcp.settings import load

    corpus = resources.files(CORPUS) / "demo_corpus"
    with Library(load(home=home, environ={})) as library:
        for item in sorted(corpus.iterdir(), key=lambda p: p.name):
            if not item.is_file():  # an installed wheel has __pycache__ for user_service.py
                continue
            text = item.read_text(encoding="utf-8")
            title = (
                text.splitlines()[0].lstrip("# ").strip()
                if item.name.endswith(".md")
                else item.name
            )
            library.writing.add_document(title, text, f"demo://{item.name}", by_agent=False)
        # As `kb-mcp add --wait` does: vectors are built before the session starts, so the
        # demo's searches are hybrid, as a user's are once their vectors are built.
        library.vectors.embed_pending()


def _show(tool: str, arguments: dict, text: str) -> None:
    print(f"\n── {tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
    print(text)


async def _session(home: Path) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "kb_mcp", "serve", "--home", str(home)],
        keep_alive=False,
    )
    async with Client(transport) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(t.name for t in tools))
        await _model_loaded(client)
        last_cite = None
        for tool, arguments in STEPS:
            result = await _call(client, tool, arguments)
            _show(tool, arguments, result.content[0].text)
            if tool == "search" and result.structured_content["results"]:
                last_cite = last_cite or result.structured_content["results"][0]["cite"]
        if last_cite:
            result = await _call(client, "read", {"doc": last_cite})
            _show("read", {"doc": last_cite}, result.content[0].text)


async def _model_loaded(client: Client, timeout_s: float = 60.0) -> None:
    """Wait (silently) until the server's embedding model has loaded: it starts loading
    once the session is up, and the demo shows hybrid search, as a user's searches are
    from a few seconds after the server starts."""
    import anyio

    from kb_mcp.library.lookup import MODEL_LOADING

    with anyio.move_on_after(timeout_s):
        while True:
            probe = await _call(client, "search", {"query": "deploy", "top_k": 1})
            if MODEL_LOADING not in probe.content[0].text:
                return
            await anyio.sleep(0.2)


async def _call(client: Client, tool: str, arguments: dict) -> CallToolResult:
    """The tool's result; a tool error ends the demo with the server's own words (its
    code and hint), not as an internal error of the demo."""
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    if result.is_error:
        raise Unavailable(f"the demo's {tool} call failed: {result.content[0].text}")
    return result


def run_demo(keep: bool = False) -> int:
    import anyio

    home = Path(tempfile.mkdtemp(prefix="kb-mcp-demo-"))
    try:
        print(f"demo library: {home}")
        _build_library(home)
        anyio.run(_session, home)
    finally:
        if keep:
            print(f"\nkept {home}; try: kb-mcp search 'redis session' --home {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    return 0
