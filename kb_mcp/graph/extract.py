"""The heuristic entity extractor: a chunk → the named things it mentions. Pure, no LLM.

What counts as an entity is what a person would look up by name: code identifiers
(``CamelCase``, ``snake_case``, dotted names, ``def`` / ``class`` names, anything in
backticks, which is where CLI commands and config keys are written), multi-word proper
nouns (``Team Atlas``) and capitalised names inside a sentence, acronyms, @handles,
ticket / ADR / issue / version ids (``OPS-1042``, ``ADR-0012``, ``#123``, ``v2.3.1``),
tags (``#search-oncall``), bold terms and headings, and CJK terms.

CJK terms are the runs of CJK characters in headings, bold text and quotes (「」『』“”
《》【】), not frequent bigrams: a bigram count needs the whole library (it is not a
property of one chunk, so removing a document would change other chunks' entities), and
in the CMRC2018 contexts the marked runs are names and terms while the frequent bigrams
are mostly function words (这个, 一个, 可以).

Bounded for hostile text: a surface longer than ``MAX_SURFACE`` characters is no entity,
a chunk keeps at most ``MAX_MENTIONS`` entities (the heaviest), and counting stops taking
new names after ``MAX_CANDIDATES`` distinct ones, so a chunk of 10,000 identifiers costs
one linear regex pass and 48 rows.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, repeat
from operator import add, itemgetter
from typing import NamedTuple

from kb_mcp.graph.resolve import entity_key

# Bumped whenever what is extracted changes: the stored graph is then rebuilt.
EXTRACTOR_VERSION = "heuristic 5"  # 5: nothing inside a URL
MAX_SURFACE = 80
MAX_MENTIONS = 48
MAX_CANDIDATES = 1_000
# Co-mention is counted where a statement is made, not across a whole chunk: within one
# unit (a paragraph, a list item, a table row), and between a chunk's headings and what
# its body names. A chunk holding a table of eleven systems and four owning teams would
# otherwise link every system to every team (the golden2 systems register). The
# heaviest ``PAIR_ENTITIES`` of a unit are paired, and a chunk adds at most
# ``MAX_PAIRS`` relation rows.
PAIR_ENTITIES = 8
HEADING_PAIRS = 16  # body entities each heading entity is paired with, heaviest first
MAX_PAIRS = 64
MAX_HEADING_WORDS = 4  # a longer heading is a sentence ("Your first day"), not a name

# Kinds, strongest first: when two spellings of one key disagree, the stronger kind names
# the entity (a backticked `BlobStore` is code even where prose writes "Blob Store").
KINDS = ("id", "version", "handle", "tag", "code", "name", "acronym", "term", "cjk")
KIND_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
KIND_WEIGHT = {
    "id": 2.0,
    "version": 1.5,
    "handle": 2.0,
    "tag": 1.5,
    "code": 1.5,
    "name": 1.0,
    "acronym": 1.0,
    "term": 1.0,
    "cjk": 1.0,
}
HEADING_BONUS = 1.0

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]{{2,12}}")
_CJK_QUOTED = re.compile(r"[「『“《【]([^」』”》】\n]{2,24})[」』”》】]")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_BOLD = re.compile(r"\*\*([^*\n]{2,60})\*\*")
# Each pattern opens with the character it needs, and a lookbehind in place of the
# leading ``\b`` / ``(?<!…)``: the same matches, but ``re`` can skip ahead to that
# character instead of trying every position (5-20x faster per pattern on the chunks of
# /work/research/realcorpus; an uppercase or a ``#`` / ``@`` / ``v`` is rare, a lowercase
# letter is not, so the lowercase-led patterns keep their ``\b``). A run that the next
# item can never continue is possessive (``*+``, ``++``): giving characters back cannot
# make a match (a ``\b`` between two word characters, an ``_`` / ``.`` / ``-`` the run
# does not hold), so the same matches, without retrying each word's every length (the
# four lowercase-led patterns 25-40 % faster on the same chunks).
_TICKET = re.compile(r"[A-Z](?<!\w[A-Z])[A-Z0-9]{1,9}-\d{1,6}\b")
_ISSUE = re.compile(r"#(?<![\w#&/]#)\d{1,7}\b")
_VERSION = re.compile(r"v(?<!\wv)\d+(?:\.\d+){1,3}\b")
_HANDLE = re.compile(r"@(?<![\w.@]@)[A-Za-z0-9][A-Za-z0-9_-]{1,38}")
_TAG = re.compile(r"#(?<![\w#&/]#)[A-Za-z][\w/-]{1,40}")
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*+(?:_[A-Za-z0-9]++)+\b")
_CAMEL = re.compile(r"\b(?:[a-z]++[A-Z]|[A-Z][a-z0-9]++[A-Z])[A-Za-z0-9]*+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]++(?:\.[A-Za-z_][A-Za-z0-9_]++)+\b")
_DEFINITION = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func|interface|struct)"
    r"[ \t]+([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE,
)
# ``_DEFINITION`` after a newline, for every line but the first (``_definitions``): led
# by the literal ``\n``, so ``re`` jumps from line to line instead of trying ``^`` at
# every character (a sixth of extraction's regex time on the realcorpus's code chunks),
# and the indentation run possessive (a keyword never starts inside it).
_DEFINITION_AFTER_NEWLINE = re.compile(
    r"\n[ \t]*+(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func|interface|struct)"
    r"[ \t]+([A-Za-z_][A-Za-z0-9_]*)"
)
_UPPER = "A-ZÀ-ÖØ-Þ"
_LOWER = "a-zß-öø-ÿ"
_PROPER = re.compile(
    f"[{_UPPER}](?<!\\w[{_UPPER}])[{_LOWER}0-9]+(?:[ \\t]+[{_UPPER}][{_LOWER}0-9]+)+\\b"
)
_CAPITALISED = re.compile(f"[{_UPPER}](?<!\\w[{_UPPER}])[{_LOWER}]{{2,}}\\b")
# kebab-case names: services, packages, CLI tools and flags as prose writes them
# (tap-gateway, board-renderer, sso-broker), with at least one letter per part.
_KEBAB = re.compile(r"\b[a-z][a-z0-9]*+(?:-[a-z][a-z0-9]*+)+\b")
# A URL names a place, not a thing: its host, path and query are no entities. Its query
# may also carry data an exfiltration link smuggles out (``?d=<base64>``), which output
# redaction removes with the link but an entity name would keep (the web view showed one).
_URL = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}://[^\s<>()\[\]`'\"]+", re.IGNORECASE)
_SCHEME_CHARS = (
    16  # the longest scheme ``_URL`` takes: a URL starts at most this far before its ``://``
)
# A blank line, or a newline before a list item, table row or quote. The runs are
# possessive (a space given back is never the ``\n``, marker or digit that follows), so a
# deeply indented line of code is not re-read once per space on each failing branch.
_UNIT_BREAK = re.compile(r"\n(?:[ \t]*+\n|(?=[ \t]*+(?:[-*+|>]|\d++[.)])[ \t]))")
_ACRONYM = re.compile(r"[A-Z](?<!\w[A-Z])[A-Z0-9]{1,9}\b(?!-\d)")
# Capitalised words that open a phrase without naming anything ("The Search Cluster").
_OPENERS = frozenset(
    "The A An This That These Those Our Your My Its Their Each Every All Any Some No "
    "When If In On At For From To By With And Or But So As Then Now See Use Note".split()
)
# Shouted words that are not names.
_SHOUTED = frozenset("TODO NOTE FIXME XXX WARNING IMPORTANT OK AND OR NOT THE TBD FAQ".split())
_SENTENCE_END = frozenset(".!?:;\n#*->|`\"'([")


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


# Kinds by rank, as the tally stores them (an int compares faster than a name's rank).
_ID, _VERSION_KIND, _HANDLE_KIND, _TAG_KIND, _CODE, _NAME, _ACRONYM_KIND, _TERM, _CJK_KIND = (
    KIND_RANK[kind] for kind in KINDS
)
_RANK_WEIGHT = tuple(KIND_WEIGHT[kind] for kind in KINDS)

# Where a match lands: ``bisect_right(unit_starts, offset)``, 1 for the first unit (every
# chunk's first unit starts at 0, and each later start is past 0), so slot 0 is free for
# the headings: a heading's entity is in no unit.
_HEADING = 0
_FIRST_UNIT = 1
_Found = Iterable[tuple[int, str]]  # (slot, spelling as matched), in the order matched


class _Tally:
    """Occurrences per key, the strongest kind and its spelling, heading keys, and the
    keys of each unit (paragraph, list item, table row).

    One list per key (``[count, spelling, kind rank]``) and matches added a pass at a
    time (``add_all``): one dict lookup and no Python call per match, where three dicts
    and a method call per match were a third of extraction's Python time.
    """

    __slots__ = ("entries", "slots", "starts")

    def __init__(self, unit_starts: list[int]) -> None:
        self.entries: dict[str, list] = {}
        self.starts = unit_starts
        # slots[0]: the heading keys; slots[1:]: each unit's keys, in unit order.
        self.slots: list[set[str]] = [set() for _ in range(len(unit_starts) + 1)]

    def add_all(self, found: _Found, rank: int) -> None:
        """Count each match of one kind. A key new once ``MAX_CANDIDATES`` are held is
        dropped; the kind and spelling kept are the strongest kind's smallest spelling
        (so the order of matches decides only which keys the cap drops)."""
        entries, slots = self.entries, self.slots
        for slot, matched in found:
            cleaned = _cleaned(matched) if len(matched) <= _CACHED_CHARS else _clean(matched)
            if cleaned is None:
                continue
            surface, key = cleaned
            entry = entries.get(key)
            if entry is None:
                if len(entries) >= MAX_CANDIDATES:
                    continue
                entries[key] = [1, surface, rank]
            else:
                entry[0] += 1
                if rank < entry[2] or (rank == entry[2] and surface < entry[1]):
                    entry[1] = surface
                    entry[2] = rank
            slots[slot].add(key)

    def add(self, slot: int, matched: str, rank: int) -> None:
        self.add_all(((slot, matched),), rank)

    def mentions(self) -> list[Mention]:
        """The heaviest ``MAX_MENTIONS`` (ties by key); only those become ``Mention``."""
        heading = self.slots[_HEADING]
        ranked = sorted(
            [
                (-_weight(rank, count, key in heading), key, surface, rank)
                for key, (count, surface, rank) in self.entries.items()
            ]
        )  # keys differ, so the order is the weight's, then the key's
        del ranked[MAX_MENTIONS:]
        return [
            _new_tuple(Mention, (key, surface, KINDS[rank], -weight))
            for weight, key, surface, rank in ranked
        ]

    def pairs(self, kept: list[Mention]) -> list[tuple[str, str]]:
        """Co-mention pairs among the kept mentions: within each unit, and heading ×
        body. Deterministic, so re-extracting a chunk takes back exactly its pairs.

        A unit's pairs are ``combinations`` of its keys in key order, a heading's pairs
        with the body are the keys below it and above it (``bisect``), and the heaviest
        pairs are chosen by sorting ``(rank sum, pair)``: each pair comes ordered, made
        in C, with no Python call per pair (the pairs were a sixth of extraction).
        """
        rank = dict(zip(map(_KEY, kept), range(len(kept)), strict=True))
        by_rank = rank.__getitem__
        found: set[tuple[str, str]] = set()
        heading, units = self.slots[_HEADING], self.slots[_FIRST_UNIT:]
        every = len(kept) == len(self.entries)  # most chunks: no unit key was dropped
        body: set[str] = set().union(*units) if every else set()
        for unit in units:
            top = unit if every else [k for k in unit if k in rank]
            if not every:
                body.update(top)
            if len(top) > 1:
                if len(top) > PAIR_ENTITIES:
                    top = sorted(top, key=by_rank)[:PAIR_ENTITIES]
                found.update(combinations(sorted(top), 2))
        headings = sorted((k for k in heading if k in rank), key=by_rank)
        if headings:
            named = sorted(sorted(body - heading, key=by_rank)[:HEADING_PAIRS])
            for h in headings:  # no heading key is in ``named``
                below = bisect_right(named, h)
                found.update(zip(named[:below], repeat(h)))
                found.update(zip(repeat(h), named[below:]))
            found.update(combinations(sorted(headings), 2))
        if len(found) <= MAX_PAIRS:
            return sorted(found)
        listed = list(found)
        sums = map(add, map(by_rank, map(_KEY, listed)), map(by_rank, map(_SECOND, listed)))
        heaviest = sorted(zip(sums, listed, strict=True))[:MAX_PAIRS]  # sum, then a, then b
        return sorted(map(_SECOND, heaviest))


_KEY = itemgetter(0)
_SECOND = itemgetter(1)


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
def _weight(rank: int, count: int, heading: bool) -> float:
    """A mention's weight: its kind's, growing with the log of its count, plus the
    heading bonus; rounded, so that ties (and the order they give) are stable."""
    bonus = HEADING_BONUS if heading else 0.0
    return round(_RANK_WEIGHT[rank] * (1.0 + math.log(count)) + bonus, 3)


def _ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _sentence_start(text: str, index: int) -> bool:
    """Whether the word at ``index`` opens a sentence, a line or a list item."""
    i = index - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END or text[i].isdigit()


_match_start = re.Match.start
_GROUP = (itemgetter(0), itemgetter(1))


def _found(starts: list[int], pattern: re.Pattern[str], text: str, group: int) -> _Found:
    """Each match of ``pattern`` (its ``group``) with the slot of the unit it starts in,
    made by ``map`` and ``zip`` in C rather than a Python loop per match."""
    if len(starts) == 1:  # one unit: ``findall`` gives the group without match objects
        return zip(repeat(_FIRST_UNIT), pattern.findall(text))
    matches = list(pattern.finditer(text))
    slots = map(bisect_right, repeat(starts), map(_match_start, matches))
    return zip(slots, map(_GROUP[group], matches), strict=True)


def _definitions(starts: list[int], text: str) -> _Found:
    """``_DEFINITION``'s matches: on the first line, then after each newline (the same
    matches and units: a match never holds a newline, so it is one line's)."""
    first = _DEFINITION.match(text)
    found = [(_FIRST_UNIT, first[1])] if first else []
    found.extend(
        (bisect_right(starts, match.start() + 1), match[1])
        for match in _DEFINITION_AFTER_NEWLINE.finditer(text)
    )
    return found


