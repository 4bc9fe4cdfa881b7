"""Markdown, reST, AsciiDoc and source code → chunks. Pure functions over strings; no I/O.

``split_document`` picks the chunker for a converted document's kind.

A ``Chunk`` is the unit the indexes store and search returns. It records where it sits
in its document (1-based, inclusive line span; heading path) so that a citation points
at real lines.
"""

from __future__ import annotations

from kb_mcp.chunk.asciidoc import split_asciidoc
from kb_mcp.chunk.base import Chunk
from kb_mcp.chunk.code import split_code
from kb_mcp.chunk.markdown import split_markdown
from kb_mcp.chunk.rst import split_rst

__all__ = ["Chunk", "split_document"]


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
