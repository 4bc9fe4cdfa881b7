"""The ``tools/list`` answer, as FastMCP gives it, kept in a file the prelude can read.

The prelude's fast path (``server/fastpath.py``) answers ``tools/list`` before FastMCP has
imported, so it needs FastMCP's answer without FastMCP: ``data/tools_list.json`` is the
``result`` of the real server's reply at the default settings, written by
``python -m kb_mcp.cli.docgen`` (``write``, which spawns nothing: it runs the real server
over pipes in this process). The few values that come from settings (defaults of
``top_k`` and ``max_matches``, the longest title) are put back for the settings in use
(``SETTINGS_FIELDS``). ``tests/test_server_fastpath.py`` compares the bytes with the real
server's reply under default and changed settings, so the two cannot drift.

``valid_arguments`` tells the fast path whether a call's arguments plainly satisfy that
schema. ``load`` uses the standard library only; ``from_server`` imports the MCP stack.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb_mcp.settings import Settings

# The JSON-schema keywords ``valid_arguments`` knows; any other makes it say "not plainly valid".
_SCHEMA_KEYS = {
    "type",
    "anyOf",
    "enum",
    "items",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "default",
    "description",
}
SNAPSHOT_PATH = Path(__file__).parent / "data" / "tools_list.json"
# (tool, argument, schema key) → the setting whose value FastMCP's schema shows there.
SETTINGS_FIELDS = {
    ("search", "top_k", "default"): "search_top_k",
    ("grep", "max_matches", "default"): "grep_max_matches",
    ("add_document", "title", "maxLength"): "max_title_chars",
}


def load(settings: Settings, path: Path = SNAPSHOT_PATH) -> dict[str, Any]:
    """The ``tools/list`` result FastMCP gives under ``settings``."""
    result = json.loads(path.read_text(encoding="utf-8"))
    tools = {tool["name"]: tool for tool in result["tools"]}
    for (tool, argument, key), setting in SETTINGS_FIELDS.items():
        tools[tool]["inputSchema"]["properties"][argument][key] = getattr(settings, setting)
    return result


def encode(value: Any) -> bytes:
    """JSON as the MCP server writes it (pydantic's serializer): compact, UTF-8, keys in
    the order given, floats in pydantic's notation (``2.156e-6``, not Python's
    ``2.156e-06``), which ``json`` cannot be told to use: each float is written as a
    placeholder string, then replaced."""
    floats: list[float] = []
    marker = f"\x00{os.urandom(6).hex()}:"
    text = json.dumps(
        _floats_marked(value, floats, marker), ensure_ascii=False, separators=(",", ":")
    )
    if floats:
        escaped = json.dumps(marker, ensure_ascii=False)[1:-1]
        parts = text.split(f'"{escaped}')
        text = parts[0] + "".join(
            float_json(floats[int(n)]) + rest
            for n, rest in (part.split('"', 1) for part in parts[1:])
        )
    return text.encode("utf-8", errors="replace")


def _floats_marked(value: Any, floats: list[float], marker: str) -> Any:
    if isinstance(value, float):
        floats.append(value)
        return f"{marker}{len(floats) - 1}"
    if isinstance(value, dict):
        return {k: _floats_marked(v, floats, marker) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_floats_marked(v, floats, marker) for v in value]
    return value


def float_json(x: float) -> str:
    """``x`` as pydantic-core writes it: the shortest round-trip digits (as ``repr``),
        plain notation from 1e-5 to below 1e16, else ``d.ddde±x`` without padding. Checked
        against ``pydantic_core.to_json`` on 350k random floats when written; the test checks
    20k at every run (tests/test_server_fastpath.py)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    raw = whole + frac
    stripped = raw.lstrip("0")
    kk = len(whole) + int(exp or 0) - (len(raw) - len(stripped))  # x = 0.DIGITS × 10^kk
    digits = stripped.rstrip("0")
    n = len(digits)
    if n <= kk <= 16:
        return f"{sign}{digits}{'0' * (kk - n)}.0"
    if 0 < kk <= 16:
        return f"{sign}{digits[:kk]}.{digits[kk:]}"
    if -5 < kk <= 0:
        return f"{sign}0.{'0' * -kk}{digits}"
    body = digits if n == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{body}e{'+' if kk > 1 else ''}{kk - 1}"


