"""The counted noun: a "how many X" question is answered by a number that counts X. Pure.

An absent count is often stored beside another count: "how many handhelds do the
ticket inspectors have" against a page that compared codes "on 400 phones" and names
the inspectors' handhelds in the next sentence; "how many columns does the stop-large
layout have" against "`stop-large`: 8 rows" and, one line down, "`interchange`: 16 rows
in two columns". The answer-type floor sees a number near the question's words in both.
What a reader sees is that the number counts something else: no number stands before
"handhelds", and the one before "columns" is in the interchange's line.

So a passage that writes the asked noun answers only when a number counts it ("12
boards", "three tram cars", "at most 140 characters", "Canary: 25 buses") in a clause
that also holds the question's names (or under a title or heading that does). A passage
that does not write the noun at all is left alone: the answer may say it another way
("how many vehicles" answered by "25 buses", "how many calls" by "120 requests").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence

# A number counts the noun when it stands at most this many tokens before it ("12
# newest tram cars": 3) or right after it ("buses: 212"). golden2 dev (enlarged) and
# golden, keyword: see docs/retrieval.md, "The counted noun".
COUNT_BEFORE = 3
COUNT_AFTER = 1

# "An extra day", "a second factor": the article counts one of the noun.
_ONE = frozenset({"a", "an"})

_HOW_MANY = re.compile(r"\bhow\s+many\s+((?:[\w'-]+\s+){0,3}[\w'-]*)", re.I)
# Words that end the noun phrase after "how many": "how many tram cars ARE in…", "how
# many columns DOES the layout have", "how many people CAN travel".
_ENDS_PHRASE = frozenset(
    "is are was were do does did will would can could should may might must have has had "
    "a an the of in on at to for from by with per each every our your my their its this "
    "that i we you they it there".split()
)
# Clauses: sentences, lines and list items, table cells, and the parts of a line split
# by a semicolon. A decimal or thousands separator ("0.9", "1,100") is not a break.
_CLAUSE_BREAK = re.compile(r"(?<!\d)[.;!?](?!\d)|[.;!?](?=\s)|\n|\|")


def counted_noun(question: str) -> str | None:
    """The noun a "how many" question counts: the first plural of the phrase after "how
    many" ("how many tram CARS are…", "how many CHARACTERS fit…"), else its last word
    ("how many PEOPLE can…"); None for other questions."""
    found = _HOW_MANY.search(question)
    if found is None:
        return None
    phrase = []
    for word in found.group(1).split():
        word = word.strip("'").lower()
        if word in _ENDS_PHRASE:
            break
        phrase.append(word)
    plurals = [w for w in phrase if len(w) > 3 and w.endswith("s") and not w.endswith("ss")]
    if plurals:
        return plurals[0]
    return phrase[-1] if phrase else None


def clauses(text: str) -> list[str]:
    """``text`` cut into the clauses a count is read in (see ``_CLAUSE_BREAK``)."""
    return [part for part in _CLAUSE_BREAK.split(text) if part.strip()]


def counts(stream: Sequence[str], noun: Sequence[str], is_number: Callable[[str], bool]) -> bool:
    """Whether a number token counts ``noun`` (its index tokens) in ``stream``: stands
    at most ``COUNT_BEFORE`` tokens before it or ``COUNT_AFTER`` after it; "a" and "an"
    before it count one."""
    size = len(noun)
    for i in range(len(stream) - size + 1):
        if list(stream[i : i + size]) != list(noun):
            continue
        before = stream[max(0, i - COUNT_BEFORE) : i]
        after = stream[i + size : i + size + COUNT_AFTER]
        if any(is_number(t) or t in _ONE for t in before) or any(map(is_number, after)):
            return True
    return False


def counts_noun(
    head: Collection[str],
    clause_tokens: Sequence[Sequence[str]],
    noun: Sequence[str],
    names: Mapping[str, Sequence[str]],
    is_number: Callable[[str], bool],
) -> bool | None:
    """Whether a passage counts ``noun``: None when it never writes the noun (it may say
    it another way), else whether one clause holds a number counting it and every one of
    ``names`` (each a word's index tokens) that the passage's ``head`` does not."""
    if not any(_holds(clause, noun) for clause in clause_tokens) and not set(noun) <= set(head):
        return None
    unheaded = [toks for toks in names.values() if not set(toks) <= set(head)]
    for clause in clause_tokens:
        if not all(set(toks) <= set(clause) for toks in unheaded):
            continue
        if counts(clause, noun, is_number):
            return True
    return False


def _holds(stream: Sequence[str], noun: Sequence[str]) -> bool:
    size = len(noun)
    return any(list(stream[i : i + size]) == list(noun) for i in range(len(stream) - size + 1))
