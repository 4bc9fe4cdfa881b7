"""FTS5's own tokenizer without an FTS5 table: the PostgreSQL store's keyword terms.

The PostgreSQL store must key a passage by exactly the terms the SQLite store's FTS5
table holds, or its scores would differ. Its tokenizer is not re-implemented: FTS5's is
reachable through apsw on an in-memory SQLite connection that holds no table (the same
SQLite library, the same ``porter unicode61`` code), one per thread as a tokenizer
belongs to its connection.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

import apsw

from kb_mcp.index.bm25 import passage_terms
from kb_mcp.index.textprep import FTS_TOKENIZER, index_copy

_local = threading.local()


def _tokenizer() -> apsw.FTS5Tokenizer:
    tokenizer = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        _local.conn = apsw.Connection(":memory:")
        name, *args = FTS_TOKENIZER.split()
        tokenizer = _local.tokenizer = _local.conn.fts5_tokenizer(name, args)
    return tokenizer


def _tokenize(text: str, reason: int) -> list[str]:
    return _tokenizer()(
        text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False
    )


def document_tokens(text: str) -> list[str]:
    """The terms FTS5 stores for a column whose index copy is ``text``."""
    return _tokenize(text, apsw.FTS5_TOKENIZE_DOCUMENT)


def query_tokens(unit: str) -> list[str]:
    """The tokens FTS5 makes of ``unit`` quoted in a MATCH expression."""
    return _tokenize(unit, apsw.FTS5_TOKENIZE_QUERY)


def text_tokens(text: str) -> list[str]:
    """``FtsIndex.tokens``: the index copy of ``text``, then the tokenizer."""
    return document_tokens(index_copy(text))


@dataclass(slots=True)
class PassageTerms:
    """One indexed row as bm25 reads it: each column's token count (FTS5's column size)
    and each key's count per column (``bm25.passage_terms``: tokens and CJK bigrams)."""

    head_tokens: int
    body_tokens: int
    head: Counter[str]
    body: Counter[str]


def passage(head: str, body: str) -> PassageTerms:
    """The terms of a row ``(head, body)`` made by ``columns.index_row``."""
    head_tokens = document_tokens(head)
    body_tokens = document_tokens(body)
    return PassageTerms(
        len(head_tokens),
        len(body_tokens),
        passage_terms(head_tokens, head),
        passage_terms(body_tokens, body),
    )
