"""User text → ``Query``: the only place an FTS5 MATCH expression is built.

User text is data, never syntax. Every term becomes a double-quoted FTS5 string, so
``NEAR``, ``OR``, ``*``, ``-``, ``:``, ``^`` or parentheses in a query are words to look
for (or nothing), never operators. Worked examples (see ``tests/test_query.py``)::

    'how does getUserById work'   → "getUserById" OR "get" OR "User" OR "Id" OR "work"
    'NEAR(a b) -c'                → "NEAR" OR "b" OR "c"            ("a" is a stopword)
    '机器学习'                     → "机 器" OR "器 学" OR "学 习" OR "机" OR "器" OR "学" OR "习"
    '索引'                         → "索 引" OR "索" OR "引"
    '库'                           → "库"

- A CJK run becomes its overlapping two-character phrases, then its single characters
  (a run of one character stays that one phrase); function characters such as 的 / 是 / 吗
  are left out (``cjk_phrases``). The phrase text passes through ``index_copy`` – the same
  preparation the index got – so it addresses the per-character terms stored there.
- A camelCase word contributes itself and its parts (``split_identifier``), mirroring the
  index copy.
- English stopwords are dropped, unless that would leave nothing to search for.
- Terms are OR-ed: BM25 then ranks passages that match more (and rarer) terms higher.
  Requiring every term (AND) collapses recall on natural-language questions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kb_mcp.index.textprep import CJK_RUN, identifier_parts, index_copy
from kb_mcp.text.lexicon import CJK_STOP_CHARS, STOPWORDS

MAX_TERMS = 64  # bounds the cost of one MATCH; far above any real question


_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Query:
    """A prepared query: the terms searched for, and the one MATCH expression built from them."""

    text: str
    terms: tuple[str, ...]
    phrases: tuple[str, ...]

    @property
    def is_empty(self) -> bool:
        return not self.terms and not self.phrases

    def match_units(self) -> list[str]:
        """The strings the MATCH expression quotes, phrases first: what FTS5 will see."""
        # A CJK phrase goes through the index copy (one term per character); a Latin
        # term is one word already and is quoted as it is.
        return [" ".join(index_copy(p).split()) for p in self.phrases] + list(self.terms)

    def match_expression(self) -> str | None:
        """The FTS5 MATCH string, or None when there is nothing to search for."""
        return or_expression(self.match_units())


def or_expression(units: list[str]) -> str | None:
    """``units`` quoted and OR-ed; None for none."""
    return " OR ".join(quote_fts(u) for u in units) if units else None


def quote_fts(text: str) -> str:
    """One FTS5 string literal: wrapped in double quotes, inner quotes doubled."""
    return '"' + text.replace('"', '""') + '"'


def cjk_phrases(run: str) -> list[str]:
    """A CJK run → its overlapping two-character phrases, then its single characters.

    Bigrams give precision; single characters let a passage that words the same thing in
    another order, or with a character in between, still score (CMRC2018 dev +0.009
    nDCG@10 together with the function-character rule). Phrases holding a function
    character are left out, unless no bigram would be left.
    """
    if len(run) == 1:
        return [run]
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    kept = [b for b in bigrams if not (set(b) & CJK_STOP_CHARS)] or bigrams
    return kept + [c for c in run if c not in CJK_STOP_CHARS]


def _latin_terms(text: str) -> list[str]:
    terms: list[str] = []
    for word in _WORD.findall(text):
        terms.append(word)
        terms.extend(identifier_parts(word))
    return terms


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for item in items:
        key = item.lower()
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def parse_query(text: str) -> Query:
    """Prepare user text for the keyword leg. Never raises on any input."""
    phrases: list[str] = []
    for run in CJK_RUN.findall(text):
        phrases.extend(cjk_phrases(run))
    terms = _dedupe(_latin_terms(CJK_RUN.sub(" ", text)))
    content_terms = [t for t in terms if t.lower() not in STOPWORDS]
    if content_terms or phrases:
        terms = content_terms
    phrases = _dedupe(phrases)
    budget = max(0, MAX_TERMS - len(phrases[:MAX_TERMS]))
    return Query(text=text, terms=tuple(terms[:budget]), phrases=tuple(phrases[:MAX_TERMS]))


# A term held by more than this share of all passages adds almost nothing to bm25 (its
# IDF is under 1.2, against 8-10 for a rare term) but makes FTS5 score most of the
# index: dropped from the MATCH once a library is large enough for that to cost time.
COMMON_SHARE = 0.5
COMMON_MIN_CHUNKS = 2_000


def without_common_units(query: Query, unit_df: Mapping[str, int], chunks: int) -> Query:
    """``query`` minus the terms and phrases in more than ``COMMON_SHARE`` of ``chunks``.

    ``unit_df`` maps each term / phrase to its document frequency. Small libraries, and
    queries made only of common words, are returned unchanged.
    """
    if chunks < COMMON_MIN_CHUNKS:
        return query
    limit = COMMON_SHARE * chunks
    phrases = tuple(p for p in query.phrases if unit_df.get(p, 0) <= limit)
    terms = tuple(t for t in query.terms if unit_df.get(t, 0) <= limit)
    if not phrases and not terms:
        return query
    return Query(query.text, terms, phrases)
