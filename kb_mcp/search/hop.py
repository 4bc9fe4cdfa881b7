"""The hop leg: the names the question's passages give beside what it asks about → a
second keyword search with those names (issue 9, multi-hop).

"Which Slack channel do I raise a tap-gateway problem in?" is answered by two passages:
the systems register's row saying Team Semaphore owns tap-gateway, and Team Semaphore's
page naming its channel, which does not mention tap-gateway. The keyword leg finds the
first (it names tap-gateway) and, by luck of shared words, sometimes the second. This leg
reads the lines of the closest passages that concern the question (the keyword leg's
first documents, and the passages mentioning the entities the question names), takes
the proper names they hold that the question does not ("Team Semaphore", "Dara Quinn"),
and searches again with the question plus those names: the team page then matches on
the team's name and the question's own words ("Slack", "channel").

It is pseudo-relevance feedback restricted to names, run only for questions that ask
for a who, a team or a way to reach one (``asks_for_someone``): the others' answers are
in the passages that name their subject, and a name from them would pull in unrelated
pages. The graph leg (``search/graph.py``) follows co-mentions instead; measured side by
side in docs/retrieval.md ("Hop leg").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

# The questions this leg runs for: they ask for a person, a team, or how to reach one.
# Tuned on golden2 dev and golden: "page", "reach" and "Slack" were in it and cost a
# fact ("how many invoices … per page"), a retraction ("what p99 latency does ledger-api
# reach") and an abstention ("how long are Slack messages kept") without a multi-hop gain.
_ASKS_FOR_SOMEONE = re.compile(
    r"\b(?:who|whom|whose|whoever|teams?|manager|manages|managed|owners?|owns|owned|"
    r"channel|rota|pagerduty|standup|extension|contact|ask|behind)\b",
    re.I,
)
# A proper name: "Team Semaphore", two or three capitalised words ("Dara Quinn"). A
# capitalised word after a sentence start is not told apart ("Escalate Now" is rare in
# the lines this reads: register rows, owner and author lines, people lists).
_NAME = re.compile(
    r"(?<![\w.#@/-])(?:Team\s+[A-Z][\w-]+|[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+){1,2})(?![\w-])"
)
# A line concerns the question when the question's tokens it holds (with its section
# heading's) weigh this share of the question's IDF weight: a register row naming the
# system, an "Incident commander:" line. A share, not an absolute IDF, which grows with
# the library. Tuned on golden2 dev and golden (docs/retrieval.md "Hop leg": 0.1 best of
# 0.1-0.3 on both).
LINE_SHARE = 0.1
MAX_NAMES = 3  # names searched for, from the weightiest lines first (not tuned)
NAME_SHARE = 0.5  # a name's best line weighs at least this share of the best's (not tuned)
SEED_DOCUMENTS = 5  # the keyword leg's first documents read (3 / 5 / 10 tuned on golden2 dev)
MENTIONS_READ = 10  # passages read per entity the question names (not tuned)
# The first documents whose header (first passage) is read too: an ADR's "Author:" line,
# a postmortem's "Incident commander:", a page's "Owner:", above the passage that matched.
HEADER_DOCUMENTS = 1


# An owner field of a catalogue, a register or a YAML descriptor: its value is a name
# whatever its case (a handle such as "team-axle").
_OWNER_FIELD = re.compile(
    r"^[\s>*#-]*\**(?:owner|owned\s+by|maintainers?|team)\**\s*:\**\s*([\w@][\w@ ./-]{1,60})",
    re.I,
)
# What may stand before a sentence's first word: list and heading marks, a number, the
# end of the sentence before. A capitalised pair there is any sentence's opening
# ("Standup Monday to Thursday", "If Slack is down"), not a name.
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s)[\s#>*\d.)-]*$")


def _placed(line: str, match: re.Match[str]) -> bool:
    """Whether a capitalised match stands where a name does, not at a sentence start."""
    return _SENTENCE_START.search(line[: match.start()]) is None


# A question, not a claim or a code search: SciFact's claims name "teams" and ion
# "channels", CoSQA's searches a file "extension" or the next "page".
_QUESTION = re.compile(r"\?|^\s*(?:who|whom|whose|which|what|where|when|how)\b", re.I)


def asks_for_someone(question: str) -> bool:
    """Whether ``question`` is a question asking who, which team, or how to reach them."""
    return bool(_QUESTION.search(question)) and _ASKS_FOR_SOMEONE.search(question) is not None


def concerning_lines(
    passages: Iterable[tuple[str, str]],
    weights: Mapping[str, float],
    tokens: Callable[[str], list[str]],
) -> list[tuple[str, float]]:
    """The lines of ``passages`` (``(section heading, text)``) whose question tokens,
    with their section heading's (``weights``: token → IDF), weigh at least
    ``LINE_SHARE`` of the question's, with that weight. The heading counts because a
    catalogue states an owner under the thing's heading ("## billing-worker" …
    "Owner: Team Kestrel")."""
    floor = LINE_SHARE * sum(weights.values())
    found = []
    for heading, text in passages:
        head = set(tokens(heading))
        for line in text.splitlines():
            weight = sum(weights.get(t, 0.0) for t in head.union(tokens(line)))
            if weight >= floor and weight > 0:
                found.append((line, weight))
    return found


def line_names(line: str) -> list[str]:
    """The proper names of ``line`` (not at a sentence start), and the value of an owner
    field whatever its case ("owner: team-axle", "**Owner:** Team Kestrel")."""
    names = [m.group(0) for m in _NAME.finditer(line) if _placed(line, m)]
    if owner := _OWNER_FIELD.search(line):
        names.insert(0, owner.group(1).strip(" *`'\""))
    return list(dict.fromkeys(n for n in names if n))


def hop_names(
    lines: Sequence[tuple[str, float]],
    question_tokens: Collection[str],
    tokens: Callable[[str], list[str]],
) -> list[str]:
    """Up to ``MAX_NAMES`` names of ``lines`` that the question does not spell, by the
    weight of the weightiest line holding them (ties: first seen), down to
    ``NAME_SHARE`` of the first one's."""
    best: dict[str, float] = {}
    for line, weight in lines:
        for name in line_names(line):
            if set(tokens(name)) <= set(question_tokens):
                continue
            best[name] = max(best.get(name, 0.0), weight)
    if not best:
        return []
    ranked = sorted(best, key=lambda n: -best[n])  # stable: first seen wins a tie
    return [n for n in ranked[:MAX_NAMES] if best[n] >= NAME_SHARE * best[ranked[0]]]
