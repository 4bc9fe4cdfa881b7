"""The score floor: how much of a query's weight a passage covers. Pure.

BM25 scores are not comparable across queries, so the floor is not a score threshold.
It is query coverage: the share of the query's IDF weight whose terms occur in the best
passage. A question whose rare, specific words appear nowhere near each other in the
library ("GDPR deletion deadline" in a library without GDPR) covers little of its own
weight, and the search then answers with nothing rather than with noise.

The answer-type floor (end of this module) catches what coverage cannot: a question
asking for a number whose closest passages are about the thing but hold no number near
its words ("which Redis version" against a page naming Redis and no version), or
whose numbers are a neighbour's ("which gRPC port does arrivals-api listen on" against
another service's gRPC port: ``slot_words``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kb_mcp.search.calibration import VectorCalibration
from kb_mcp.search.counted import counts_noun

# The best passage must cover this share of the query's IDF weight, or the search returns
# nothing. Chosen against the false-empty rate on answerable queries, which matters more
# to an agent than a missed abstention (issue #3, golden set / SciFact train / CoSQA dev /
# CMRC2018 dev): at 0.20 false-empty is 0.4-0.7% on the public sets and 1.9% on the
# golden set, abstention 12.5%; at 0.25 they are 0.8-2.0% and 25%; at 0.35, 4-7% and 62%.
COVERAGE_FLOOR = 0.2


def idf(doc_frequency: int, documents: int) -> float:
    """BM25's (Robertson–Spärck Jones) IDF, floored at 0; an unseen term weighs the most."""
    return math.log(1 + (documents - doc_frequency + 0.5) / (doc_frequency + 0.5))


def coverage(
    units: Sequence[Sequence[str]],
    present: Collection[str],
    df: Mapping[str, int],
    documents: int,
) -> float:
    """Share of the units' IDF weight covered by ``present`` tokens (1.0 for no units).

    A unit is a query term (one token, or several for a phrase); it counts as covered when
    all its tokens are present, and weighs the IDF of its rarest token.
    """
    total = covered = 0.0
    for unit in units:
        if not unit:
            continue
        weight = max(idf(df.get(token, 0), documents) for token in unit)
        total += weight
        if all(token in present for token in unit):
            covered += weight
    return covered / total if total else 1.0


def floor_reason(
    lexical: float | None, cosine: float | None, calibration: VectorCalibration
) -> str | None:
    """Why a search should answer with nothing, or None when its best passage clears.

    ``lexical`` is the best passage's query coverage (None when the keyword leg did not
    run); ``cosine`` the vector leg's best cosine (None when it did not run). The lexical
    floor says the question's specific words are not stored together anywhere; the
    semantic floor, calibrated per model, says nothing stored is about the question.
    A passage close enough in meaning (``cosine_rescue``) answers a paraphrase whose
    words the library does not use; with that rescue, a model's calibration may ask for
    more lexical coverage (``coverage_floor``) than keyword search alone can afford.
    """
    floor = calibration.cosine_floor
    if cosine is not None and floor is not None and cosine < floor:
        return (
            f"nothing relevant: the closest passage in meaning has cosine {cosine:.2f} "
            f"(floor {floor:.2f} for this model); the answer is probably not stored"
        )
    rescued = (
        cosine is not None
        and calibration.cosine_rescue is not None
        and cosine >= calibration.cosine_rescue
    )
    lexical_floor = COVERAGE_FLOOR
    if cosine is not None and calibration.coverage_floor is not None:
        lexical_floor = calibration.coverage_floor
    if lexical is not None and lexical < lexical_floor and not rescued:
        return (
            f"nothing relevant: the best passage covers {lexical:.0%} of the query's "
            f"weight (floor {lexical_floor:.0%}); the answer is probably not stored"
        )
    return None


# --- The answer-type floor ------------------------------------------------------------
#
# A question that asks for a number ("how many validators…", "how long are messages
# kept", "which Redis version…", "what phone number…") is answered by a passage that
# holds a number near the question's words. When the library is about the thing but
# does not hold the asked-for value ("Redis holds the sessions", no version anywhere
# near), every lexical and semantic signal says "close"; the missing number is what
# tells "about the same thing" from "answers it".

