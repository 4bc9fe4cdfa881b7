"""The entity extractor as it was before the single-pass tally and word view (extractor
version "heuristic 5", main at 7786654): the oracle ``tests/test_extract_equal.py``
checks ``kb_mcp.graph.extract`` against. Its algorithm is kept only here, unchanged; its
patterns, caps and weights are the extractor's (imported below): a speed change to the
extractor must give exactly this output.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import NamedTuple

# The patterns, caps and weights are the extractor's own, unchanged by the rewrite this
# oracle checks (only its algorithm, and ``_UNIT_BREAK``'s backtracking, changed): imported,
# so a rule changed later is changed in one place and the test keeps comparing algorithms.
from kb_mcp.graph.extract import (
    _ACRONYM,
    _BACKTICK,
    _BOLD,
    _CAMEL,
    _CAPITALISED,
    _CJK_QUOTED,
    _CJK_RUN,
    _DEFINITION,
    _DOTTED,
    _HANDLE,
    _ISSUE,
    _KEBAB,
    _OPENERS,
    _PROPER,
    _SENTENCE_END,
    _SHOUTED,
    _SNAKE,
    _TAG,
    _TICKET,
    _URL,
    _VERSION,
    HEADING_BONUS,
    HEADING_PAIRS,
    KIND_RANK,
    KIND_WEIGHT,
    MAX_CANDIDATES,
    MAX_HEADING_WORDS,
    MAX_MENTIONS,
    MAX_PAIRS,
    MAX_SURFACE,
    PAIR_ENTITIES,
)
from kb_mcp.graph.resolve import entity_key

_UNIT_BREAK = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-*+|>]|\d+[.)])[ \t])")


class Mention(NamedTuple):
    """One entity in one chunk: its key, the spelling seen, its kind and weight.

    A tuple, not a dataclass: a sync's extractions are pickled in the reader processes
    and unpickled in the writer, and a frozen dataclass unpickles through a Python
    ``__setstate__`` per object (13 µs each: 1.0 s of the writer's CPU for the 78k
    mentions of /work/research/realcorpus, ``/tmp`` pickle round trip of its chunks)."""

    key: str
    surface: str
    kind: str
    weight: float


@dataclass(frozen=True, slots=True)
class Extraction:
    """What one chunk says: its mentions (heaviest first) and co-mention pairs (ordered)."""

    mentions: list[Mention]
    pairs: list[tuple[str, str]]

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled as plain tuples (see ``Mention``): 0.3 s instead of 1.9 s to pickle and
        unpickle the realcorpus's extractions."""
        return _unpickle, ([tuple(m) for m in self.mentions], self.pairs)


def _unpickle(mentions: list[tuple[str, str, str, float]], pairs: list) -> Extraction:
    return Extraction([_new_tuple(Mention, m) for m in mentions], pairs)


_new_tuple = tuple.__new__


