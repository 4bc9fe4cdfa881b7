"""add_document's labels (title, source_uri, tags) are one line of visible text.

An outside run after issue 7 stored ``title="\\x00\\u202e"`` and ``source_uri="\\x00"``: a
NUL and a right-to-left override then reached every listing an agent or a person reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.library import Library


@pytest.mark.parametrize(
    ("title", "uri", "tags", "field", "code_point"),
    [
        ("\x00\u202e", "notes://a", None, "title", "U+0000"),
        ("Release\u202eflow", "notes://a", None, "title", "U+202E"),
        ("two\nlines", "notes://a", None, "title", "U+000A"),
        ("Fine title", "\x00", None, "source_uri", "U+0000"),
        ("Fine title", "notes://\u2066a", None, "source_uri", "U+2066"),
        ("Fine title", "notes://a", ["ok", "bad\x07"], "tag", "U+0007"),
    ],
)
def test_add_document_refuses_hidden_characters_in_labels_and_stores_nothing(
    library: Library,
    home: Path,
    title: str,
    uri: str,
    tags: list[str] | None,
    field: str,
    code_point: str,
) -> None:
    with pytest.raises(InvalidInput) as raised:
        library.writing.add_document(title, "some text", uri, tags, by_agent=False)
    assert raised.value.message.startswith(f"{field} contains the control character {code_point}")
    assert library.catalog.overview().documents == 0
    assert not list((home / "docs").glob("*.md"))


def test_add_document_keeps_labels_in_any_script(library: Library) -> None:
    added = library.writing.add_document(
        "数据库迁移 — ‏שלום‏ ✓", "正文", "notes://迁移", ["标签"], by_agent=False
    )
    assert added.title == "数据库迁移 — ‏שלום‏ ✓"


def test_add_document_refuses_nul_in_content_with_its_place_and_stores_nothing(
    library: Library, home: Path
) -> None:
    """A NUL means binary data, as it does in a folder's file; PostgreSQL's text cannot
    hold it, so the same call must fail the same clear way on every store."""
    with pytest.raises(InvalidInput) as raised:
        library.writing.add_document(
            "Fine title", "one\ntwo \x00three", "notes://a", by_agent=False
        )
    assert raised.value.message.startswith(
        "content contains a NUL character (U+0000) at line 2, column 5;"
    )
    assert library.catalog.overview().documents == 0
    assert not list((home / "docs").glob("*.md"))