def _names(starts: list[int], text: str) -> _Found:
    """Multi-word proper nouns, then capitalised words inside sentences."""
    found: list[tuple[int, str]] = []
    taken: set[int] = set()
    for match in _PROPER.finditer(text):
        words = match[0].split()
        if words[0] in _OPENERS:
            words = words[1:]
        start = match.start()
        if len(words) >= 2:
            found.append((bisect_right(starts, start), " ".join(words)))
            taken.update(range(start, match.end()))
        elif words and not _sentence_start(text, start):
            found.append((bisect_right(starts, start), words[0]))
    for match in _CAPITALISED.finditer(text):
        word, start = match[0], match.start()
        if start in taken or word in _OPENERS:
            continue
        if not _sentence_start(text, start):
            found.append((bisect_right(starts, start), word))
    return found


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
# pattern, kind rank, group, gate, and whether it reads only the words with a separator
_Pass = tuple[re.Pattern[str], int, int, _Gate, bool]
_CODE_PASSES: tuple[_Pass, ...] = (
    (_TICKET, _ID, 0, ("-",), True),
    (_VERSION, _VERSION_KIND, 0, ("v",), False),
    (_DOTTED, _CODE, 0, (".",), True),
    (_DEFINITION, _CODE, 1, _DEFINING_WORDS, False),
    (_BACKTICK, _CODE, 1, ("`",), False),
)
_BODY_PASSES: tuple[_Pass, ...] = (
    (_TICKET, _ID, 0, ("-",), True),
    (_ISSUE, _ID, 0, ("#",), False),
    (_VERSION, _VERSION_KIND, 0, ("v",), False),
    (_HANDLE, _HANDLE_KIND, 0, ("@",), False),
    (_TAG, _TAG_KIND, 0, ("#",), False),
    (_SNAKE, _CODE, 0, ("_",), True),
    (_CAMEL, _CODE, 0, _CAMEL_GATE, False),
    (_DOTTED, _CODE, 0, (".",), True),
    (_KEBAB, _CODE, 0, ("-",), True),
    (_BACKTICK, _CODE, 1, ("`",), False),
    (_DEFINITION, _CODE, 1, _DEFINING_WORDS, False),
)
# ``_found`` reads ``findall`` as the pass's group: a pattern's group count must be it.
assert all(p[0].groups == p[2] for p in _CODE_PASSES + _BODY_PASSES)


