"""The ``Chunk`` every chunker builds: one passage and where it sits in its document.

Apart from ``chunk/__init__`` (which picks a chunker), so the chunkers import it without
importing back the package that imports them. Pure.
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
