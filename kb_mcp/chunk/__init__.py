"""Markdown and source code → chunks. Pure functions over strings; no I/O.

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
    ``splitlines()``, which also breaks at form feeds and U+2028). ``heading_path`` is the chain of
    Markdown headings (or the enclosing definition for code) that contains the passage.
    """

    ordinal: int
    heading_path: tuple[str, ...]
    start_line: int
    end_line: int
    text: str
