"""Near-duplicates: reported, never merged.

Identical text is one document already (file documents are keyed by their text hash).
Two documents that are almost the same (a copied note edited in one place, a README in
two checkouts) stay two documents; a pair is recorded so ``list`` can say so, and the
user decides. Candidates are documents with the same title, compared with rapidfuzz.
"""

from __future__ import annotations

import apsw
from rapidfuzz import fuzz

from kb_mcp.store import documents as rows

NEAR_DUPLICATE = 90.0  # rapidfuzz ratio, 0-100: an edit of a few lines in a page
COMPARED_CHARS = 4_000  # enough to tell copies apart, bounded for huge files
MAX_CANDIDATES = 20


def similarity(a: str, b: str) -> float:
    """rapidfuzz's normalised Indel similarity of the texts' beginnings, 0-100."""
    return fuzz.ratio(a[:COMPARED_CHARS], b[:COMPARED_CHARS])


def near_duplicates(
    conn: apsw.Connection, document_id: int, title: str, text: str
) -> tuple[tuple[int, float], ...]:
    """``(other_id, similarity)`` of the same-titled near-copies of a document; reads
    only, so the linking phase computes it outside its write transaction."""
    scored = (
        (other_id, similarity(text, other_text))
        for other_id, other_text in rows.near_duplicate_candidates(
            conn, document_id, title, MAX_CANDIDATES
        )
    )
    return tuple(
        (other_id, round(score, 1)) for other_id, score in scored if score >= NEAR_DUPLICATE
    )


def record_near_duplicates(
    conn: apsw.Connection, document_id: int, found: tuple[tuple[int, float], ...]
) -> None:
    """Record what ``near_duplicates`` found, each pair while its other document is
    still stored. Call inside ``db.write()``."""
    for other_id, score in found:
        rows.record_near_duplicate(conn, document_id, other_id, score)
