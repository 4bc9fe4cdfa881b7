"""Markdown, reST, AsciiDoc and source code → chunks. Pure functions over strings; no I/O.

``split_document`` picks the chunker for a converted document's kind.

A ``Chunk`` is the unit the indexes store and search returns. It records where it sits
in its document (1-based, inclusive line span; heading path) so that a citation points
at real lines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Chunk:
    """One searchable passage of a document.

    ``start_line`` / ``end_line`` are 1-based and inclusive, counted in the document text
    that was chunked, at ``\n`` only (as editors, ``read`` and ``grep`` count; not
    ``splitlines()``, which also breaks at form feeds and U+2028). ``heading_path`` is the
    chain of Markdown or reST section titles (or the enclosing definition for code) that
    contains the passage.
    """

    ordinal: int
    heading_path: tuple[str, ...]
    start_line: int
    end_line: int
    text: str


# The chunkers build Chunk values, so they are imported after it is defined.
from kb_mcp.chunk.asciidoc import split_asciidoc  # noqa: E402
from kb_mcp.chunk.code import split_code  # noqa: E402
from kb_mcp.chunk.markdown import split_markdown  # noqa: E402
from kb_mcp.chunk.rst import split_rst  # noqa: E402


def split_document(text: str, kind: str, language: str | None = None) -> list[Chunk]:
    """Chunks of a converted document, by the chunker its ``kind`` calls for.

    ``code`` splits at definitions of ``language``; ``rst`` by reST sections (never by
    Markdown rules, whose ``~~~`` fences are reST adornments); ``asciidoc`` by AsciiDoc
    sections (whose ``----`` listing delimiters are Markdown setext underlines); every
    other kind is Markdown or reads as such (converted HTML, PDF and DOCX, plain text,
    data).
    """
    if kind == "code":
        return split_code(text, language)
    if kind == "rst":
        return split_rst(text)
    if kind == "asciidoc":
        return split_asciidoc(text)
    return split_markdown(text)