class _Tally:
    """Occurrences per key, the strongest kind and its spelling, heading keys, and the
    keys of each unit (paragraph, list item, table row)."""

    def __init__(self, unit_starts: Sequence[int] = (0,)) -> None:
        self.count: dict[str, int] = {}
        self.surface: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self.heading: set[str] = set()
        self.starts = unit_starts
        self.units: list[set[str]] = [set() for _ in unit_starts]

    def add(self, surface: str, kind: str, at: int = 0, *, heading: bool = False) -> None:
        cleaned = _cleaned(surface) if len(surface) <= _CACHED_CHARS else _clean(surface)
        if cleaned is None:
            return
        surface, key = cleaned
        count = self.count
        seen = count.get(key)
        if seen is None:
            if len(count) >= MAX_CANDIDATES:
                return
            count[key] = 1
            self.surface[key] = surface
            self.kind[key] = kind
        else:
            count[key] = seen + 1
            held = self.kind[key]
            if kind != held or surface != self.surface[key]:
                rank, held_rank = KIND_RANK[kind], KIND_RANK[held]
                if rank < held_rank or (rank == held_rank and surface < self.surface[key]):
                    self.kind[key] = kind
                    self.surface[key] = surface
        if heading:
            self.heading.add(key)
        elif len(self.units) == 1:
            self.units[0].add(key)
        else:
            self.units[bisect_right(self.starts, at) - 1].add(key)

    def mentions(self) -> list[Mention]:
        """The heaviest ``MAX_MENTIONS`` (ties by key); only those become ``Mention``."""
        heading, kinds = self.heading, self.kind
        ranked = sorted(
            (-_weight(kinds[key], count, key in heading), key) for key, count in self.count.items()
        )[:MAX_MENTIONS]
        return [Mention(key, self.surface[key], kinds[key], -weight) for weight, key in ranked]

    def pairs(self, kept: list[Mention]) -> list[tuple[str, str]]:
        """Co-mention pairs among the kept mentions: within each unit, and heading ×
        body. Deterministic, so re-extracting a chunk takes back exactly its pairs.

        A unit's pairs are ``combinations`` of its keys in key order (each pair then
        comes ordered, with no Python call per pair)."""
        rank = {m.key: i for i, m in enumerate(kept)}
        by_rank = rank.__getitem__
        found: set[tuple[str, str]] = set()
        body: set[str] = set()
        for unit in self.units:
            top = [k for k in unit if k in rank]
            body.update(top)
            if len(top) > 1:
                if len(top) > PAIR_ENTITIES:
                    top.sort(key=by_rank)
                    del top[PAIR_ENTITIES:]
                top.sort()
                found.update(combinations(top, 2))
        headings = sorted((k for k in self.heading if k in rank), key=by_rank)
        if headings:
            named = sorted(body - self.heading, key=by_rank)[:HEADING_PAIRS]
            found.update((h, b) if h < b else (b, h) for h in headings for b in named)
            found.update(combinations(sorted(headings), 2))
        if len(found) <= MAX_PAIRS:
            return sorted(found)
        heaviest = sorted([(by_rank(a) + by_rank(b), a, b) for a, b in found])[:MAX_PAIRS]
        return sorted([(a, b) for _r, a, b in heaviest])


def _clean(surface: str) -> tuple[str, str] | None:
    """A match's spelling (trimmed) and key, or None when it is too short or too long."""
    surface = surface.strip().rstrip(".")
    if len(surface) < 2 or len(surface) > MAX_SURFACE:
        return None
    key = entity_key(surface)
    return (surface, key) if len(key) >= 2 else None


# Spellings repeat within a chunk and across a library, so ``_clean`` is cached for the
# short ones a name can be (a longer match is only trimmed to be rejected, and caching
# it would let one hostile file fill the cache with long strings).
_CACHED_CHARS = MAX_SURFACE + 8
_cleaned = lru_cache(maxsize=32_768)(_clean)


@lru_cache(maxsize=4_096)
def _weight(kind: str, count: int, heading: bool) -> float:
    """A mention's weight: its kind's, growing with the log of its count, plus the
    heading bonus; rounded, so that ties (and the order they give) are stable."""
    bonus = HEADING_BONUS if heading else 0.0
    return round(KIND_WEIGHT[kind] * (1.0 + math.log(count)) + bonus, 3)


def _ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _sentence_start(text: str, index: int) -> bool:
    """Whether the word at ``index`` opens a sentence, a line or a list item."""
    i = index - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END or text[i].isdigit()


def _names(tally: _Tally, text: str) -> None:
    """Multi-word proper nouns, then capitalised words inside sentences."""
    taken: set[int] = set()
    for match in _PROPER.finditer(text):
        words = match.group().split()
        if words[0] in _OPENERS:
            words = words[1:]
        if len(words) >= 2:
            tally.add(" ".join(words), "name", match.start())
            taken.update(range(match.start(), match.end()))
        elif words and not _sentence_start(text, match.start()):
            tally.add(words[0], "name", match.start())
    for match in _CAPITALISED.finditer(text):
        word = match.group()
        if match.start() in taken or word in _OPENERS:
            continue
        if not _sentence_start(text, match.start()):
            tally.add(word, "name", match.start())


def _all(tally: _Tally, pattern: re.Pattern[str], text: str, kind: str, group: int = 0) -> None:
    add = tally.add
    for match in pattern.finditer(text):
        add(match.group(group), kind, match.start())


