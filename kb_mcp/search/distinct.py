"""The distinguishing-words floor: the names a passage must hold to answer a question. Pure.

An absent answer whose every word is stored ("which gRPC port does arrivals-api listen
on", "who manages the Service Desk" in a library without either) is close to passages
about its neighbours: another service's gRPC port, the Service Desk's opening hours.
What tells the question from those neighbours is its names: the capitalised words,
identifiers and versions it spells ("arrivals-api", "gRPC", "Kafka", "V7", "2.3.2"), and
the two-word terms of what it asks about that the library writes as one ("product
owner", "transaction fee"). A passage that answers it holds all of them (with a date,
when it asks when something was done), or a passage and the one a hop away do (a
register names the team that runs a system, the team's page its channel); when none of
the answer's leading passages, alone or as a pair, holds them all, the question is about
something the library does not say, and the search answers with nothing. Only questions
and short lookups are read: a claim or a code search names what it does not ask about.

Plain words are not held to it: an answer paraphrases them ("calls" answered by
"requests", "new starters" by "new joiners"), and the rare ones are as often incidental
("whoever looks after", "I don't pass a limit") as specific (issue 9, docs/retrieval.md:
a rare-word rule emptied 5-40 % of golden and golden2 dev's answerable questions).
Dates are not held to it either: "as of October 2025" names when, not what, and the
version true then is often dated another way (a changelog heading, a file name).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations, pairwise

from kb_mcp.index.fts import head_text
from kb_mcp.index.textprep import CJK_RUN
from kb_mcp.search.freshness import MONTH_WORDS
from kb_mcp.search.hop import asks_for_someone
from kb_mcp.store.documents import PassageRow

# The answer's leading passages read (and the keyword leg's best). golden2 dev (enlarged)
# and golden, keyword: 5 / 10 / 20 abstain alike (21 of 41, 4 of 8), but at 5 golden's
# false empties rise from 1.9% to 3.8% (a hop question's team page ranks 6th or lower).
DISTINCT_PASSAGES = 10

_WORD = re.compile(r"[\w][\w'.+#-]*[\w+#]|[\w]")
_IDENTIFIER = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)+|[a-z]+[A-Z]\w*")
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_DATE = re.compile(r"(?:mid|early|late)?-?(?:19|20)\d\d(?:-\d\d(?:-\d\d)?)?|\d\d?(?:st|nd|rd|th)")
# Function words a sentence may start with, and the pronoun "I": capitalised, never names.
_NOT_NAMES = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with what which who whom whose when where why "
    "how do does did done can could should would i you we he she them me my our your its "
    "been being have has had about from than so any all".split()
)


def _is_date(word: str) -> bool:
    lowered = word.lower()
    return lowered in MONTH_WORDS or lowered in _WEEKDAYS or _DATE.fullmatch(lowered) is not None


def _words(question: str) -> list[tuple[str, bool]]:
    """The question's words, each with whether it starts a sentence."""
    found, start = [], True
    # Chinese and Japanese are not written with capitals: their runs are left to the
    # coverage floor, and a number inside one ("2008年") is its own word.
    # Full-width digits and letters ("１９７９年") are read as their ASCII forms.
    question = CJK_RUN.sub(" ", unicodedata.normalize("NFKC", question))
    for match in _WORD.finditer(question):
        found.append((match.group(0), start))
        start = re.match(r"\s*[?.!:]", question[match.end() : match.end() + 2]) is not None
    return found


def written_as_name(word: str, texts: Sequence[str]) -> bool:
    """Whether one of ``texts`` writes ``word`` capitalised inside a sentence ("Team
    Bastion", "pays through Brightpay"): a question's first word is capitalised
    whatever it is, and this tells "Bastion product owner" from "Find the runbook"."""
    pattern = _bounded(word, 0)
    for text in texts:
        for line in text.splitlines():
            for match in pattern.finditer(line):
                if _SENTENCE_START.search(line[: match.start()]) is None:
                    return True
    return False


# A system named in lowercase ("keyhold", "conveyor", "#lantern") is a name all the same:
# the library marks it as one by writing it as code (`keyhold`, `interchange`) or by
# opening a title with it in lowercase ("keyhold access requests", "#lantern export"),
# where an ordinary word would be capitalised. Titles and code marks only: a code file's
# lines and comments open with lowercase words ("def", "# check the file") that are not
# names (CoSQA).
_CODE_SPAN = re.compile(r"`[#@]?([a-z][\w.-]*)`")
_TITLE_WORD = re.compile(r"^[\s#*]*([a-z][\w.-]*)")


