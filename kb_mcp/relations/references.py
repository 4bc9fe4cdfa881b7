"""Which document a reference names: ids, file names, titles, dates, a series. Pure.

``relations/detect.py`` finds what a document says about another ("Errata for the 2025
onboarding guide", "Superseded by ADR-0012"); this module decides which document those
words name, among the library's (``DocNames``). An id or number (``ADR-0012`` =
``ADR-12``, ``TICKET-88``, ``v2.3.1``) or a file name must match exactly. A title must
name one document clearly: every word of the title in the reference, every word of the
reference in the title, or a close order-free similarity (``TITLE_MATCH``), ahead of
the next candidate by ``TITLE_MARGIN``. A withdrawal named by date ("our post of 1
December") names the document of that day; "last week's minutes" the latest earlier
document of the stater's own series. Two candidates are an ambiguity, never an edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from rapidfuzz import fuzz

from kb_mcp.index.textprep import CJK_RUN

DATED = "dated "  # the reference of a document named by its date: "dated 2025-12-01"

# Title matching (rapidfuzz token_sort_ratio on normalized titles, 0-100). Hand-tuned on
# the unit corpora of tests/test_relations.py: "retention policy" vs "Errata for
# retention policy" scores 82 and must not pass; the title itself scores 100.
TITLE_MATCH = 85
TITLE_MARGIN = 10
CONTENT_WORDS_CACHE = 1 << 14  # titles and references (~200 bytes each)

_ID = re.compile(r"\b(?P<prefix>[A-Z][A-Z0-9]{1,9})[- ]#?0*(?P<number>\d{1,6})\b")
_VERSION = re.compile(r"(?<![\w.])v?(?P<v>\d+\.\d+(?:\.\d+){0,3})(?![\w.])")
_FILE = re.compile(r"[\w./-]+\.(?:md|markdown|txt|rst|org|adoc|html?|pdf|docx)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_STOP = frozenset("the a an of to for on in at and our this that".split())
# Words that frame a reference rather than name its document ("last week's post on …").
_FRAMING = frozenset(
    "last week weeks s post posts notice announcement page note document said what i we "
    "earlier previous item yesterday update updates changes".split()
)
# A Chinese title has no spaces: one \w+ run would be one "word", and one word names a
# topic, never a document. So a CJK run is compared by its overlapping two-character
# pieces, after the words that frame a notice rather than name it ("关于…的通知",
# "撤回", "作废") are taken out: "关于调整夜班车时刻表的通知" and "《调整夜班车时刻表》
# 现予撤回" then name one document.
_CJK_FRAMING = re.compile(
    "关于|的通知|通知|公告|声明|说明|现予|予以|特此|已经|已|撤回|撤销|作废|废止|停止执行|取消"
)
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
# A month's name or short form, whole ("the market report" names no month).
_MONTH_WORD = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
# "The March issue", "the June minutes": an earlier document of the stater's series,
# named by its month.
_MONTH_OF_SERIES = re.compile(
    rf"\bthe (?P<month>{_MONTH_WORD})\.? (?:issue|edition|newsletter|minutes|notes|report|"
    r"bulletin|digest|update)\b",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"\b(?:last week'?s?|yesterday'?s?|last month'?s?|the previous|previous)\b"
    rf"|{_MONTH_OF_SERIES.pattern}",
    re.IGNORECASE,
)
# Words a series' titles differ by: "Lantern news, March 2025" and "Lantern news, April
# 2025" are one series, "sso-broker 4.2.0" and "sso-broker 4.2.1" another.
_SERIES_NOISE = re.compile(rf"^(?:\d+|v\d+|{_MONTH_WORD})$")


@dataclass(frozen=True, slots=True)
class Reference:
    """What a reference names: ids (``adr-12``), versions, file names, or a title."""

    ids: frozenset[str]
    files: frozenset[str]
    title: str

    @property
    def exact(self) -> bool:
        return bool(self.ids or self.files)


@dataclass(frozen=True, slots=True)
class DocNames:
    """How a document can be referred to: its title, ids in its title / paths, file names
    (and its date, for "last week's minutes")."""

    document_id: int
    title: str
    ids: frozenset[str]
    files: frozenset[str]
    date: str | None = None


def normalize(text: str) -> str:
    """Lower case words without articles and punctuation: how titles are compared."""
    return " ".join(w for w in _words(text) if w not in _STOP)


def _words(text: str) -> list[str]:
    """Words; a CJK run becomes its two-character pieces (``_CJK_FRAMING``)."""
    words = []
    for word in _WORD.findall(text.lower()):
        if CJK_RUN.search(word) is None:
            words.append(word)
            continue
        for part in re.split(f"({CJK_RUN.pattern})", word):
            if not part:
                continue
            if CJK_RUN.fullmatch(part) is None:
                words.append(part)
                continue
            run = _CJK_FRAMING.sub(" ", part)
            for piece in run.split():
                words += [piece[i : i + 2] for i in range(max(1, len(piece) - 1))]
    return words


def ids_in(text: str) -> frozenset[str]:
    """Ids (``ADR-0012`` → ``adr-12``) and versions (``v2.3.1`` → ``v2.3.1``) in ``text``."""
    ids = {f"{m['prefix'].lower()}-{int(m['number'])}" for m in _ID.finditer(text)}
    ids |= {f"v{m['v']}" for m in _VERSION.finditer(text)}
    return frozenset(ids)


def file_names(paths: Iterable[str]) -> frozenset[str]:
    """How ``paths`` can be named (lower case): file name, stem, and every trailing part
    of the path (``docs/adr/0012-db.md`` → ``adr/0012-db.md``, ``0012-db.md``, ``0012-db``)."""
    names = set()
    for path in paths:
        parts = PurePosixPath(path.replace("\\", "/").lower()).parts
        if not parts:
            continue
        names.add(parts[-1].rsplit(".", 1)[0])
        names.update("/".join(parts[i:]) for i in range(len(parts)))
    return frozenset(names)


def _reference_files(reference: str) -> frozenset[str]:
    """Files a reference names: a path as written, a bare name also by its stem."""
    found = set()
    for name in _FILE.findall(reference):
        name = name.lower().lstrip("./")
        found.add(name)
        if "/" not in name:
            found.add(name.rsplit(".", 1)[0])
    return frozenset(found)


# Every document a sync stores re-checks the library's relation rows against its names
# (``relink._may_name``), so one reference was parsed again for each document: on the
# bench perf corpus (1,250 files) that re-parsing was a quarter of the re-matching and
# 8 % of the writer's CPU (cProfile). Pure and immutable, so it is parsed once.
@lru_cache(maxsize=4_096)
def parse_reference(reference: str) -> Reference:
    files = _reference_files(reference)
    return Reference(ids_in(reference), files, normalize(reference))


def doc_names(
    document_id: int, title: str, paths: Sequence[str], doc_date: str | None = None
) -> DocNames:
    stems = " ".join(PurePosixPath(p).stem.upper() for p in paths)
    return DocNames(
        document_id, normalize(title), ids_in(f"{title} {stems}"), file_names(paths), doc_date
    )


def match_reference(
    reference: str,
    candidates: Iterable[DocNames],
    loose: bool = False,
    stater: DocNames | None = None,
) -> list[int]:
    """The documents ``reference`` can mean: one is a match, two or more an ambiguity.

    ``stater`` is the document making the reference: "last week's minutes" names the
    latest earlier document of its own series (same title). ``loose`` (for updates) also
    accepts a sentence that covers most of a title's words ("Update, 3 February: the
    retention period for ridership data is now 36 months" → "Ridership data retention"),
    since an update note often names the fact, not the page.
    """
    ref = parse_reference(reference)
    candidates = list(candidates)
    if ref.exact:
        return [
            c.document_id
            for c in candidates
            if (ref.ids and ref.ids <= c.ids) or (ref.files and ref.files & c.files)
        ]
    if reference.startswith(DATED):
        return _dated(reference.removeprefix(DATED), candidates, stater)
    if stater is not None and _RELATIVE.search(reference):
        series = _previous_in_series(stater, candidates, reference)
        if series:
            return series
    content = content_words(ref.title)
    if len(content) < 2:
        return []  # one word names a topic, not a document
    scored = sorted(
        ((_title_score(ref.title, c.title, loose), c.document_id) for c in candidates),
        reverse=True,
    )
    if not scored or scored[0][0] < TITLE_MATCH:
        return []
    best = scored[0][0]
    return [doc for score, doc in scored if score > max(TITLE_MATCH - 1, best - TITLE_MARGIN)]


def may_name(
    reference: str, candidate: DocNames, loose: bool = False, stater: DocNames | None = None
) -> bool:
    """Whether ``candidate`` can be in ``match_reference``'s answer for ``reference`` in
    any library that holds it: False means it is in none, whatever the other documents.

    Lets a stored (or removed) document skip the rows it cannot answer (``relations/relink``)
    without matching them over the library. A title only makes the answer when it scores
    above ``TITLE_MATCH - 1`` (the answer keeps every score above
    ``max(TITLE_MATCH - 1, best - TITLE_MARGIN)``), a series member only when it is of
    the stater's series and earlier, a dated one only on that day.
    """
    ref = parse_reference(reference)
    if ref.exact:
        return bool(
            (ref.ids and ref.ids <= candidate.ids) or (ref.files and ref.files & candidate.files)
        )
    if reference.startswith(DATED):
        day = reference.removeprefix(DATED)
        return bool(candidate.date) and candidate.date[:10] == day
    relative = stater is not None and _RELATIVE.search(reference)
    if relative and _previous_in_series(stater, [candidate]):
        return True
    if len(content_words(ref.title)) < 2:
        return False
    return _title_score(ref.title, candidate.title, loose) > TITLE_MATCH - 1


def _dated(day: str, candidates: list[DocNames], stater: DocNames | None) -> list[int]:
    """Documents dated ``day``; several are narrowed to those sharing a word with the
    stating document's title (a notice about the closure names the closure)."""
    same_day = [c for c in candidates if c.date and c.date[:10] == day]
    if len(same_day) > 1 and stater is not None:
        words = content_words(stater.title)
        related = [c for c in same_day if content_words(c.title) & words]
        same_day = related or same_day
    return [c.document_id for c in same_day]


