"""format_cite / parse_cite: the one citation grammar ``<doc>#L<start>-L<end>``."""

from __future__ import annotations

import pytest

from kb_mcp.cite import Citation, format_cite, parse_cite


def test_format_cite_shape() -> None:
    assert format_cite("f-3a9c", 12, 40) == "f-3a9c#L12-L40"


@pytest.mark.parametrize(
    ("doc", "start", "end"),
    [("f-3a9c", 12, 40), ("a-release-notes", 1, 1), ("u-x.y_z", 7, 9_999), ("9abc", 3, 4)],
)
def test_cite_format_parse_round_trip(doc: str, start: int, end: int) -> None:
    citation = parse_cite(format_cite(doc, start, end))
    assert citation == Citation(doc, start, end)
    assert str(citation) == format_cite(doc, start, end)


def test_parse_cite_single_line() -> None:
    assert parse_cite("doc#L5") == Citation("doc", 5, 5)


def test_parse_cite_end_without_second_l() -> None:
    assert parse_cite("doc#L5-9") == Citation("doc", 5, 9)


def test_parse_cite_ignores_surrounding_whitespace() -> None:
    assert parse_cite("  f-1#L2-L3\n") == Citation("f-1", 2, 3)
    assert parse_cite("\tf-1#L2 ") == Citation("f-1", 2, 2)


def test_parse_cite_leaves_range_checks_to_read() -> None:
    """The grammar is syntactic; ``library.lookup.read`` rejects line 0 and reversed ranges."""
    assert parse_cite("doc#L0") == Citation("doc", 0, 0)
    assert parse_cite("doc#L9-L3") == Citation("doc", 9, 3)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "doc",
        "doc#",
        "doc#L",
        "doc#5",
        "doc#l5",
        "doc#La",
        "doc#L5-",
        "doc#L5-L",
        "doc#L5-L7-L9",
        "doc#L-5",
        "#L5",
        "-doc#L5",
        "_doc#L5",
        "doc L5",
        "doc #L5",
        "doc#L5 extra",
        "dir/doc.md#L5",
        "doc#L5\nother#L6",
        "docs/readme.md",
    ],
)
def test_parse_cite_invalid_forms_are_none(text: str) -> None:
    assert parse_cite(text) is None