def lowercase_names(texts: Sequence[str]) -> frozenset[str]:
    """The words ``texts`` (title and headings on the first line, then the body) write
    in lowercase as code or as a title's first word."""
    found = set()
    for text in texts:
        if title := _TITLE_WORD.match(text.split("\n", 1)[0]):
            found.add(title.group(1))
        if "`" in text:
            found.update(m.group(1) for m in _CODE_SPAN.finditer(text))
    return frozenset(found)


def written_as_lowercase_name(word: str, texts: Sequence[str]) -> bool:
    """Whether one of ``texts`` writes ``word``, as spelled in lowercase, as code or as
    its title's first word."""
    return word in lowercase_names(texts)


def _written(word: str, texts: Sequence[str]) -> bool:
    """Whether one of ``texts`` spells ``word`` as it is (any case)."""
    pattern = _bounded(word, re.I)
    return any(pattern.search(text) for text in texts)


# What may stand before a sentence's first word: list and heading marks, table bars, a
# number, the end of the sentence before.
_SENTENCE_START = re.compile(r"(?:^|[.!?:|]\s)[\s#>*|\d.)-]*$|^[\s#>*|\d.)-]*$")


# A word with an inner capital ("gRPC", "iOS", "OpenVPN") is a name. A number is a
# value, not a name ("the first 50 rows", "212 buses"), and a word with a digit is as
# often a version said loosely ("python3", "s3fs", "40mg") or written another way (NFCorpus
# writes "V8" and "D3" with its numbers as "num") as a name: CoSQA dev, SciFact train and
# NFCorpus test held them to it and lost 2%, 24% and 0.6% of their answerable queries.
# Versions written whole are names (below).
_NAMED = re.compile(r"[a-z][A-Z]")


def distinguishing_words(question: str, texts: Sequence[str] = ()) -> tuple[str, ...]:
    """The names ``question`` spells: identifiers, versions, words with a digit or an
    inner capital, capitalised words inside a sentence, and a sentence's capitalised
    first word when one of ``texts`` (the closest passages) writes it as a name; no dates.
    A Title Case question ("How Long to Detox From Fish?", NFCorpus) names nothing by
    its capitals: only its identifiers."""
    words = _words(question)
    title_case = sum(w[:1].isupper() for w, _ in words) * 2 > len(words)
    lowercase = lowercase_names(texts) if not title_case else frozenset()
    found = []
    for word, starts in words:
        word = word.removesuffix("'s").removesuffix("'")
        if len(word) < 2 or word.lower() in _NOT_NAMES or _is_date(word):
            continue
        # "fare-engine" is a name where the library writes it so; "end-of-year" is words,
        # and so is "Plant-Based" in a Title Case question.
        identifier = _IDENTIFIER.fullmatch(word) is not None and _written(word, texts)
        identifier = identifier and not (title_case and word.istitle())
        capital = word[:1].isupper() and not title_case and not any(c.isdigit() for c in word)
        named = _NAMED.search(word) is not None and not title_case
        if capital and starts:
            capital = written_as_name(word, texts)
        code = word.islower() and word in lowercase
        if identifier or named or capital or code or _VERSION.fullmatch(word):
            found.append(word)
    return tuple(dict.fromkeys(found))


# A version the question names ("2.3.2", "v4.3.0", "5.4"). The index splits it into its
# numbers, and every passage holds a 2 and a 3; so it is looked for as written, with a
# "v" before it or a later part after it ("2.3" is held by "v2.3.1", "2.3.2" is not).
_VERSION = re.compile(r"[vV]?\d+(?:\.\d+)+")


def holds_version(version: str, text: str) -> bool:
    bare = version.lstrip("vV")
    return _version_pattern(bare).search(text) is not None


@functools.lru_cache(maxsize=256)
def _version_pattern(bare: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_.])[vV]?{re.escape(bare)}(?![A-Za-z0-9_]|\.[^\d\s])")


@functools.lru_cache(maxsize=256)
def _bounded(word: str, flags: int) -> re.Pattern[str]:
    """``word`` as a whole word on ASCII bounds (CJK may touch it: "23.5米")."""
    return re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])", flags)