def is_relative(reference: str) -> bool:
    """Whether a reference names its document relative to the stating one ("last week's
    minutes")."""
    return _RELATIVE.search(reference) is not None


def series_key(title: str) -> str:
    """A normalized title without the numbers, versions and months its series differ by."""
    return " ".join(w for w in title.split() if not _SERIES_NOISE.match(w))


def _previous_in_series(
    stater: DocNames, candidates: list[DocNames], reference: str = ""
) -> list[int]:
    """The latest earlier document of the stater's series; "the March issue" the latest
    earlier one dated in March."""
    key = series_key(stater.title)
    if not stater.date or len(content_words(key)) < 1:
        return []
    month = _MONTH_OF_SERIES.search(reference)
    wanted = None
    if month is not None:
        wanted = next(
            (i for i, m in enumerate(_MONTH_NAMES, 1) if m.startswith(month["month"][:3].lower())),
            None,
        )
    earlier = [
        c
        for c in candidates
        if series_key(c.title) == key
        and c.date
        and c.date[:10] < stater.date[:10]
        and (wanted is None or c.date[5:7] == f"{wanted:02d}")
    ]
    if not earlier:
        return []
    latest = max(c.date[:10] for c in earlier if c.date)
    return [c.document_id for c in earlier if c.date and c.date[:10] == latest]