# What each pattern cannot match without: a chunk lacking it skips that pass (most prose
# has no ``_``, backtick, ``#`` or ``@``). A cheap substring test (or search), never a
# change in what is found: every match of the pattern contains one of these strings.
_DEFINING_WORDS = ("def", "class", "fn", "func", "interface", "struct")
_CJK_OPENERS = tuple("「『“《【")
# Every ``_CAMEL`` match holds a lowercase letter or digit followed by an uppercase one;
# two thirds of the realcorpus's prose chunks hold none, and this search is a quarter of
# the pattern's cost (its first character is a set ``re`` skips ahead to).
_CAMEL_GATE = re.compile(r"[a-z0-9][A-Z]")


_Gate = tuple[str, ...] | re.Pattern[str]
_CODE_PASSES: tuple[tuple[re.Pattern[str], str, int, _Gate], ...] = (
    (_TICKET, "id", 0, ("-",)),
    (_VERSION, "version", 0, ("v",)),
    (_DOTTED, "code", 0, (".",)),
    (_DEFINITION, "code", 1, _DEFINING_WORDS),
    (_BACKTICK, "code", 1, ("`",)),
)
_BODY_PASSES: tuple[tuple[re.Pattern[str], str, int, _Gate], ...] = (
    (_TICKET, "id", 0, ("-",)),
    (_ISSUE, "id", 0, ("#",)),
    (_VERSION, "version", 0, ("v",)),
    (_HANDLE, "handle", 0, ("@",)),
    (_TAG, "tag", 0, ("#",)),
    (_SNAKE, "code", 0, ("_",)),
    (_CAMEL, "code", 0, _CAMEL_GATE),
    (_DOTTED, "code", 0, (".",)),
    (_KEBAB, "code", 0, ("-",)),
    (_BACKTICK, "code", 1, ("`",)),
    (_DEFINITION, "code", 1, _DEFINING_WORDS),
)


def _passes(
    tally: _Tally, text: str, passes: tuple[tuple[re.Pattern[str], str, int, _Gate], ...]
) -> None:
    for pattern, kind, group, needs in passes:
        if isinstance(needs, re.Pattern):
            if needs.search(text):
                _all(tally, pattern, text, kind, group)
        elif any(need in text for need in needs):
            _all(tally, pattern, text, kind, group)


def _source_code(tally: _Tally, text: str) -> None:
    """A chunk of a source file: what it defines, dotted names (imports, attributes),
    ids and versions in its comments. Every identifier a function body uses is not an
    entity of the library: they cost two thirds of ingest on the real corpus and name
    nothing a person looks up (``self``, ``value``, ``result``)."""
    _passes(tally, text, _CODE_PASSES)


def _body(tally: _Tally, text: str) -> None:
    """Every pattern once over the whole chunk; each match lands in its unit."""
    _passes(tally, text, _BODY_PASSES)
    for match in _ACRONYM.finditer(text):
        surface = match.group()
        if surface not in _SHOUTED and not surface.isdigit():
            tally.add(surface, "acronym", match.start())
    _names(tally, text)
    if "**" in text:
        for match in _BOLD.finditer(text):
            tally.add(match.group(1), "term", match.start())
            _cjk_terms(tally, match.group(1), match.start())
    if any(opener in text for opener in _CJK_OPENERS):
        for match in _CJK_QUOTED.finditer(text):
            _cjk_terms(tally, match.group(1), match.start())


def _cjk_terms(tally: _Tally, text: str, at: int = 0, *, heading: bool = False) -> None:
    for run in _CJK_RUN.findall(text):
        tally.add(run, "cjk", at, heading=heading)


def _without_urls(text: str) -> str:
    """``text`` with each URL blanked to spaces of its length: offsets (and so units) stay."""
    if "://" not in text:
        return text
    return _URL.sub(lambda match: " " * len(match.group()), text)


def extract(text: str, heading_path: Sequence[str] = (), *, code: bool = False) -> Extraction:
    """The entities one chunk mentions (heaviest first, at most ``MAX_MENTIONS``) and
    the pairs of them it states together; ``code`` for a chunk of a source file."""
    breaks = _UNIT_BREAK.finditer(text) if "\n" in text else ()
    tally = _Tally([0] + [m.end() for m in breaks])
    for heading in heading_path:
        if heading and len(heading) <= 60 and len(heading.split()) <= MAX_HEADING_WORDS:
            tally.add(heading, "term", heading=True)
        _cjk_terms(tally, heading, heading=True)
    (_source_code if code else _body)(tally, _without_urls(text))
    kept = tally.mentions()
    return Extraction(kept, tally.pairs(kept))
