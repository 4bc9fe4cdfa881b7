"""Document relations in ranking and in what each result says about itself. Pure.

When a document and the one that changed it (``corrects``, ``supersedes``, ``withdraws``,
``updates``, from ``store/relations.py``) both match, the current one comes first:

- the ranking model reads that a candidate was changed or withdrawn (a feature, see
  ``search/features.py``);
- an **order pass** then moves the changer to just above the document it changed
  (taking its score, as every order pass does, ``search/adjust.py``); a correction or
  update acts only when it concerns what was asked (``concerned_only``): the rest of the
  old document still holds.

A question about the past ("before the change", "previously", "originally", or an "as
of" date before the change took effect) turns it around: the old version is placed above
the one that changed it.

Each result lists what it is: ``corrected by <cite>``, ``withdrawn on <date> by
<cite>``, ``superseded by <cite>``, ``updated on <date> by <cite>`` and the reverse
(``corrects <cite>`` …), so an agent can tell the user what changed. Two results on one
topic stating different values of one quantity, with no relation between them, are
marked ``contradicts <cite>`` both ways and left where they are: never silently picked.
The contradiction test is conservative (``CONTRADICTION_*``): both in the first
``CONTRADICTION_DEPTH`` results, titles alike, and a number with the same unit whose
values do not overlap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence

from rapidfuzz import fuzz

from kb_mcp.relations.change import Change, describe
from kb_mcp.search.adjust import Candidate
from kb_mcp.search.features import Question, coverage

# "Both match": a changer counts when the fused ranking has it among its first
# RELATION_DEPTH documents. golden2 dev, keyword: 5 and 10 score alike, 20 and 100 +0.001
# macro (one multi-hop query); 10 is the stricter reading (docs/retrieval.md).
RELATION_DEPTH = 10
# A withdrawal or supersession replaces the whole document, and a document that withdrew
# itself needs no second match: those count wherever the changer ranks.
WITHDRAWS = "withdraws"
WHOLE = frozenset({WITHDRAWS, "supersedes"})
# A partial change (corrects, updates) counts only when the changer's passage holds this
# share of the IDF weight of the question's words the old passage matched
# (``concerned_only``). golden2 dev, keyword, macro by share: 0 (always demote, as
# before) / 0.4 0.776, 0.45 0.777, 0.5 / 0.55 / 0.6 0.782 (multi_hop 0.402 → 0.446: a
# postmortem asked about its incident commander no longer sinks under an addendum that
# recounts buses), 0.7 0.780, 0.9 0.774, 1.0 0.762 (corrections lose); the old golden
# set scores 0.842 at every share. 0.55: the middle of the plateau.
CONCERN_SHARE = 0.55
CONTRADICTION_DEPTH = 3
CONTRADICTION_TOPIC = 60  # token_set_ratio of the two titles (0-100)
# The quality pass added "the previous / earlier / former <setting>" (only the adjective
# is framing: the setting is what is asked about) and "before ADR-12 / v2.3".
_PAST = re.compile(
    r"\b(?:before (?:the|this|that|it|its|their|our)(?: [\w-]+){0,4} "
    r"(?:change|changed|update|updated|correction|corrected|revision|errata|erratum|withdrawal|switch|move)|previously|"
    r"originally|formerly|used to|prior to the|old (?:value|version|policy|setting|number)|"
    r"(?:old|previous|earlier|former)(?= (?:[\w-]+ ){0,2}(?:value|version|policy|setting|"
    r"number|limit|rule|rate|hours|interval|period|figure|price|fare|cap)s?\b)|"
    r"(?:before|prior to) (?:[A-Z][A-Z0-9]{1,9}-\d+|v\d+(?:\.\d+)*)|"
    r"initially|at first)\b",
    re.IGNORECASE,
)
_UNITS = (
    "days?|weeks?|months?|years?|hours?|minutes?|mins?|seconds?|secs?|ms|%|percent|gb|mb|kb|"
    "tb|requests?|connections?|retries|attempts?|replicas?|nodes?|users?|eur|usd|€|\\$"
)
_QUANTITY = re.compile(rf"(?<![\w.])(\d+(?:[.,]\d+)?)\s*({_UNITS})(?!\w)", re.IGNORECASE)


def concerned_only(
    changes: Mapping[str, Sequence[Change]],
    units: Sequence[Sequence[str]],
    present: Callable[[str], Collection[str] | None],
    df: Mapping[str, int],
    documents: int,
    share: float = CONCERN_SHARE,
) -> dict[str, list[Change]]:
    """``changes`` without the partial ones (``corrects``, ``updates``) that leave the
    asked-about part alone, so only those mark a candidate changed and reorder.

    A correction changes one fact of a document ("page 4 says 30 days; it is 45"), and
    the rest still holds. The question is about the corrected fact when the changer's
    passage holds the question's words that the old passage matched: at least ``share``
    of their IDF weight. ``present(key)`` is the index tokens of a document's passage in
    this ranking (None: not ranked). Both directions of a dropped change go.
    """
    dropped: set[frozenset[str]] = set()
    for key, found in changes.items():
        for change in found:
            if not change.incoming or change.kind in WHOLE or change.other == key:
                continue
            old, new = present(key), present(change.other)
            if old is None or new is None:
                continue
            matched = [unit for unit in units if unit and all(t in old for t in unit)]
            if coverage(Question(matched, df, documents), frozenset(new)) < share:
                dropped.add(frozenset({key, change.other}))
    return {
        key: [ch for ch in found if ch.kind in WHOLE or frozenset({key, ch.other}) not in dropped]
        for key, found in changes.items()
    }


def asks_about_past(query: str) -> bool:
    """Whether the question asks how things were before a change."""
    return _PAST.search(query) is not None


def without_past_phrase(query: str) -> str:
    """``query`` without the words that ask about the past ("before the change"): they
    frame the question, and counted as content they would weigh against every passage
    (a library that never says "change" is not missing the answer)."""
    stripped = _PAST.sub(" ", query)
    return stripped if stripped.strip() else query


def _applies(change: Change, as_of: str | None) -> bool:
    return as_of is None or not change.effective or change.effective[:10] <= as_of


def matched(change: Change, position: Mapping[str, int]) -> bool:
    """Whether the changer counts as matching the question too (``RELATION_DEPTH``); a
    withdrawal or supersession (``WHOLE``) always does."""
    if change.kind in WHOLE:
        return True
    return position.get(change.other, RELATION_DEPTH) < RELATION_DEPTH


def order_pass(
    ranked: list[Candidate],
    changes: Mapping[str, Sequence[Change]],
    as_of: str | None,
    past: bool,
    position: Mapping[str, int],
) -> list[Candidate]:
    """The changer just above the document it changed (the old one above the changer for
    a question about the past, or one dated before the change took effect), when the
    changer matches too (``matched``)."""
    ranked = list(ranked)
    changes = {
        key: [ch for ch in found if ch.incoming or matched(ch, position)]
        for key, found in changes.items()
    }
    for _ in range(len(ranked)):  # each move settles one pair; bounded
        move = _next_move(ranked, changes, as_of, past)
        if move is None:
            break
        lower, upper, reason = move
        mover = ranked.pop(lower)
        ranked.insert(upper, mover.moved_to(ranked[upper].score, reason))
    return ranked


def _next_move(
    ranked: list[Candidate],
    changes: Mapping[str, Sequence[Change]],
    as_of: str | None,
    past: bool,
) -> tuple[int, int, str] | None:
    """The first pair in the wrong order: (index of the one to move up, index it goes
    to, why), or None."""
    position = {c.key: i for i, c in enumerate(ranked)}
    for i, candidate in enumerate(ranked):
        for change in changes.get(candidate.key, ()):
            j = position.get(change.other)
            if j is None or change.incoming:
                continue  # seen from the changer: ``candidate`` changed ``other``
            if _applies(change, as_of) and not past:
                if j < i:
                    return i, j, f"{describe(change)}: moved above it"
            elif i < j:
                return j, i, f"asked about before {candidate.key} changed it: moved above it"
    return None


def _quantities(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for value, unit in _QUANTITY.findall(text):
        unit = unit.lower().rstrip("s") or unit.lower()
        found.setdefault(unit, set()).add(value.replace(",", "."))
    return found


def contradictions(
    heads: Sequence[tuple[str, str, str, str]], related: set[frozenset[str]]
) -> dict[str, list[str]]:
    """Key → cites of the results it contradicts, among ``heads`` (key, title, passage,
    cite) in result order: titles alike, a shared unit with disjoint values, and no
    relation between the two."""
    marks: dict[str, list[str]] = {}
    top = list(heads[:CONTRADICTION_DEPTH])
    for i, (key_a, title_a, text_a, cite_a) in enumerate(top):
        for key_b, title_b, text_b, cite_b in top[i + 1 :]:
            if frozenset({key_a, key_b}) in related:
                continue
            if fuzz.token_set_ratio(title_a.lower(), title_b.lower()) < CONTRADICTION_TOPIC:
                continue
            qa, qb = _quantities(text_a), _quantities(text_b)
            if any(qa[u].isdisjoint(qb[u]) for u in qa.keys() & qb.keys()):
                marks.setdefault(key_a, []).append(f"contradicts {cite_b}")
                marks.setdefault(key_b, []).append(f"contradicts {cite_a}")
    return marks


def annotations(
    changes: Mapping[str, Sequence[Change]], heads: Sequence[tuple[str, str, str, str]]
) -> dict[str, tuple[str, ...]]:
    """Per shown document (``heads``: key, title, passage, cite, in result order): its
    relations, then the contradictions among the first results."""
    related = {frozenset({key, ch.other}) for key, found in changes.items() for ch in found}
    marks = contradictions(heads, related)
    return {
        key: (
            *dict.fromkeys(describe(ch) for ch in changes.get(key, ())),
            *marks.get(key, ()),
        )
        for key, _title, _text, _cite in heads
    }