# A question answered across two passages: one naming the thing, the other a hop away
# (the team that owns it, "whoever looks after", "the service that renders invoices").
# Only these may have their names held by two passages; the hop leg runs for them.
_RELATIVE = re.compile(r"\b(?:the|a|an)\s+[\w-]+\s+(?:that|who|which)\b|\bwhoever\b", re.I)


# Two passages answer together when one writes, beside the question's names, a name the
# other holds: the register's row "tap-gateway | Team Semaphore" and Team Semaphore's
# page; "owner: team-axle" and "Team Axle" (compared without case, spaces or hyphens).
# golden2 dev (enlarged), keyword: any pair for every question abstains on 13 of 41;
# any pair only for who / which-team / relative-clause questions, 21; that and linked
# pairs for the others, 19, so that a question answered across a hop but not phrased
# as one keeps its answer. False empties the same in all three (1 of 89; golden 1.9%).
_LINK = re.compile(r"[A-Z][\w-]*(?:[ \t]+[A-Z][\w-]*)*|[a-z0-9]+(?:-[a-z0-9]+)+")


def _key(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name.lower())


def _keys(text: str) -> set[str]:
    return {_key(m.group(0)) for m in _LINK.finditer(text)}


def _links(
    text: str, spelled: set[str], tokens: Callable[[str], list[str]], question: str
) -> set[str]:
    """The names ``text`` writes beside the question's: on a line holding one of its
    tokens, or anywhere when its first line (title and headings) holds one."""
    lines = text.splitlines()
    if lines and spelled & set(tokens(lines[0])):
        chosen = lines
    else:
        chosen = [line for line in lines if spelled & set(tokens(line))]
    asked = question.lower()
    found = set()
    for line in chosen:
        for match in _LINK.finditer(line):
            name = match.group(0)
            opening = _OPENING.search(line[: match.start()]) is not None
            if not opening and name.lower() not in asked and name.lower() not in _NOT_NAMES:
                found.add(_key(name))
    return found


# A sentence's first word is capitalised whatever it is ("We choose Paystream"); a table
# cell or a field value ("| Team Semaphore |", "Owner: Team Kestrel") is not an opening.
_OPENING = re.compile(r"(?:^|[.!?]\s+)[\s#>*\d.)-]*$")


def _hops(question: str) -> bool:
    return asks_for_someone(question) or _RELATIVE.search(question) is not None


# "When was Northline Go 3.0 released?", "On what date was … removed?": a date, written
# as one ("22 July 2025", "March 2024", "2025-07-22"), must be held with the names. A
# page naming 3.0 without a date says that 3.0 exists, not when it shipped. Tuned on
# golden2's enlarged dev: catches "When was Northline Go 3.0 released?" and "On what
# date was the old HMAC signing path removed…?"; "When was Northline Go 2.3.1
# released?" still answers ("Released 22 July 2025"). "When will / when is / when
# does" are left out: their answers are as often words ("after the freeze").
_ASKS_DATE = re.compile(r"\bwhen\s+(?:was|were|did)\b|\bwhat\s+date\b", re.I)
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATE_SHAPED = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:\s+\d{{4}})?\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b|\b{_MONTH}\s+(?:19|20)\d\d\b"
    r"|\b(?:19|20)\d\d-\d\d-\d\d\b",
    re.I,
)


def _held(
    required: Mapping[str, Sequence[str]],
    versions: Sequence[str],
    terms: set[str],
    text: str,
    dated: bool = False,
) -> bool:
    return (
        all(all(t in terms for t in toks) for toks in required.values())
        and all(holds_version(v, text) for v in versions)
        and (not dated or _DATE_SHAPED.search(text) is not None)
    )


# The noun phrase a question asks about: "what is fare-engine's ADMIN PORT", "who is the
# PRODUCT OWNER for …", up to its preposition or verb; or a short query that names
# something and then what about it ("Brightpay TRANSACTION FEE", "Bastion PRODUCT OWNER").
_QUESTION = re.compile(r"[?？]|^\s*(?:who|whom|whose|which|what|where|when|how)\b", re.I)
_ASKED = re.compile(
    r"^\s*(?:what|which|who)(?:'s|\s+is|\s+are|\s+was|\s+were)\s+(?:(?:the|a|an|our|my)\s+)?"
    r"(.+?)(?=\s+(?:of|for|in|on|at|to|from|with|by|does|do|did|that|when|if)\b|\?|$)",
    re.I,
)
SHORT_QUERY = 5  # words: "student monthly ticket price" is a lookup, not a sentence


