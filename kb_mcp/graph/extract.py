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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kb_mcp.graph.resolve import entity_key

# Bumped whenever what is extracted changes: the stored graph is then rebuilt.
EXTRACTOR_VERSION = "heuristic 1"
MAX_SURFACE = 80
MAX_MENTIONS = 48
MAX_CANDIDATES = 1_000
# Entities of a chunk linked pairwise by co-mention: the heaviest ones only, so a chunk
# adds at most 45 relation rows (10 choose 2) however many names it holds.
PAIR_ENTITIES = 10

# Kinds, strongest first: when two spellings of one key disagree, the stronger kind names
# the entity (a backticked `BlobStore` is code even where prose writes "Blob Store").
KINDS = ("id", "version", "handle", "tag", "code", "name", "acronym", "term", "cjk")
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
_TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
_ISSUE = re.compile(r"(?<![\w#&/])#\d{1,7}\b")
_VERSION = re.compile(r"\bv\d+(?:\.\d+){1,3}\b")
_HANDLE = re.compile(r"(?<![\w.@])@[A-Za-z0-9][A-Za-z0-9_-]{1,38}")
_TAG = re.compile(r"(?<![\w#&/])#[A-Za-z][\w/-]{1,40}")
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[a-z]+[A-Z]|[A-Z][a-z0-9]+[A-Z])[A-Za-z0-9]*\b")
_DOTTED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+\b")
_DEFINITION = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func|interface|struct)"
    r"[ \t]+([A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE,
)
_PROPER = re.compile(r"\b[A-Z][a-z0-9]+(?:[ \t]+[A-Z][a-z0-9]+)+\b")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}\b(?!-\d)")
# Capitalised words that open a phrase without naming anything ("The Search Cluster").
_OPENERS = frozenset(
    "The A An This That These Those Our Your My Its Their Each Every All Any Some No "
    "When If In On At For From To By With And Or But So As Then Now See Use Note".split()
)
# Shouted words that are not names.
_SHOUTED = frozenset("TODO NOTE FIXME XXX WARNING IMPORTANT OK AND OR NOT THE TBD FAQ".split())
_SENTENCE_END = frozenset(".!?:;\n#*->|`\"'([")


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity in one chunk: its key, the spelling seen, its kind and weight."""

    key: str
    surface: str
    kind: str
    weight: float


class _Tally:
    """Occurrences per key, the first spelling and strongest kind, and heading keys."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.surface: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self.heading: set[str] = set()

    def add(self, surface: str, kind: str, *, heading: bool = False) -> None:
        surface = surface.strip().rstrip(".")
        if len(surface) < 2 or len(surface) > MAX_SURFACE:
            return
        key = entity_key(surface)
        if len(key) < 2:
            return
        if key not in self.count:
            if len(self.count) >= MAX_CANDIDATES:
                return
            self.count[key] = 0
            self.surface[key] = surface
            self.kind[key] = kind
        elif KINDS.index(kind) < KINDS.index(self.kind[key]):
            self.kind[key] = kind
            self.surface[key] = surface
        self.count[key] += 1
        if heading:
            self.heading.add(key)

    def mentions(self) -> list[Mention]:
        found = [
            Mention(
                key,
                self.surface[key],
                self.kind[key],
                round(
                    KIND_WEIGHT[self.kind[key]] * (1.0 + math.log(count))
                    + (HEADING_BONUS if key in self.heading else 0.0),
                    3,
                ),
            )
            for key, count in self.count.items()
        ]
        found.sort(key=lambda m: (-m.weight, m.key))
        return found[:MAX_MENTIONS]


def _sentence_start(text: str, index: int) -> bool:
    """Whether the word at ``index`` opens a sentence, a line or a list item."""
    i = index - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END or text[i].isdigit()


def _names(tally: _Tally, text: str) -> None:
    """Multi-word proper nouns, then capitalised words inside sentences."""
    taken: list[tuple[int, int]] = []
    for match in _PROPER.finditer(text):
        words = match.group().split()
        start = match.start()
        if words[0] in _OPENERS:
            start += len(words[0])
            words = words[1:]
        if len(words) >= 2:
            tally.add(" ".join(words), "name")
            taken.append((match.start(), match.end()))
        elif words and not _sentence_start(text, match.start()):
            tally.add(words[0], "name")
    for match in _CAPITALISED.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        word = match.group()
        if word not in _OPENERS and not _sentence_start(text, match.start()):
            tally.add(word, "name")


def _cjk_terms(tally: _Tally, text: str, *, heading: bool = False) -> None:
    for run in _CJK_RUN.findall(text):
        tally.add(run, "cjk", heading=heading)


def _code(tally: _Tally, text: str) -> None:
    for match in _BACKTICK.finditer(text):
        tally.add(match.group(1), "code")
    for pattern in (_SNAKE, _CAMEL, _DOTTED):
        for surface in pattern.findall(text):
            if not surface[0].isdigit():
                tally.add(surface, "code")
    for name in _DEFINITION.findall(text):
        tally.add(name, "code")


def _ids(tally: _Tally, text: str) -> None:
    for surface in _TICKET.findall(text):
        tally.add(surface, "id")
    for surface in _ISSUE.findall(text):
        tally.add(surface, "id")
    for surface in _VERSION.findall(text):
        tally.add(surface, "version")
    for surface in _HANDLE.findall(text):
        tally.add(surface, "handle")
    for surface in _TAG.findall(text):
        tally.add(surface, "tag")
    for surface in _ACRONYM.findall(text):
        if surface not in _SHOUTED and not surface.isdigit():
            tally.add(surface, "acronym")


def extract(text: str, heading_path: Sequence[str] = ()) -> list[Mention]:
    """The entities one chunk mentions, heaviest first, at most ``MAX_MENTIONS``."""
    tally = _Tally()
    for heading in heading_path:
        if heading and len(heading) <= 60 and len(heading.split()) <= 6:
            tally.add(heading, "term", heading=True)
        _cjk_terms(tally, heading, heading=True)
    _ids(tally, text)
    _code(tally, text)
    _names(tally, text)
    for bold in _BOLD.findall(text):
        tally.add(bold, "term")
        _cjk_terms(tally, bold)
    for quoted in _CJK_QUOTED.findall(text):
        _cjk_terms(tally, quoted)
    return tally.mentions()


def paired(mentions: Iterable[tuple[str, float]]) -> list[tuple[str, str]]:
    """The co-mention pairs of a chunk's ``(key, weight)`` mentions: the heaviest
    ``PAIR_ENTITIES`` pairwise, each pair ordered. The same mentions always give the same
    pairs, so removing a chunk takes away exactly what adding it put in."""
    top = sorted(mentions, key=lambda m: (-m[1], m[0]))[:PAIR_ENTITIES]
    keys = sorted(k for k, _w in top)
    return [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