# The kinds of number a question can ask for, with the phrase that asks for it. "How
# often" is left out: its answers are words ("weekly", "every Tuesday") as often as not;
# "when" too ("next spring", "after the freeze"): it cost a golden2 dev false empty, no catch.
VERSION_KIND = "a version"
DURATION_KIND = "a duration or an age"
PHONE_KIND = "a phone number"
_ASKS_FOR_NUMBER: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a count or an amount", re.compile(r"\bhow\s+(?:many|much)\b", re.I)),
    (DURATION_KIND, re.compile(r"\bhow\s+(?:long|old)\b", re.I)),
    (
        VERSION_KIND,
        re.compile(
            r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:the\s+|our\s+|a\s+)?(?:[\w.-]+\s+){0,2}"
            r"(?:major\s+|minor\s+)?version\b",
            re.I,
        ),
    ),
    (
        PHONE_KIND,
        re.compile(
            r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:the\s+|our\s+|a\s+)?(?:[\w.-]+\s+){0,2}"
            r"(?:phone(?:\s+number)?|extension)\b",
            re.I,
        ),
    ),
    (
        "a port or number",
        re.compile(
            r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:the\s+|our\s+|a\s+)?(?:[\w.-]+\s+){0,2}"
            r"(?:port|phone(?:\s+number)?|extension|number)\b",
            re.I,
        ),
    ),
    (
        "a limit or an amount",
        re.compile(
            r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:the\s+|our\s+|a\s+)?(?:[\w.-]+\s+){0,2}"
            r"(?:cap|limit|fee|price|timeout)\b",
            re.I,
        ),
    ),
)
# A version is written as one: "7.2", "v3", "version 14", or a name with its number
# ("PostgreSQL 14", "Android 9", "Node.js 20"; not a year: "March 2025"). A passage
# about the thing whose only numbers are amounts ("expiry stays at 30 days", "40 million
# rows") or ids ("ADR-0012") does not say which version. Caught: golden2 dev "Which
# Redis version holds the app sessions?", golden "Which Redis version does the session
# cache run?" (abstention 0.111 → 0.222 and 0.25 → 0.375, false empties unchanged; the
# answered version questions, "PostgreSQL 14", "Node.js 20", "Android 9", still answer).
_VERSION_SHAPED = re.compile(
    r"(?<![\w.])[vV]?\d+(?:\.\d+)+(?!\w|\.\d)|\b[vV]\d+\b|\b(?i:version|release)\s+\d+"
    r"|\b[A-Z][\w.+#]*[a-z][\w.+#]*\s(?!(?:19|20)\d\d\b)\d+(?![\d:/-]|[.,]\d|\s*%)"
)
# A duration is written with its unit: "45 days", "two weeks", "24 hours", "1 h", "for
# seven years", or "indefinitely". A passage whose only numbers near the question's words
# are clock times or counts ("staffed until 22:00", "12 characters") does not say how
# long. Caught: golden2 dev hybrid "How long are Slack messages kept?" (a team page's
# "Slack: #almanac … until 22:00"); the answered "how long / how old" questions of
# golden and golden2 dev all hold one ("45 days", "2 years", "30 seconds", "5 minutes").
_DURATION_SHAPED = re.compile(
    r"\b(?:\d+(?:[.,]\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|fifteen|twenty|thirty|forty|fifty|sixty|ninety|hundred)[\s-]*"
    r"(?:working\s+|business\s+|calendar\s+)?(?:s|secs?|seconds?|mins?|minutes?|h|hrs?|"
    r"hours?|days?|weeks?|months?|years?|yrs?|nights?|d|w|y)\b|\b(?:forever|indefinitely)\b",
    re.I,
)
# A phone number is written as one: an extension ("extension **4400**", "ext. 4400",
# "x4400") or a number in groups ("0161 555 0440", "+44 161 555 0440"). A passage whose
# numbers near the question's words are times, counts or e-mail-only contacts ("standup
# 09:15", "security@…, 24x7") does not say which number to call. Caught: golden2 dev
# (enlarged) "What's the phone number for reporting a security vulnerability to
# Bastion?" and "… for Semaphore's standup video link?"; the answered phone questions
# of golden2 dev ("What phone extension reaches the people who own the laptop image
# build?": extension 4400) still hold one.
_PHONE_SHAPED = re.compile(
    r"\b(?:ext(?:ension)?|x)\.?\s*\**\d{3,5}\b|(?<![\d.])\+?\d{2,5}[ -]\d{3,4}[ -]\d{3,4}\b",
    re.I,
)
# The word after "how" that asks for the number: a passage answers "how many" with "4",
# not with "many", so the word weighs nothing in the passage's coverage.
_FRAME = re.compile(r"\bhow\s+(many|much|long|old)\b", re.I)
# Number words as the index stores them (Porter stems): "two weeks", "twice a day",
# "daily" answer a count or a duration. "one" is left out: its stem is "on".
NUMBER_STEMS = frozenset(
    "two three four five six seven eight nine ten eleven twelv fifteen twenti thirti "
    "forti fifti sixti hundr thousand million dozen half twice onc daili weekli monthli "
    "quarterli annual yearli hourli nightli noon midnight".split()
)
# Chosen on golden2 dev (the tuning split) and the golden set (no dev split), keyword
# and hybrid, in the abstention runs of issues 8 and 9 (docs/retrieval.md, "The
# answer-type floor"): the number must sit within 10 index tokens of a matched query
# word (5: one more false empty in each mode; 20: half the catches), in one of the
# answer's first 3 passages or the keyword leg's best (5: golden2 dev keyword loses its
# catch) that covers at least 30% of the question's weight (20%: fewer catches; 40%:
# golden keyword false empties 1.9% → 2.9%). SciFact train, CoSQA dev and CMRC2018 dev
# hold no question it applies to, so their false empties cannot move.
ANSWER_WINDOW = 10
ANSWER_COVERAGE = 0.3
ANSWER_PASSAGES = 3