def is_lookup(question: str) -> bool:
    """Whether ``question`` is a question ("?", or a leading wh-word) or a short lookup
    ("Brightpay transaction fee") or a command for a document ("Find the runbook for
    restarting tap-gateway"), the searches this floor reads. A claim (SciFact: "DUSP4
    decreases apoptosis.") or a code search (CoSQA: "datetime to epoch python2") names
    things it does not ask about: SciFact train lost 24% of its answerable claims to it."""
    if _QUESTION.search(question) or _FETCH.search(question):  # "Find the runbook for …"
        return True
    short = len(question.split()) <= SHORT_QUERY
    return short and not question.rstrip().endswith(".")


def asked_phrase(question: str, names: Sequence[str]) -> list[str]:
    """The words of the noun phrase ``question`` asks about, after its last possessive
    ("fare-engine's admin port" → admin, port); [] when it has none."""
    if found := _ASKED.search(question):
        phrase = found.group(1)
    elif names and not _QUESTION.search(question) and len(question.split()) <= SHORT_QUERY:
        phrase = question
    else:
        return []
    phrase = re.split(r"'s?\s+", phrase)[-1]
    return [word for word, _ in _words(phrase)]


def asked_terms(
    question: str,
    names: Sequence[str],
    streams: Sequence[Sequence[str]],
    tokens: Callable[[str], list[str]],
) -> dict[str, list[str]]:
    """The two-word terms of the asked phrase that the library writes as one ("product
    owner", "transaction fee", "admin port": adjacent in one of ``streams``, the closest
    passages' tokens in order), each with its two tokens. A pair no passage writes
    together ("admin interface") is the question's own wording and is not held to it;
    neither are names (held anyway) and stopwords."""
    words = asked_phrase(question, names)
    found: dict[str, list[str]] = {}
    for first, second in pairwise(words):
        if {first, second} & set(names) or {first.lower(), second.lower()} & _NOT_NAMES:
            continue
        pair = tokens(first) + tokens(second)
        if len(pair) == 2 and any(_adjacent(pair, stream) for stream in streams):
            found[f"{first} {second}"] = pair
    return found


# "How do I switch on OFFLINE MODE in Northline Go?", "How do I set a HOME STOP in
# Northline Go?": a how-to question about a feature of something it names asks for a
# passage that holds the feature's words with the name. A feature that does not exist
# has its words scattered over the library (offline validators, a dark mode, stops),
# never in one passage with the product. Only when the feature is followed by "in / on /
# for / from …" and a name: "How do I make the ticket code bigger for inspectors'
# older handhelds?" names nothing, and its answer paraphrases ("doubles the code size").
_HOW_TO = re.compile(
    r"^\s*how\s+(?:do|can|should)\s+\w+\s+\w+(?:\s+(?:on|off|up))?\s+"
    r"(?:(?:a|an|the|my|our|your)\s+)?((?:[\w-]+\s+){0,2}?[\w-]+)\s+(?:in|on|for|from|into)\s+",
    re.I,
)


# A command for a document ("Find the runbook for restarting tap-gateway", "Open the
# tap-gateway staging config") asks for the thing it names after its verb, of or for
# something it names: a runbook that restarts the board renderer, tap-gateway's
# production config, hold some of those words and not the others.
_FETCH = re.compile(
    r"^\s*(?:find|open|show)(?:\s+me)?\s+(?:(?:a|an|the|our|my)\s+)?"
    r"((?:[\w-]+\s+){0,2}?[\w-]+)(?:\s+(?:in|on|for|from|of|about)\s+|\s*[.?!]?\s*$)",
    re.I,
)


def feature_words(question: str, names: Sequence[str]) -> list[str]:
    """The words of the feature a "how do I <verb> <feature> in <name>" question asks
    about (offline, mode), when a name follows it, or of the document a "find / open
    the <thing> of <name>" command asks for (runbook; staging, config); [] otherwise."""
    if (found := _HOW_TO.search(question)) is not None:
        named = any(name in question[found.end() :] for name in names)
    elif (found := _FETCH.search(question)) is not None:
        named = bool(names)
    if found is None or not named:
        return []
    words = [w for w, _ in _words(found.group(1))]
    return [w for w in words if w.lower() not in _NOT_NAMES and w not in names]