def _separated_words(text: str, starts: list[int], code: bool) -> tuple[str, list[int], list[int]]:
    r"""The chunk's words (whitespace-separated) that hold a ``.`` or ``-`` (or, outside
    code, ``_``), one line per unit: the text the ``True`` passes read, its lines'
    offsets, and the slot of each line's unit (``[0, slot, ...]``, by ``bisect_right``).

    Trigger: ``_TICKET``, ``_SNAKE``, ``_DOTTED`` and ``_KEBAB`` open with ``\b`` or a
    letter, so ``re`` tries them at every character of the chunk: 45 % of extraction's
    regex time on the realcorpus's prose. Each of their matches needs one of those
    separators and holds no whitespace, and nothing they test around a match (``\b``,
    the lookbehinds, ``(?!-\d)``) tells whitespace from a string's start or end, so
    they find the same matches in these words (a seventh of the prose, a quarter of
    the code), in the same order.
    """
    pieces: list[str] = []
    offsets: list[int] = []
    slot_of = [_HEADING]
    at = 0
    ends = [*starts[1:], len(text)]
    for slot, (start, end) in enumerate(zip(starts, ends, strict=True), _FIRST_UNIT):
        unit = text if len(starts) == 1 else text[start:end]
        if code:
            held = [word for word in unit.split() if "." in word or "-" in word]
        else:
            held = [word for word in unit.split() if "." in word or "-" in word or "_" in word]
        if held:
            piece = " ".join(held)
            pieces.append(piece)
            offsets.append(at)
            slot_of.append(slot)
            at += len(piece) + 1
    return "\n".join(pieces), offsets, slot_of


