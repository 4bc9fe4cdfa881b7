"""FTS5's bm25, computed outside FTS5: one formula for every index that scores it.

Two indexes rank passages without FTS5 yet must give its scores to the last bit: the
SQLite store's postings segment (``index/postings.py``) and the PostgreSQL store's
keyword index (``index/postgres/keyword.py``). Both key a passage's terms the same way
(``passage_terms``, ``segment_key``) and score them with the functions below, whose
arithmetic is written in the order of FTS5's C code (sqlite ``ext/fts5/fts5_aux.c``), so
the two stores cannot drift apart from FTS5 or from each other. The functions work on
floats and on numpy arrays alike.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

from kb_mcp.index.textprep import CJK_RUN

# FTS5's bm25 constants (sqlite ext/fts5/fts5_aux.c): the score here is its own formula.
BM25_K1 = 1.2
BM25_B = 0.75

Number = TypeVar("Number")  # a float, or a numpy array of them


def bm25_idf(df: int, rows: int) -> float:
    """FTS5's idf: ``log((N - n + 0.5) / (n + 0.5))``, clamped to 1e-6 when not positive."""
    idf = math.log((rows - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6


def length_norm(length: Number, avgdl: float) -> Number:
    """``k1 * (1 - b + b * D / avgdl)`` for a passage of ``length`` tokens."""
    return BM25_K1 * ((1 - BM25_B) + (BM25_B * length) / avgdl)  # type: ignore[operator]


def term_score(idf: float, freq: Number, norm: Number) -> Number:
    """One phrase's share of a passage's bm25: ``freq`` is its column-weighted count."""
    return idf * ((freq * (BM25_K1 + 1.0)) / (freq + norm))  # type: ignore[operator]


def passage_terms(tokens: Sequence[str], text: str) -> Counter[str]:
    """A column's terms and counts as the segment keys them: each token, and each pair of
    adjacent one-character CJK tokens as ``"a b"`` (the bigram phrases of a query).
    ``text`` is the column's index copy: without a CJK character in it there is no pair
    to look for."""
    counts = Counter(tokens)
    if CJK_RUN.search(text) is None:
        return counts
    cjk = [len(t) == 1 and CJK_RUN.match(t) is not None for t in tokens]
    counts.update(
        f"{a} {b}"
        for a, b, ca, cb in zip(tokens, tokens[1:], cjk, cjk[1:], strict=False)
        if ca and cb
    )
    return counts


def segment_key(tokens: Sequence[str]) -> str | None:
    """The postings key of a query phrase made of ``tokens``, or None when the segment
    cannot answer it (a longer phrase, or two tokens that are not CJK characters)."""
    if len(tokens) == 1:
        return tokens[0]
    if len(tokens) == 2 and all(len(t) == 1 and CJK_RUN.match(t) for t in tokens):
        return f"{tokens[0]} {tokens[1]}"
    return None
