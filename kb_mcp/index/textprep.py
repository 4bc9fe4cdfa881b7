"""The index copy of text: the one place that decides what the FTS tokenizer sees.

Stored and returned text is never altered; only the copy handed to FTS5 is prepared, and
queries go through the very same preparation (``search/query.py`` calls ``index_copy`` on
every phrase it quotes), so index and query agree by construction.

Two things are added to what FTS5's ``unicode61`` tokenizer would see on its own:

- **CJK boundaries.** ``unicode61`` classifies ideographs and kana as letters, so a
  spaceless Chinese or Japanese clause would become ONE token that no query can address
  inside. The copy puts a space around every ideograph / kana, so each is its own term
  and a query run can be matched as a phrase of characters (exact substring matching).
  Hangul is left alone: modern Korean separates words with spaces.
- **Identifier parts.** ``getUserById`` is kept whole (so the identifier itself matches)
  and followed by its parts ``get User By Id``, so ``user id lookup`` finds it.
  ``snake_case`` and ``dotted.names`` need nothing: the tokenizer already splits at ``_``
  and ``.``.

``TEXTPREP_VERSION`` names this representation, together with ``FTS_TOKENIZER``. It is
stored in the database; a change here is migrated lazily by the first reader
(``index/fts.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache

TEXTPREP_VERSION = 3

# Porter stemming over unicode61 (diacritics folded). Porter only rewrites ASCII
# lowercase word endings; single CJK characters pass through unchanged.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

# Ideographs (BMP, extension A, compatibility, supplementary planes B-G), kana and
# half-width katakana. Hangul (AC00-D7AF) is deliberately absent.
_CJK_CLASS = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0003134f"  # CJK extensions B-H
)
CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")

# A word that mixes case inside itself: camelCase, PascalCase with a lower part, HTTPServer,
# mContext. Bounded by anything that is not an ASCII letter or digit (not ``\b``: CJK
# characters and ``_`` count as word characters there, and both may touch an identifier).
_CAMEL_WORD = re.compile(
    r"(?<![A-Za-z0-9])(?=[A-Za-z])[A-Za-z0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z])[A-Za-z0-9]*"
    r"(?![A-Za-z0-9])"
)
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_identifier(word: str) -> list[str]:
    """``getHTTPResponse2`` → ``['get', 'HTTP', 'Response', '2']``."""
    return _CAMEL_PART.findall(word)


def identifier_parts(word: str) -> list[str]:
    """The parts the index copy adds after ``word``: [] unless it is a camelCase word.

    Index and query both call this, so a query term contributes exactly the parts the
    index holds for the same word (``utf8`` stays whole on both sides).
    """
    if _CAMEL_WORD.fullmatch(word) is None:
        return []
    parts = split_identifier(word)
    return parts if len(parts) > 1 else []


# Cheap pre-check: most prose holds no case change inside a word at all. It is
# ``[a-z0-9][A-Z]|[A-Z][A-Z][a-z]`` written to start only at capitals, which makes it about
# five times faster on prose (measured on generated notes, issue #4).
_CASE_CHANGE = re.compile(r"[A-Z](?:(?<=[a-z0-9][A-Z])|(?=[a-z])(?<=[A-Z][A-Z]))")


def index_copy(text: str) -> str:
    """The text FTS5 indexes: CJK characters spaced apart, camelCase words followed by parts."""
    if _CASE_CHANGE.search(text) is not None:
        text = _with_identifier_parts(text)
    if text.isascii() or CJK_CHAR.search(text) is None:
        return text
    return CJK_RUN.sub(_spaced_run, text)


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]*")
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _with_identifier_parts(text: str) -> str:
    """Each ``_CAMEL_WORD`` of ``text`` followed by its parts (``identifier_parts``).

    Found from its case changes, not by ``_CAMEL_WORD.sub``: that pattern backtracks
    through every word looking for a change inside it, and was 95% of ``index_copy``'s
    CPU on code (6.2 of 6.4 s for the 67,168 chunks of the real 10k folder; 2.6 s this
    way). A camelCase word is a whole run of ASCII letters and digits that starts with a
    letter and holds a case change, so each change ``_CASE_CHANGE`` finds is widened to
    its run, backwards over the reversed text.
    """
    pieces, done, size = [], 0, len(text)
    reversed_text = text[::-1]
    for change in _CASE_CHANGE.finditer(text):
        at = change.start()
        if at < done:
            continue  # another change of the word just read
        start = size - _ALNUM_RUN.match(reversed_text, size - at).end()
        end = _ALNUM_RUN.match(text, at).end()
        if text[start] in _ASCII_LETTERS:
            pieces += [text[done:start], _word_with_parts(text[start:end])]
            done = end
    return "".join([*pieces, text[done:]]) if pieces else text


@lru_cache(maxsize=4096)
def _word_with_parts(word: str) -> str:
    """A camelCase word and its parts (code repeats its names: one split per name)."""
    parts = split_identifier(word)
    return f"{word} {' '.join(parts)}" if len(parts) > 1 else word


def _spaced_run(match: re.Match[str]) -> str:
    """A run of CJK characters, each with a space on either side: the same text as each
    character spaced on its own (``" 北 "`` + ``" 京 "``), one Python call per run instead
    of per character (482k calls, a third of ``index_copy``'s CPU, on the bench perf
    corpus's CMRC2018 passages; cProfile of the reader processes, issue 10)."""
    return " " + "  ".join(match.group(0)) + " "