def _found_in_words(
    words: tuple[str, list[int], list[int]], pattern: re.Pattern[str], group: int
) -> _Found:
    """``_found`` over ``_separated_words``: a match's slot is its line's unit's."""
    text, offsets, slot_of = words
    if len(offsets) == 1:
        return zip(repeat(slot_of[1]), pattern.findall(text))
    matches = list(pattern.finditer(text))
    lines = map(bisect_right, repeat(offsets), map(_match_start, matches))
    return zip(map(slot_of.__getitem__, lines), map(_GROUP[group], matches), strict=True)


def _passes(tally: _Tally, text: str, passes: tuple[_Pass, ...], *, code: bool) -> None:
    starts = tally.starts
    words = None
    for pattern, rank, group, needs, separated in passes:
        if isinstance(needs, re.Pattern):
            if not needs.search(text):
                continue
        elif not any(need in text for need in needs):
            continue
        if separated:
            if words is None:
                words = _separated_words(text, starts, code)
            tally.add_all(_found_in_words(words, pattern, group), rank)
        elif pattern is _DEFINITION:
            tally.add_all(_definitions(starts, text), rank)
        else:
            tally.add_all(_found(starts, pattern, text, group), rank)


def _source_code(tally: _Tally, text: str) -> None:
    """A chunk of a source file: what it defines, dotted names (imports, attributes),
    ids and versions in its comments. Every identifier a function body uses is not an
    entity of the library: they cost two thirds of ingest on the real corpus and name
    nothing a person looks up (``self``, ``value``, ``result``)."""
    _passes(tally, text, _CODE_PASSES, code=True)