# The words that tell the asked-for value from its neighbours' (issue 9, abstention): the
# names and periods in the slot phrase ("gRPC" in "which gRPC port", "monthly" in "the
# monthly fare cap", "Slack" in "how long are Slack messages kept") and the identifiers
# the question names ("arrivals-api"). A passage holding a number near the question's
# other words, but not these, holds a neighbour's value: the daily cap, another
# service's gRPC port, arrivals-api's limit for a question about journey-planner-api.
# Plain words of the phrase do not count: they are paraphrased as often as not ("calls"
# answered by "requests", "new starters" by "new joiners", "throttling limit" by "rate
# limit"), and adjectives such as "oldest" or "maximum" describe the value, not whose it is
# (each cost a false empty on golden2 dev or golden).
_SLOT_PHRASE = re.compile(
    r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:the\s+|our\s+|a\s+)?((?:[\w.-]+\s+){0,2})"
    r"(?:major\s+|minor\s+)?(?:version|port|phone|extension|number|cap|limit|fee|price|timeout)\b",
    re.I,
)
_HOW_PHRASE = re.compile(r"\bhow\s+(?:many|much|long|old)\s+((?:[\w.'-]+\s+){0,3})", re.I)
_PERIODS = frozenset("hourly daily weekly monthly quarterly yearly annual nightly".split())
_NAMED = re.compile(r"[A-Z]|\w[-_.]\w|[a-z][A-Z]|\d")
_IDENTIFIER = re.compile(r"\b[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b")


# The verbs and articles around the noun a "how many / how long" asks about: "how long
# ARE Slack messages kept" (skipped before it), "how many attempts DOES Harbor make"
# (the end of it: Harbor is who makes them, which the answer need not repeat).
_AUXILIARIES = frozenset(
    "is are was were do does did will can could should would have has had a an the each "
    "every our your my their its this that i we you they it".split()
)


def _asked_about(words: list[str]) -> list[str]:
    """The noun phrase after "how many" / "how long": past the verb, up to the next one."""
    while words and words[0].lower() in _AUXILIARIES:
        words = words[1:]
    phrase = []
    for word in words:
        if word.lower() in _AUXILIARIES:
            break
        phrase.append(word)
    return phrase


def _distinguishing(word: str) -> bool:
    """A name, an identifier or a period: what tells one value of the kind from another."""
    return word.lower() in _PERIODS or _NAMED.search(word.removesuffix("'s")) is not None


