"""One table of limits for every integer argument, shared by MCP, CLI and library.

Issue 7 item 19: ``list(offset ≥ 2**63)`` was an internal error (OverflowError), top_k
was capped at 50 over MCP and 100 in the CLI, max_matches at 1,000 and 10,000, and
``--top-k 0`` was accepted. Item 22 (an empty library says so) is checked over MCP here
too, on the same server.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from fastmcp.exceptions import ToolError

from kb_mcp import limits
from kb_mcp.errors import InvalidInput
from kb_mcp.library import Library
from kb_mcp.settings import Settings, load

# (tool, argument) → the limit its schema must carry.
TOOL_BOUNDS = {
    ("search", "top_k"): limits.TOP_K,
    ("grep", "max_matches"): limits.MAX_MATCHES,
    ("read", "start_line"): limits.LINE,
    ("read", "end_line"): limits.LINE,
    ("list", "limit"): limits.LIST_LIMIT,
    ("list", "offset"): limits.OFFSET,
}


def _bounds(schema: dict) -> tuple[int | None, int | None]:
    """(minimum, maximum) of an integer property, also when it is ``int | None``."""
    for option in [schema, *schema.get("anyOf", [])]:
        if option.get("type") == "integer":
            return option.get("minimum"), option.get("maximum")
    raise AssertionError(f"no integer in {schema}")


def test_limits_every_limit_has_a_sane_range_and_a_reason() -> None:
    """issue 7 item 19: one declaration per limit (name, min, max, default, why)."""
    assert len({lim.name for lim in limits.LIMITS}) == len(limits.LIMITS)
    for lim in limits.LIMITS:
        assert 0 <= lim.minimum < lim.maximum < 2**63, lim.name
        assert lim.default is None or lim.minimum <= lim.default <= lim.maximum, lim.name
        assert lim.why, lim.name


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda lib: lib.catalog.list_source("agent", 50, 2**63), "offset"),
        (lambda lib: lib.catalog.list_source("agent", 50, -1), "offset"),
        (lambda lib: lib.catalog.list_source("agent", 0, 0), "limit"),
        (lambda lib: lib.lookup.search("anything", top_k=0), "top_k"),
        (lambda lib: lib.lookup.search("anything", top_k=101), "top_k"),
        (lambda lib: lib.lookup.grep("x", max_matches=0), "max_matches"),
        (lambda lib: lib.lookup.grep("x", max_matches=1_001), "max_matches"),
        (lambda lib: lib.lookup.read("whatever", 2**63), "start_line"),
        (lambda lib: lib.lookup.read("whatever", 1, 2**64), "end_line"),
    ],
)
def test_library_out_of_range_integer_is_invalid_input_naming_argument_and_range(
    library: Library, call: Callable[[Library], object], argument: str
) -> None:
    """issue 7 item 19: the library validates, naming the argument and its range."""
    with pytest.raises(InvalidInput) as caught:
        call(library)
    assert caught.value.message.startswith(f"{argument} must be between ")


def test_settings_out_of_range_integer_names_the_setting_and_range(tmp_path: Path) -> None:
    """issue 7 item 19: an integer setting outside its limit is refused where it is read."""
    with pytest.raises(InvalidInput) as caught:
        load(home=tmp_path, environ={"KB_MCP_SEARCH_TOP_K": "0"})
    assert "$KB_MCP_SEARCH_TOP_K" in caught.value.message
    assert "search_top_k must be between 1 and 100, got 0" in caught.value.message


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("search", "q", "--top-k", "0"), "argument --top-k: must be between 1 and 100, got 0"),
        (("search", "q", "--top-k", "many"), "argument --top-k: expected a whole number"),
        (("grep", "x", "--max-matches", "10000"), "argument --max-matches: must be between"),
        (("list", "agent", "--offset", str(2**63)), "argument --offset: must be between 0"),
        (("read", "doc", "--start-line", "0"), "argument --start-line: must be between 1"),
    ],
)
def test_cli_out_of_range_integer_is_a_usage_error(
    kb_cli: Callable[..., subprocess.CompletedProcess],
    home: Path,
    args: tuple[str, ...],
    expected: str,
) -> None:
    """issue 7 item 19: the CLI parses with the same limits; exit 2, nothing opened."""
    done = kb_cli(*args)
    assert done.returncode == 2
    assert expected in done.stderr
    assert not home.exists()


@pytest.mark.anyio
async def test_mcp_tool_bounds_come_from_the_limits_table_and_empty_search_says_why(
    mcp_client, home: Path
) -> None:
    """issue 7 items 19 and 22: schemas carry the table's bounds; a huge offset is refused
    as invalid input, not an internal error; an empty library says how to fill it."""
    async with mcp_client() as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        for (tool, argument), lim in TOOL_BOUNDS.items():
            schema = tools[tool].input_schema["properties"][argument]
            assert _bounds(schema) == (lim.minimum, lim.maximum), (tool, argument)
        with pytest.raises(ToolError) as caught:
            await client.call_tool("list", {"source": "agent", "offset": 2**63})
        assert "internal" not in str(caught.value)
        empty = await client.call_tool("search", {"query": "rotate the signing key"})
    assert empty.structured_content["results"] == []
    assert "library is empty" in empty.structured_content["reason"]
    assert "kb-mcp add PATH" in empty.structured_content["reason"]


def test_cli_search_of_an_empty_library_says_it_is_empty(
    kb_cli: Callable[..., subprocess.CompletedProcess],
) -> None:
    """issue 7 item 22: the CLI prints the same reason."""
    done = kb_cli("search", "rotate the signing key")
    assert done.returncode == 0, done.stderr
    assert "library is empty" in done.stdout and "kb-mcp add PATH" in done.stdout


def test_settings_default_top_k_is_the_limit_default(tmp_path: Path) -> None:
    """issue 7 item 19: the setting's default is the table's, not a second number."""
    assert Settings(home=tmp_path).search_top_k == limits.TOP_K.default
    assert Settings(home=tmp_path).grep_max_matches == limits.MAX_MATCHES.default
