"""One stdin line → a line the MCP server can take, or a reasoned rejection.

The MCP SDK's own stdio reader hands every line it cannot validate to the session as an
exception, which the session drops without a word: the client waits for its own timeout.
``read_message`` decides instead, and says why: JSON that does not parse is a -32700 parse
error (id null, as JSON-RPC 2.0 requires), JSON that is not a 2.0 request is -32600 with
the request's id when one can be read. A notification is never answered (JSON-RPC forbids
it); its rejection is only logged.

Two repairs keep odd but harmless input working: a lone UTF-16 surrogate (``"\\ud800"``,
valid JSON syntax but not encodable text) becomes U+FFFD, so the call runs with the
character replaced instead of failing deep in pydantic or in the UTF-8 encode of the reply;
bytes that are not UTF-8 are replaced the same way, as the SDK reader did.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp_types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from pydantic import ValidationError

# Deeper than any MCP message needs; shallow enough that nothing downstream (pydantic,
# the reply's serializer) can run out of stack on it.
MAX_DEPTH = 64
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


_VERSION_LIKE = re.compile(r"\d{1,3}(?:\.\d{1,3}){0,2}")


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line the server will not run: the JSON-RPC error for it, and whether to send it."""

    code: int
    message: str
    id: str | int | None = None
    answer: bool = True  # False for a notification: it is logged, never answered


def read_message(line: bytes) -> bytes | Rejected | None:
    """``line`` as the SDK may read it (repaired if need be), or why not; ``None`` for a
    blank line (nothing was asked)."""
    if not line.strip():
        return None
    try:
        value = json.loads(line.decode("utf-8", errors="replace"))
    except RecursionError:
        return Rejected(PARSE_ERROR, f"parse error: JSON nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        return Rejected(
            PARSE_ERROR, f"parse error: not valid JSON ({exc}); send one JSON object per line"
        )
    has_surrogates = bool(_ESCAPED_SURROGATE.search(line))
    try:
        value = _repaired(value, has_surrogates=has_surrogates)
    except _TooDeep:
        return Rejected(PARSE_ERROR, f"parse error: JSON nested deeper than {MAX_DEPTH} levels")
    rejected = _checked(value)
    if rejected is not None:
        return rejected
    if has_surrogates:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return line


class _TooDeep(Exception):
    pass


def _repaired(value: Any, *, has_surrogates: bool) -> Any:
    """``value`` with lone surrogates replaced; raises ``_TooDeep`` past ``MAX_DEPTH``.

    Iterative, so depth is checked without using the Python stack it guards.
    """
    fix = _fix_text if has_surrogates else _same
    root = [fix(value) if isinstance(value, str) else value]
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _TooDeep
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = fix(item)
                elif isinstance(item, dict | list):
                    stack.append((item, depth + 1))
        elif has_surrogates or any(isinstance(v, dict | list) for v in node.values()):
            for key in list(node):
                item = node.pop(key)
                if isinstance(item, str):
                    item = fix(item)
                elif isinstance(item, dict | list):
                    stack.append((item, depth + 1))
                node[fix(key)] = item
    return root[0]


def _fix_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def _same(text: str) -> str:
    return text


def _checked(value: Any) -> Rejected | None:
    """Why a parsed JSON value is not a JSON-RPC 2.0 message (``None``: it is one)."""
    if isinstance(value, list):
        return Rejected(
            INVALID_REQUEST,
            "invalid request: batch arrays are not supported (MCP has no JSON-RPC batching); "
            "send each request as its own line",
        )
    if not isinstance(value, dict):
        return Rejected(
            INVALID_REQUEST,
            f"invalid request: expected a JSON-RPC object, got {_json_type(value)}",
        )
    request_id = _readable_id(value)
    notification = "id" not in value and "method" in value
    problem = _envelope_problem(value)
    if problem is None:
        try:
            jsonrpc_message_adapter.validate_python(value, by_name=False)
            return None
        except ValidationError:
            problem = (
                "not a JSON-RPC 2.0 request, notification or response "
                '(a request has "jsonrpc", "id", "method" and optional "params")'
            )
    return Rejected(INVALID_REQUEST, f"invalid request: {problem}", request_id, not notification)


def _envelope_problem(message: dict[str, Any]) -> str | None:
    """What is wrong with the JSON-RPC envelope, in words; ``None`` when it looks right."""
    if "jsonrpc" not in message:
        return 'missing "jsonrpc": "2.0"'
    if message["jsonrpc"] != "2.0":
        return f'"jsonrpc" is {_version_shown(message["jsonrpc"])}; only "2.0" is supported'
    if "id" in message and _readable_id(message) is None:
        return f'"id" must be a string or an integer, got {_json_type(message["id"])}'
    if "method" in message and not isinstance(message["method"], str):
        return f'"method" must be a string, got {_json_type(message["method"])}'
    if "params" in message and not isinstance(message["params"], dict):
        return f'"params" must be an object, got {_json_type(message["params"])}'
    if "method" not in message and "result" not in message and "error" not in message:
        return 'missing "method"'
    return None


def _version_shown(value: Any) -> str:
    """A version-like value as written ("1.0", 2), anything else by its type only: the
    field is echoed back and logged, so it must never carry the caller's text out."""
    if isinstance(value, str | int | float) and _VERSION_LIKE.fullmatch(str(value)):
        return json.dumps(value)
    return _json_type(value)


def _readable_id(message: dict[str, Any]) -> str | int | None:
    found = message.get("id")
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')


def id_in_head(head: bytes) -> str | int | None:
    """The top-level ``"id"`` of a message of which only ``head`` was kept (an over-long line).

    Lets the answer to a request too large to parse reach the call that is waiting for it.
    """
    text = head.decode("utf-8", errors="replace")
    depth = 0
    for token in _TOKEN.finditer(text):
        kind = token.group()
        if kind in ("{", "["):
            depth += 1
        elif kind in ("}", "]"):
            depth -= 1
        elif depth == 1 and kind == '"id"':
            rest = text[token.end() :].lstrip()
            if not rest.startswith(":"):
                continue
            try:
                value, _ = json.JSONDecoder().raw_decode(rest[1:].lstrip())
            except ValueError:
                return None
            return _readable_id({"id": value})
    return None
