"""Every tool response fits ``RESPONSE_BYTES``, and each cut says how to get the rest.

Issue 7 item 11 (responses): one search returned 790 KB to the agent. The stdio test adds
a real 2 MB document through ``kb-mcp serve``; the pure tests pin each cut on plain values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kb_mcp.library.results import DocumentEntry, SourceListing
from kb_mcp.search.engine import Hit, SearchResult
from kb_mcp.server.budget import (
    PASSAGE_CHARS,
    RESPONSE_BYTES,
    bound_listing,
    bound_search,
    fit_response,
    json_bytes,
)

LINES = 10_000
BIG_DOC = (
    "# Big export\n\n```text\n"
    + "".join(f"row {i:05d} needle " + "x" * 180 + "\n" for i in range(LINES))
    + "```\n"
)  # about 2 MB in one atomic code block


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def size_of(result: Any) -> int:
    return json_bytes(text_of(result)) + json_bytes(result.structured_content)


@pytest.mark.anyio
async def test_budget_big_document_responses_are_bounded_and_say_how_to_continue(
    mcp_client,
) -> None:
    """Issue 7 item 11: search, read and grep of a 2 MB document each stay under the cap."""
    assert 1_900_000 < len(BIG_DOC) < 2_000_000  # just under add_document's limit
    lines = BIG_DOC.split("\n")
    async with mcp_client(allow_agent_writes=True) as client:
        added = await client.call_tool(
            "add_document", {"title": "Big export", "content": BIG_DOC, "source_uri": "t://big"}
        )
        doc = added.structured_content["doc"]

        found = await client.call_tool("search", {"query": "needle", "top_k": 50})
        assert size_of(found) <= RESPONSE_BYTES
        for hit in found.structured_content["results"]:
            span = "\n".join(lines[hit["start_line"] - 1 : hit["end_line"]])
            if len(span) > PASSAGE_CHARS:  # a passage the ingest did not cap is cut here
                assert f"read {hit['cite']} for all of it]" in hit["text"]

        read = await client.call_tool("read", {"doc": doc})
        assert size_of(read) <= RESPONSE_BYTES
        data = read.structured_content
        end = data["end_line"]
        assert 1 < end < len(lines)
        assert data["text"].startswith("\n".join(lines[:end]) + "\n… [truncated: ")
        assert f"start_line={end + 1} end_line={len(lines)}" in data["truncated_note"]
        assert data["truncated_note"] in text_of(read)
        rest = await client.call_tool("read", {"doc": doc, "start_line": end + 1})
        assert rest.structured_content["text"].startswith(lines[end])

        grep = await client.call_tool("grep", {"pattern": "needle", "max_matches": 1000})
        assert size_of(grep) <= RESPONSE_BYTES
        matches = grep.structured_content["matches"]
        assert 0 < len(matches) < 1000 and grep.structured_content["truncated"] is True
        assert "narrow the pattern" in grep.structured_content["truncated_note"]


def hit(rank: int, text: str) -> Hit:
    return Hit(
        rank=rank,
        score=1.0,
        doc="a-1",
        title="Minified",
        path="app.min.js",
        source="docs",
        section=(),
        start_line=1,
        end_line=1,
        text=text,
        cite="a-1#L1-L1",
        legs=("keyword",),
        leg_scores={},
        date=None,
    )


def test_budget_search_passage_over_its_share_is_cut_with_its_cite() -> None:
    """Issue 7 item 11: a 1.37 MB passage became one 790 KB search answer."""
    result = SearchResult("q", "keyword", (hit(1, "var a=1;" * 170_000), hit(2, "short")))
    bounded, note = bound_search(result)
    first, second = bounded.hits
    assert len(first.text) < PASSAGE_CHARS + 200
    assert first.text.endswith("; read a-1#L1-L1 for all of it]")
    assert first.cite == "a-1#L1-L1" and second.text == "short"
    assert note is not None and "1 passage(s) cut" in note


def test_budget_search_secret_is_redacted_before_the_cut() -> None:
    """Issue 7 item 11 with item 3: a cut must never split a secret out of its pattern."""
    key = "AKIAIOSFODNN7EXAMPLE"
    text = "x " * (PASSAGE_CHARS // 2 - 5) + key + " y" * 10_000
    bounded, _ = bound_search(SearchResult("q", "keyword", (hit(1, text),)))
    assert key[:10] not in bounded.hits[0].text


def test_budget_listing_page_is_cut_with_the_next_offset() -> None:
    """Issue 7 item 11: list output is bounded too."""
    entries = tuple(
        DocumentEntry(f"a-{i}", "T" * 300, "p/" + "q" * 3000, None, "2026-01-01")
        for i in range(200)
    )
    bounded, note = bound_listing(SourceListing("docs", entries, 500, 100))
    kept = len(bounded.documents)
    assert 0 < kept < 200
    assert note is not None and f"offset={100 + kept}" in note


def test_budget_fit_response_cuts_any_oversized_string() -> None:
    """Issue 7 item 11: the last guarantee, e.g. a 52 MB frontmatter title."""
    title = "t" * 3_000_000
    text, data = fit_response(f"# {title}", {"title": title, "documents": 1})
    assert json_bytes(text) + json_bytes(data) <= RESPONSE_BYTES
    assert data["documents"] == 1 and "[truncated: over the 256 KB" in data["title"]
    assert "[truncated: over the 256 KB" in text
    assert json.loads(json.dumps(data)) == data