def from_server(settings: Settings) -> dict[str, Any]:
    """The real server's ``tools/list`` result (imports FastMCP; runs it over pipes)."""
    replies = real_replies(settings, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}])
    return replies[1]["result"]


def real_replies(settings: Settings, messages: list[dict[str, Any]]) -> dict[Any, Any]:
    """The full FastMCP server's reply lines (parsed, by id) to a handshake + ``messages``.

    stdin stays open until every request has its reply, so no call is cut off by EOF.
    """
    return {
        json.loads(line)["id"]: json.loads(line) for line in real_reply_lines(settings, messages)
    }


def real_reply_lines(settings: Settings, messages: list[dict[str, Any]]) -> list[bytes]:
    """Like ``real_replies``, the raw lines, initialize's reply first."""
    import threading

    import anyio

    from kb_mcp.server.stdio import serve_stdio
    from kb_mcp.server.tools import build_server

    handshake = [
        {
            "jsonrpc": "2.0",
            "id": "snapshot-init",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "kb-mcp-snapshot", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    wanted = 1 + sum("id" in m for m in messages)
    mcp, holder = build_server(settings)
    stdin_r, stdin_w = os.pipe()
    wire_r, wire_w = os.pipe()
    lines: list[bytes] = []

    def collect() -> None:
        with os.fdopen(wire_r, "rb") as wire:
            for line in wire:
                lines.append(line.rstrip(b"\n"))
                if len(lines) == wanted:
                    os.close(stdin_w)

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    os.write(stdin_w, b"".join(encode(m) + b"\n" for m in handshake + messages))
    try:
        anyio.run(serve_stdio, mcp, wire_w, stdin_r)
    finally:
        holder.close()
        os.close(wire_w)
        os.close(stdin_r)
    reader.join(10)
    return lines


def write(path: Path = SNAPSHOT_PATH) -> None:
    """Rewrite the snapshot from the real server at the default settings."""
    import tempfile

    from kb_mcp.settings import Settings

    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), embedder="none", sync_interval_s=0)
        result = from_server(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def valid_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    """Whether ``arguments`` plainly satisfy the tool's input schema (FastMCP's).

    Conservative: a keyword this check does not know, or a value pydantic might coerce
    (``"5"`` for an integer), is not "plainly valid"; FastMCP then judges the call.
    """
    properties = schema.get("properties", {})
    if not set(arguments) <= set(properties):
        return False
    if not set(schema.get("required", ())) <= set(arguments):
        return False
    return all(_valid(value, properties[name]) for name, value in arguments.items())


def _valid(value: Any, spec: dict[str, Any]) -> bool:
    if not set(spec) <= _SCHEMA_KEYS:
        return False
    if "anyOf" in spec:
        return any(_valid(value, option) for option in spec["anyOf"])
    kind = spec.get("type")
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        ok = isinstance(value, str) and _within(
            len(value) if isinstance(value, str) else 0, spec, "Length"
        )
    elif kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and spec.get("minimum", value) <= value <= spec.get("maximum", value)
    elif kind == "array":
        ok = isinstance(value, list) and _within(len(value), spec, "Items")
        ok = ok and all(_valid(item, spec.get("items", {})) for item in value)
    else:
        return False
    return ok and ("enum" not in spec or value in spec["enum"])


def _within(size: int, spec: dict[str, Any], what: str) -> bool:
    return spec.get(f"min{what}", 0) <= size <= spec.get(f"max{what}", size)