# "What time does Lantern's RETRO start?": what a name owns is held with the name, in
# one passage (Semaphore's page has a retro, Lantern's a demo).
_POSSESSIVE = re.compile(r"([\w-]+)'s?\s+([\w-]+)")


def possessions(question: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """Each name's possessive with the word after it ("Lantern's retro" → (Lantern,
    retro)); [] for none."""
    found = []
    for owner, owned in _POSSESSIVE.findall(question):
        if owner in names and owned.lower() not in _NOT_NAMES and owned not in names:
            found.append((owner, owned))
    return found


def _owned_apart(
    pairs: Sequence[tuple[str, str]], terms: Sequence[set[str]], tokens: Callable[[str], list[str]]
) -> tuple[str, str] | None:
    """The first (owner, owned) pair that no passage's ``terms`` hold together."""
    for owner, owned in pairs:
        wanted = set(tokens(owner)) | set(tokens(owned))
        if wanted and not any(wanted <= held for held in terms):
            return owner, owned
    return None


def _adjacent(pair: Sequence[str], stream: Sequence[str]) -> bool:
    return any(a == pair[0] and b == pair[1] for a, b in pairwise(stream))


def distinct_reason(
    question: str,
    tokens: Callable[[str], list[str]],
    passages: Sequence[PassageRow],
) -> str | None:
    """Why ``question`` gets nothing, or None when one of ``passages`` (the answer's
    leading ones) holds every distinguishing word, or two of them do for a question
    answered a hop away.

    ``tokens`` is the index's tokenizer: a word counts as held when all its index tokens
    are in the passage's title, headings or text (a version: when it is written there).
    A name the library does not store at all is held by no passage, so the question
    answers nothing (golden "How do I set up SAML single sign-on…?").
    """
    if not passages or not is_lookup(question):
        return None
    texts = [f"{head_text(p.title, p.heading_path)}\n{p.text}" for p in passages]
    words = distinguishing_words(question, texts)
    versions = [w for w in words if _VERSION.fullmatch(w)]
    required = {w: toks for w in words if w not in versions and (toks := tokens(w))}
    if not required and not versions and len(asked_phrase(question, words)) < 2:
        return None  # nothing to hold: the passages are not tokenized
    streams = [tokens(text) for text in texts]
    required |= asked_terms(question, words, streams, tokens)
    feature = {w: toks for w in feature_words(question, words) if (toks := tokens(w))}
    required |= feature
    if not required and not versions:
        return None
    terms = [set(stream) for stream in streams]
    if apart := _owned_apart(possessions(question, words), terms, tokens):
        return (
            f"nothing answers it: none of the {len(passages)} closest passages names "
            f"{apart[0]!r} with its {apart[1]!r}; the answer is probably not stored"
        )
    dated = _ASKS_DATE.search(question) is not None
    if any(_held(required, versions, t, x, dated) for t, x in zip(terms, texts, strict=True)):
        return None
    spelled = {t for toks in required.values() for t in toks}
    hops = _hops(question)
    if feature and not hops:
        # A feature or a document belongs to the thing named with it: the register row
        # naming fare-engine and a release note's "version" a link away are not "the
        # Kotlin version of fare-engine".
        return _nothing(passages, required, versions, dated)
    links: dict[int, set[str]] = {}  # read only for pairs that hold the names

    def linked(i: int, j: int) -> bool:
        if i not in links:
            links[i] = _links(texts[i], spelled, tokens, question)
        return bool(links[i] & _keys(texts[j]))

    for i, j in combinations(range(len(texts)), 2):
        both = f"{texts[i]}\n{texts[j]}"
        if not _held(required, versions, terms[i] | terms[j], both, dated):
            continue
        if hops or linked(i, j) or linked(j, i):
            return None
    return _nothing(passages, required, versions, dated)


def _nothing(
    passages: Sequence[PassageRow],
    required: Mapping[str, Sequence[str]],
    versions: Sequence[str],
    dated: bool,
) -> str:
    names = ", ".join(repr(w) for w in (*required, *versions))
    value = " with a date" if dated else ""
    return (
        f"nothing answers it: none of the {len(passages)} closest passages names {names} "
        f"together{value}; the answer is probably not stored"
    )