def slot_words(question: str) -> tuple[str, ...]:
    """The words a passage must hold to answer ``question``'s number with its own value
    (see above); () when the question names none."""
    found: list[str] = []
    words = question.split()
    if sum(w[:1].isupper() for w in words) * 2 > len(words):
        # A Title Case question ("How Long to Detox From Fish?", NFCorpus) names nothing
        # by its capitals: only its identifiers count.
        return tuple(dict.fromkeys(_IDENTIFIER.findall(question)))
    if phrase := _SLOT_PHRASE.search(question):
        found += [w for w in phrase.group(1).split() if _distinguishing(w)]
    if phrase := _HOW_PHRASE.search(question):
        found += [w for w in _asked_about(phrase.group(1).split()) if _distinguishing(w)]
    found += _IDENTIFIER.findall(question)
    return tuple(dict.fromkeys(w.strip(".'-") for w in found if w.strip(".'-")))


@dataclass(frozen=True, slots=True)
class PassageTerms:
    """A passage as the index stores it: its title and headings' tokens, its body's in order."""

    head: frozenset[str]
    body: tuple[str, ...]
    text: str = ""  # the passage as stored: a version is told by its shape ("7.2")
    clauses: tuple[tuple[str, ...], ...] = ()  # the body's tokens per clause (search/counted.py)


def asks_for_number(question: str) -> str | None:
    """The kind of number ``question`` asks for ("a count or an amount"…), or None.

    English question phrases only: a question in Chinese, or a claim with no question
    phrase, is never held to this floor.
    """
    for kind, pattern in _ASKS_FOR_NUMBER:
        if pattern.search(question):
            return kind
    return None


def content_units(question: str, units: Mapping[str, Sequence[str]]) -> list[Sequence[str]]:
    """The units a passage's answer should cover: without one-letter fragments ("s" of
    "What's", "g" of "gRPC") and without the word that asks for the number."""
    frame = {m.group(1).lower() for m in _FRAME.finditer(question)}
    return [
        tokens
        for unit, tokens in units.items()
        if tokens and not (len(unit) == 1 and unit.isascii()) and unit.lower() not in frame
    ]


def is_number(token: str) -> bool:
    return any(c.isdigit() for c in token) or token in NUMBER_STEMS


def holds_number_near(body: Sequence[str], words: Collection[str], window: int) -> bool:
    """Whether a number token sits within ``window`` tokens of one of ``words`` in ``body``."""
    numbers = [i for i, token in enumerate(body) if is_number(token)]
    if not numbers:
        return False
    matched = [i for i, token in enumerate(body) if token in words]
    return any(abs(n - m) <= window for n in numbers for m in matched)


def answer_type_reason(
    question: str,
    units: Mapping[str, Sequence[str]],
    passages: Sequence[PassageTerms],
    df: Mapping[str, int],
    documents: int,
    required: Mapping[str, Sequence[str]] | None = None,
    counted: Sequence[str] = (),
) -> str | None:
    """Why a question asking for a number gets nothing, or None when a passage may answer.

    ``units`` maps each query term to its index tokens; ``passages`` are the closest
    passages (the answer's first ``ANSWER_PASSAGES`` and the keyword leg's best). One of
    them must cover ``ANSWER_COVERAGE`` of the question's weight, hold every word of
    ``required`` (``slot_words``, word → its index tokens) and a number within
    ``ANSWER_WINDOW`` tokens of a word it matched; for a "how many" question whose
    noun it writes (``counted``, the noun's index tokens), a number that counts it
    (``search/counted.py``).
    """
    kind = asks_for_number(question)
    if kind is None or not passages:
        return None
    wanted = content_units(question, units)
    words = {token for unit in wanted for token in unit}
    for passage in passages:
        present = passage.head | set(passage.body)
        if coverage(wanted, present, df, documents) < ANSWER_COVERAGE:
            continue
        if not all(all(token in present for token in unit) for unit in (required or {}).values()):
            continue
        if kind == VERSION_KIND and _VERSION_SHAPED.search(passage.text) is None:
            continue
        if kind == DURATION_KIND and _DURATION_SHAPED.search(passage.text) is None:
            continue
        if kind == PHONE_KIND and _PHONE_SHAPED.search(passage.text) is None:
            continue
        named = required or {}
        if (
            counted
            and counts_noun(passage.head, passage.clauses, counted, named, is_number) is False
        ):
            continue
        if holds_number_near(passage.body, words & present, ANSWER_WINDOW):
            return None
    value = "a version" if kind == VERSION_KIND else "a number"
    named = f" beside {', '.join(repr(w) for w in required)}" if required else ""
    return (
        f"nothing answers it: the question asks for {kind}, and none of the "
        f"{len(passages)} closest passages holds {value} near its words{named}; the "
        "answer is probably not stored"
    )


