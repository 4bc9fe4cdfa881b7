"""kb-mcp uses FastMCP and the MCP SDK through their public API only (issue 23).

The server once answered ``initialize`` and the first calls itself and then handed the
session to FastMCP through ``mcp._mcp_server`` and ``mcp._lifespan_manager()``: any
FastMCP minor release could break it. This scan fails on every such use: in a module
that imports fastmcp, mcp or mcp_types, no attribute whose name starts with one
underscore may be read off anything but ``self`` or ``cls``, no ``_``-prefixed name or
module of theirs may be imported, and no ``getattr`` may spell one as a string.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kb_mcp

PACKAGES = ("fastmcp", "mcp", "mcp_types")
SOURCE = Path(kb_mcp.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _theirs(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in PACKAGES


def private_uses(tree: ast.Module) -> list[str]:
    """Each private use in a module that imports one of ``PACKAGES``, as ``line: text``."""
    imports = [
        node
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and _theirs(node.module))
        or (isinstance(node, ast.Import) and any(_theirs(a.name) for a in node.names))
    ]
    if not imports:
        return []
    found = []
    for node in imports:
        names = [a.name for a in node.names]
        modules, names = ([node.module], names) if isinstance(node, ast.ImportFrom) else (names, [])
        if any(_private(part) for m in modules if _theirs(m) for part in m.split(".")):
            found.append(f"{node.lineno}: import of a private module {modules}")
        if any(_private(name) for name in names):
            found.append(f"{node.lineno}: import of a private name {names}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{node.lineno}: .{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.lineno}: {node.func.id}(…, {node.args[1].value!r})")
    return found


def test_no_private_attribute_of_fastmcp_or_the_sdk_is_used_anywhere_in_kb_mcp() -> None:
    offences = {
        str(path.relative_to(SOURCE)): uses
        for path in sorted(SOURCE.rglob("*.py"))
        if (uses := private_uses(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offences == {}


def test_the_scan_finds_the_handover_it_replaced() -> None:
    """The scan itself: the old hand-over through FastMCP's internals is caught."""
    old = (
        "from fastmcp import FastMCP\n"
        "async def serve(mcp: FastMCP) -> None:\n"
        "    async with mcp._lifespan_manager():\n"
        "        await mcp._mcp_server.run(1, 2, getattr(mcp, '_state'))\n"
        "from mcp.shared._context_streams import create_context_streams\n"
    )
    assert set(private_uses(ast.parse(old))) == {
        "5: import of a private module ['mcp.shared._context_streams']",
        "3: ._lifespan_manager",
        "4: ._mcp_server",
        "4: getattr(…, '_state')",
    }
