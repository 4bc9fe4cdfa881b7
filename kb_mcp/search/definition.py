"""A question that names a code identifier ranks the passage defining it first. Pure.

"get_object_or_404 implementation" over Django's docs and code matched every call site
and every page that mentions the shortcut, and the passage that defines it
(``def get_object_or_404`` in ``django/shortcuts.py``) came ninth (a new user's trial).
An agent that types an identifier most often wants its definition: ``definition_rule``,
which the engine applies after fusion, scales the fused score of a passage whose code
defines a name the question spells as an identifier. Only identifier-shaped words count
(``snake_case``, ``camelCase``, ``PascalCase`` with an inner capital, a ``dotted.name`` or
a word written as a call ``load()`` or in backticks): "how does load work" is prose.

The code chunker names a definition's section ``def name`` / ``class name`` /
``function name`` (``chunk/code.py``); the section is the candidate's ``topic``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kb_mcp.search.adjust import Adjustment, Candidate, Rule

# The factor on a defining passage. PROMOTE's (search/prior.py): on the fused (RRF)
# score ×2 moves a passage about 60 ranks at the head, enough for the definition to pass
# call sites that repeat the name. Checked, not tuned: golden, golden2 and realcorpus
# figures in the commit that added it.
DEFINITION_FACTOR = 2.0

_IDENTIFIER = re.compile(
    r"`([A-Za-z_][\w.]*)`"  # in backticks
    r"|\b([A-Za-z_]\w*)\(\)?"  # written as a call
    r"|\b([A-Za-z]\w*_\w+|_\w+)"  # snake_case, _private
    r"|\b([a-z]+[A-Z]\w*)"  # camelCase
    r"|\b([A-Z][a-z0-9]+[A-Z]\w*)"  # PascalCase with an inner capital
    r"|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"  # dotted.name: its last part is defined
)
_KEYWORD_ALT = "def|class|function|func|fn|interface|struct|enum|trait|type|module|object|impl"
_KEYWORDS = rf"(?:async\s+)?(?:{_KEYWORD_ALT})\s+([A-Za-z_$][\w$]*)"
_KEYWORD_WORDS = tuple(_KEYWORD_ALT.split("|"))
# A definition line of code (at a line start, after ``export`` / ``pub``), and a section
# label of the code chunker (a part of the topic, after its " / ").
_DEFINITION_LINE = re.compile(r"^[ \t]*(?:export\s+)?(?:pub\s+)?(?:default\s+)?" + _KEYWORDS, re.M)
_DEFINITION_LABEL = re.compile(r"(?:^|/ )" + _KEYWORDS)


def named_identifiers(query: str) -> frozenset[str]:
    """The identifiers ``query`` spells, lower-cased (a dotted name by its last part)."""
    names = set()
    for match in _IDENTIFIER.finditer(query):
        word = next(group for group in match.groups() if group)
        names.add(word.rsplit(".", 1)[-1].lower())
    return frozenset(name for name in names if len(name) > 2)


def defined_names(topic: str, text: str) -> frozenset[str]:
    """The names a passage defines, lower-cased: its section label's (``def load`` from
    the code chunker) and each definition line's of its text (a small file is one
    passage with no label)."""
    found = _DEFINITION_LABEL.findall(topic) + _DEFINITION_LINE.findall(text)
    return frozenset(name.lower() for name in found)


def defines_any(names: frozenset[str], topic: str, text: str) -> bool:
    """Whether the passage defines one of ``names`` (``defined_names``), looked at only
    where a name follows a definition keyword: most passages have none, and
    ``defined_names`` over 80 passages cost a SciFact question ~1.2 ms (issue 10). (One
    case-insensitive pattern for keyword-then-name scanned slower still: 45 ms.)"""
    low = f"{topic}\n{text}".lower()
    for name in names:
        at = low.find(name)
        while at != -1:
            if low[:at].rstrip().endswith(_KEYWORD_WORDS):  # what ``_KEYWORDS`` asks, and more
                return not names.isdisjoint(defined_names(topic, text))
            at = low.find(name, at + 1)
    return False


def definition_rule(query: str, text_of: Callable[[str], str]) -> Rule:
    """The factor rule the engine applies after fusion: a candidate whose passage defines
    a name the question spells is scaled by ``DEFINITION_FACTOR``; ``text_of`` gives a
    candidate's passage text by its key."""
    names = named_identifiers(query)

    def by_definition(candidate: Candidate) -> Adjustment | None:
        if not names or not names & defined_names(candidate.topic, text_of(candidate.key)):
            return None
        reason = "promoted: defines a name the question asks about"
        return Adjustment(reason, DEFINITION_FACTOR)

    return by_definition