def _body(tally: _Tally, text: str) -> None:
    """Every pattern once over the whole chunk; each match lands in its unit."""
    _passes(tally, text, _BODY_PASSES, code=False)
    starts = tally.starts
    # An acronym starts with a letter, so no match is all digits: only shouted words go.
    acronyms = _found(starts, _ACRONYM, text, 0)
    tally.add_all([found for found in acronyms if found[1] not in _SHOUTED], _ACRONYM_KIND)
    tally.add_all(_names(starts, text), _NAME)
    if "**" in text:
        for match in _BOLD.finditer(text):
            slot = bisect_right(starts, match.start())
            tally.add(slot, match[1], _TERM)
            _cjk_terms(tally, match[1], slot)
    if any(opener in text for opener in _CJK_OPENERS):
        for match in _CJK_QUOTED.finditer(text):
            _cjk_terms(tally, match[1], bisect_right(starts, match.start()))


def _cjk_terms(tally: _Tally, text: str, slot: int) -> None:
    tally.add_all(zip(repeat(slot), _CJK_RUN.findall(text)), _CJK_KIND)


def _without_urls(text: str) -> str:
    """``text`` with each URL blanked to spaces of its length: offsets (and so units) stay.

    ``_URL`` is searched for only from just before each ``://`` (a URL's scheme ends at
    its first ``:``, at most ``_SCHEME_CHARS`` after its start), not tried at every word
    of the chunk: the same matches as ``_URL.sub``, at a tenth of its cost."""
    at = text.find("://")
    if at == -1:
        return text
    pieces: list[str] = []
    done = 0
    while at != -1:
        match = _URL.search(text, max(done, at - _SCHEME_CHARS))
        if match is None:
            break
        start, end = match.span()
        pieces += (text[done:start], " " * (end - start))
        done = end
        at = text.find("://", done)
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def extract(text: str, heading_path: Sequence[str] = (), *, code: bool = False) -> Extraction:
    """The entities one chunk mentions (heaviest first, at most ``MAX_MENTIONS``) and
    the pairs of them it states together; ``code`` for a chunk of a source file."""
    starts = [0]
    if "\n" in text:
        starts += [m.end() for m in _UNIT_BREAK.finditer(text)]
    tally = _Tally(starts)
    for heading in heading_path:
        if heading and len(heading) <= 60 and len(heading.split()) <= MAX_HEADING_WORDS:
            tally.add(_HEADING, heading, _TERM)
        _cjk_terms(tally, heading, _HEADING)
    (_source_code if code else _body)(tally, _without_urls(text))
    kept = tally.mentions()
    return Extraction(kept, tally.pairs(kept))
