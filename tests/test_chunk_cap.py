"""The hard cap on passage size, for every chunker (issue 7 items 10 and 11).

A minified search-index ``.js`` became one 1.37 MB passage and a reST manual one of
95.8 KB. Whatever the input, no chunk exceeds ``chunk_cap(budget)``, and every chunk is
still an exact slice of the lines it cites.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from kb_mcp.chunk import Chunk
from kb_mcp.chunk.code import split_code
from kb_mcp.chunk.markdown import split_markdown
from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS, chunk_cap
from kb_mcp.chunk.rst import split_rst

# Line fragments that exercise every block kind of the three scanners, plus noise.
_FRAGMENTS = [
    "# Title", "## Sub", "Heading", "=====", "-----", "~~~~~~~~~~~~", "~~~", "```", "```py",
    "^^^^", "::", "Text ending::", ".. code-block:: python", ".. note::", "    indented code",
    "   three spaces", "| a | b |", "|---|---|", "+---+---+", "===  ===", "- item", "1. item",
    "> quote", "def f(x):", "    return x", "class A:", "function g() {", "}", ">>> 1 + 1",
    "", "", "", "Short sentence. Another one! And more?", "中文没有空格的一段文字。第二句。",
    "\t", " ", "word " * 30, "x" * 120, "a,b;c" * 40,
]  # fmt: skip
_lines = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(min_size=0, max_size=60)), max_size=60
)
_texts = st.builds(
    lambda lines, crlf: ("\r\n" if crlf else "\n").join(lines), _lines, st.booleans()
)


def _check(text: str, chunks: list[Chunk], budget: int) -> None:
    """Every chunk: within the cap, inside the document, exactly the text of its span."""
    lines = text.split("\n")
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.strip(), chunk
        assert len(chunk.text) <= chunk_cap(budget), (len(chunk.text), budget)
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        covered = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text in covered
        # First character on the start line, last on the end line: a split line's pieces
        # share its span, and a whole-line piece cites exactly its lines.
        assert chunk.text.count("\n") == chunk.end_line - chunk.start_line


@settings(max_examples=150, deadline=None)
@given(_texts, st.integers(min_value=1, max_value=300), st.integers(min_value=0, max_value=80))
def test_split_markdown_never_exceeds_the_cap(text: str, budget: int, overlap: int) -> None:
    """issue 7 item 11: the cap holds for Markdown whatever the input."""
    _check(text, split_markdown(text, budget=budget, overlap=overlap), budget)


@settings(max_examples=150, deadline=None)
@given(_texts, st.integers(min_value=1, max_value=300), st.integers(min_value=0, max_value=80))
def test_split_rst_never_exceeds_the_cap(text: str, budget: int, overlap: int) -> None:
    """issue 7 items 10 and 11: the cap holds for reST whatever the input."""
    _check(text, split_rst(text, budget=budget, overlap=overlap), budget)


@settings(max_examples=150, deadline=None)
@given(
    _texts,
    st.sampled_from(["python", "javascript", "c", "go", None]),
    st.integers(min_value=1, max_value=300),
)
def test_split_code_never_exceeds_the_cap(text: str, language: str | None, budget: int) -> None:
    """issue 7 item 11: the cap holds for source code whatever the input."""
    _check(text, split_code(text, language, budget=budget, overlap=20), budget)


def test_split_code_minified_line_is_cut_into_pieces_sharing_its_span() -> None:
    """issue 7 item 11: one 1.4 MB line of minified JS becomes capped pieces of line 2."""
    minified = "var a=" + ",".join(f'{{"k{i}":[{i},"doc{i}"]}}' for i in range(60_000)) + ";"
    text = f"/* search index */\n{minified}\n"
    assert len(minified) > 1_300_000

    started = time.perf_counter()
    chunks = split_code(text, "javascript")
    elapsed = time.perf_counter() - started

    _check(text, chunks, DEFAULT_BUDGET_CHARS)
    assert max(len(c.text) for c in chunks) <= DEFAULT_BUDGET_CHARS
    assert {(c.start_line, c.end_line) for c in chunks[1:]} == {(2, 2)}
    assert "".join(c.text for c in chunks if c.start_line == 2) == minified  # nothing lost
    assert elapsed < 2.0


def test_split_markdown_oversized_fence_is_cut_at_line_boundaries() -> None:
    """issue 7 item 11: a code fence far over budget is split between its lines."""
    fence = "```python\n" + "".join(f"value_{i} = compute({i})\n" for i in range(400)) + "```"
    text = f"# Generated constants\n\n{fence}\n\nAfter the fence.\n"

    chunks = split_markdown(text)

    _check(text, chunks, DEFAULT_BUDGET_CHARS)
    assert len(chunks) > 5
    assert all(c.heading_path == ("Generated constants",) for c in chunks)
    assert chunks[-1].text == "After the fence."
    for chunk in chunks[:-1]:  # whole lines only: every piece starts and ends at a line edge
        lines = text.split("\n")[chunk.start_line - 1 : chunk.end_line]
        assert chunk.text == "\n".join(lines).strip()


def test_split_markdown_unclosed_fence_cannot_swallow_the_rest_beyond_the_cap() -> None:
    """issue 7 item 10: an opening ~~~ with no closer (no ATX heading after it either)."""
    prose = "\n\n".join(f"Paragraph {i} explains step {i} of the upgrade." for i in range(300))
    text = f"Setup\n=====\n\n~~~~~~~~~~\n\n{prose}\n"

    chunks = split_markdown(text)

    _check(text, chunks, DEFAULT_BUDGET_CHARS)
    assert len(chunks) > 5
    assert chunks[-1].end_line == text.count("\n")


def test_split_markdown_giant_table_and_heading_are_capped() -> None:
    """issue 7 item 11: tables and headings are atomic only up to the cap."""
    table = "| key | value |\n|---|---|\n" + "".join(f"| k{i} | v{i} |\n" for i in range(900))
    text = "# " + "very long heading " * 300 + "\n\n" + table

    chunks = split_markdown(text)

    _check(text, chunks, DEFAULT_BUDGET_CHARS)
    assert sum(c.start_line == c.end_line == 1 for c in chunks) > 1  # the heading, cut
