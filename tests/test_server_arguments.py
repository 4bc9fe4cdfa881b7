"""Rejected tool arguments over stdio: our ``[invalid_input]`` shape, never the raw value.

Issue 7 item 7: content passed as a list came back inside pydantic's error text with the
AWS key id it held, the input's Python type and a docs URL. These tests send a real
key-shaped value in a wrong-typed argument of every tool through ``kb-mcp serve``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
WRONG_TYPED = {
    "search": ({"query": [AWS_KEY]}, "query: expected a string, got a list"),
    "grep": ({"pattern": {"key": AWS_KEY}}, "pattern: expected a string, got an object"),
    "read": (
        {"doc": "a-1", "start_line": AWS_KEY},
        "start_line: expected an integer, got a string",
    ),
    "list": ({"source": [AWS_KEY]}, "source: expected a string, got a list"),
    "add_document": (
        {"title": "Keys", "content": [AWS_KEY], "source_uri": "t://keys"},
        "content: expected a string, got a list",
    ),
}


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_arguments_wrong_type_errors_name_the_field_and_never_echo_the_value(
    mcp_client, home: Path, server_log: Path
) -> None:
    """Issue 7 item 7, for every tool."""
    messages = {}
    async with mcp_client(allow_agent_writes=True) as client:
        for tool, (arguments, _) in WRONG_TYPED.items():
            result = await client.call_tool(tool, arguments, raise_on_error=False)
            assert result.is_error, tool
            messages[tool] = text_of(result)
        overview = (await client.call_tool("list", {})).structured_content
    for tool, (_, expected) in WRONG_TYPED.items():
        assert messages[tool] == f"[invalid_input] invalid arguments for {tool}: {expected}"
    everything = json.dumps(messages) + server_log.read_text(encoding="utf-8")
    everything += (home / "audit.log").read_text(encoding="utf-8")
    assert AWS_KEY not in everything
    assert "errors.pydantic.dev" not in everything and "input_value" not in everything
    assert overview["documents"] == 0  # nothing was written


async def test_arguments_unknown_argument_lists_the_real_ones_redacted(mcp_client) -> None:
    """Issue 7 item 7: an argument's name is input too, and is redacted like its value."""
    async with mcp_client() as client:
        result = await client.call_tool(
            "search", {"query": "x", AWS_KEY: 1, "top_k": 0}, raise_on_error=False
        )
    message = text_of(result)
    assert message.startswith("[invalid_input] invalid arguments for search: ")
    assert "top_k: input should be greater than or equal to 1" in message
    assert "not an argument of search; it takes query, top_k, mode, source" in message
    assert AWS_KEY not in message and "[REDACTED:" in message
