"""The keyword index's two columns: what a chunk is indexed as, and what each weighs.

``head`` (document title + heading path, weighted up) and ``body`` (the chunk's text),
both as their index copies (``index/textprep.py``). One place for both indexes that read
them: FTS5's table (``index/fts.py``) and the postings segment that scores the same bm25
outside it (``index/postings.py``), so the two cannot index a chunk differently — and
neither has to import the other for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kb_mcp.index.textprep import index_copy

# bm25() column weights (head, body). A term in the title or a heading says more about
# a passage than the same term in its body. Measured (issue #3): weights 1, 3, 5 and 10
# moved SciFact train / CoSQA dev / CMRC2018 dev by at most ±0.006, within noise, and no
# other weight gained on all three.
HEAD_WEIGHT = 2.0
BODY_WEIGHT = 1.0


def head_text(title: str, heading_path: Sequence[str], language: str | None = None) -> str:
    """The ``head`` column: title then headings, deduplicated (a title often repeats as H1),
    then a code file's language, so a query's "python" reads as "Python code" instead of
    matching the few docstrings that happen to mention the word (CoSQA dev +0.013)."""
    parts = [title] + [h for h in heading_path if h and h != title]
    if language:
        parts.append(language)
    return " / ".join(parts)


def index_row(
    title: str, heading_path: Sequence[str], text: str, language: str | None
) -> tuple[str, str]:
    """The ``(head, body)`` a chunk is indexed as: a pure function, so a reader process
    computes it beside the chunk (``ingest/derive``) and the writer only inserts it."""
    return index_copy(head_text(title, heading_path, language)), index_copy(text)