def _stem(word: str) -> str:
    """A crude stem, enough to let "switch-off" name "switched off", "validator" name
    "validators"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=CONTENT_WORDS_CACHE)
def content_words(normalized: str) -> frozenset[str]:
    """The words of a normalized reference or title that name something.

    Cached: every document stored re-matches the library's pending references against
    its title, so the same few strings were stemmed again per document (a fifth of the
    writer's CPU on the bench corpus, issue 10); a pure function of its argument.
    """
    return frozenset(_stem(w) for w in normalized.split() if w not in _FRAMING)


def _title_score(ref: str, title: str, loose: bool = False) -> float:
    """How well a reference names a title (0-100): every word of the title in the
    reference, or every word of the reference in the title (two words or more), is a
    near match; otherwise the order-free similarity. ``loose``: three or more title words
    and three quarters of them in the reference also pass."""
    if not title:
        return 0.0
    words, ref_words = content_words(title), content_words(ref)
    similarity = fuzz.token_sort_ratio(ref, title)
    if len(words) >= 2 and words <= ref_words:
        return max(95.0, similarity)
    if len(ref_words) >= 2 and ref_words <= words:
        return max(90.0, similarity)
    shared = words & ref_words
    if loose and len(shared) >= 3 and len(shared) >= 0.75 * len(words):
        return max(86.0, similarity)
    return similarity