# --- The person floor -----------------------------------------------------------------
#
# "Who is the manager of the IT Service Desk?" is answered by a passage naming someone
# beside the role ("Engineering manager: **Rafael Duarte**"). When the closest passages
# hold the role and the thing but no one's name next to the role ("ask your manager",
# "the Service Desk for IT problems"), the person is not stored. "author" and
# "designer" joined with golden2's enlarged dev: "Who is the author of ADR-0012?" (an
# ADR with no author line; ADR-0007's "Author:" does not name 0012) is caught, "Who is
# the author of ADR-0007?" and "Who is the designer for Team Lantern?" still answer.
#
# A ticket's or a record's fields are roles too ("Assignee: Laila Farouk", "Reviewers:
# Dara Quinn, …", "Scribe: …"), and "who reviewed / wrote / approved X" asks for the
# same field as "who is the reviewer of X". Caught on golden2's session-7 dev: "Who
# reviewed ADR-0009?" (only ADR-0007 lists reviewers) and "Who is the assignee of
# HD-5521?" (a vendor request with no assignee); "Who reviewed ADR-0007?" and "Who is
# the assignee of SEC-311?" still answer.
_ROLES = (
    "manager|owner|lead|head|director|commander|officer|maintainer|approver|chair|author|designer"
    "|assignee|reporter|reviewer|scribe"
)
_ASKS_FOR_PERSON = re.compile(
    rf"\bwho(?:'s|\s+is|\s+was)\s+(?:the|our|your)\s+(?:[\w-]+\s+){{0,2}}?({_ROLES})\b",
    re.I,
)
# The field a "who <did> X" question asks for, as the start of the word that labels it
# ("review" for "Reviewers:", "approv" for "Approved by"). Only at the question's start:
# "the person who wrote the decision record…" asks about that person's team.
_ACTS = {"reviewed": "review", "wrote": "author", "authored": "author", "approved": "approv"}
_ASKS_WHO_DID = re.compile(rf"^\s*who\s+({'|'.join(_ACTS)})\b", re.I)
_PERSON = re.compile(r"(?<![\w.#@/-])[A-Z][a-z]+(?:[ \t]+[A-Z][a-z'-]+){1,2}(?![\w-])")
PERSON_WINDOW = 80  # characters between the role word and the name
PERSON_PASSAGES = 10  # the answer's first passages read: a manager is often a hop away


def asks_for_person(question: str) -> str | None:
    """The role a "who is the <role> of …" question asks about ("manager"), or the field
    a "who reviewed / wrote / approved …" question asks for ("review"), or None."""
    if did := _ASKS_WHO_DID.search(question):
        return _ACTS[did.group(1).lower()]
    found = _ASKS_FOR_PERSON.search(question)
    return found.group(1).lower() if found else None


def names_someone(text: str, role: str, question: str) -> bool:
    """Whether ``text`` has a name the question does not spell within
    ``PERSON_WINDOW`` characters of ``role`` ("manager", "Manager:")."""
    spelled = question.lower()
    for hit in re.finditer(rf"\b{re.escape(role)}", text, re.I):
        near = text[max(0, hit.start() - PERSON_WINDOW) : hit.end() + PERSON_WINDOW]
        for name in _PERSON.findall(near):
            if not all(part.lower() in spelled for part in name.split()):
                return True
    return False


def person_reason(
    question: str,
    units: Mapping[str, Sequence[str]],
    passages: Sequence[PassageTerms],
    df: Mapping[str, int],
    documents: int,
    required: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why a "who is the <role> of …" question gets nothing, or None when a passage may
    answer: one must cover ``ANSWER_COVERAGE`` of the question's weight, hold its
    ``required`` words and a name beside the role."""
    role = asks_for_person(question)
    if role is None or not passages:
        return None
    for passage in passages:
        present = passage.head | set(passage.body)
        if not all(all(t in present for t in unit) for unit in (required or {}).values()):
            continue
        if names_someone(passage.text, role, question):
            return None
    return (
        f"nothing answers it: the question asks who the {role} is, and none of the "
        f"{len(passages)} closest passages names someone beside it; the answer is "
        "probably not stored"
    )
