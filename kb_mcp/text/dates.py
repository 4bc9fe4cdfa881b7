"""Dates as people write them, in every language of ``text/lexicon``. Pure.

A document is dated, and a question names its time, in many forms: ``2025-03-14``,
``14.03.2025``, "March 14th, 2025", "14. März 2025", "14 de marzo de 2025", ``2025年3月14日``,
``令和7年3月14日``, ``2025년 3월 14일``, "Mar 2025", "Q3 2024", ``2024年第3四半期``, "H1 2025",
``2024-W12``. Each is read as a ``Period`` (its first and last day, and how precise it is),
so the document end (``text/document_dates``) and the question end (``search/freshness``) read
the same dates. The words come from ``text/lexicon``; this module holds the grammar.

Rules a reader needs to know:

- **Day-first.** ``03/04/2025`` is 3 April: a numeric date with its year last is read
  day-first, as everywhere but the US writes it; month-first only where the day-first
  reading is impossible (``03/14/2025``).
- **A lone number is a year only where words say so.** "2024" is a ``bare`` mention:
  ``find_dates`` reports it, and a caller takes it as a year only after a word of time
  ("in 2024", "2024年当時"); "2048 connections", "port 2025" and "v2024.1" are no dates.
- **A dotted year-first date is a version unless both parts have two digits**
  (``2024.1.2`` is a release, ``2024.03.14`` a day).
- **A date without its year** ("3 February", ``3月14日``) takes ``default_year``; with
  none, it is no date.
- Full-width digits (``２０２５年``) read as digits.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from kb_mcp.text import lexicon as lx

DAY, WEEK, MONTH, SEASON, PART, QUARTER, HALF, YEAR = (
    "day",
    "week",
    "month",
    "season",
    "part",  # a named part of a year: "mid-2022", "Anfang 2024"
    "quarter",
    "half",
    "year",
)


@dataclass(frozen=True, slots=True)
class Period:
    """A stretch of days a date names: ``first`` to ``last``, both included."""

    first: date
    last: date
    precision: str


@dataclass(frozen=True, slots=True)
class Mention:
    """A date found in a text: where, and what it names. ``bare``: a lone number that is
    a year only where words say so; ``cjk``: written with 年/月/日 (or 년/월/일), which
    names a time without a word before it."""

    period: Period
    start: int
    end: int
    bare: bool = False
    cjk: bool = False


def fold(word: str) -> str:
    """``word`` lower-cased, its accents dropped and its spaces single: the key every
    word table here is looked up with (``März`` and ``Marz`` are one month)."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def alternation(words: Iterable[str]) -> str:
    """A regex alternative of ``words`` (and their accent-free spellings). A word in a
    script with letters and spaces must not sit inside a longer word; a Chinese, Japanese
    or Korean one may (those scripts write no spaces).

    Written as a trie (``mar(?:ch|zo|s)?``), not as a list of words: a list makes the
    engine try every word at every position of a text, and with the month names of
    seven languages that cost a search about a millisecond a question."""
    forms = {" ".join(form.split()) for word in words for form in (word.lower(), fold(word))}
    groups: dict[tuple[bool, bool], list[str]] = {}
    for form in forms:
        latin_start = form[0].isalpha() and not _is_cjk(form[0])
        latin_end = form[-1].isalpha() and not _is_cjk(form[-1])
        groups.setdefault((latin_start, latin_end), []).append(form)
    parts = []
    for (latin_start, latin_end), group in sorted(groups.items()):
        body = _trie(group)
        if latin_start:
            body = rf"(?<![^\W\d_]){body}"
        if latin_end:
            body = rf"{body}(?![^\W\d_])"
        parts.append(body)
    return "(?:" + "|".join(parts) + ")"


def _trie(words: Iterable[str]) -> str:
    tree: dict[str, dict] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _branches(tree)


def _branches(node: dict[str, dict]) -> str:
    alternatives = [
        (r"\s+" if char == " " else re.escape(char)) + _branches(child)
        for char, child in sorted(node.items())
        if char
    ]
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return f"(?:{body})?" if "" in node else body


def _is_cjk(char: str) -> bool:
    return char >= "\u2e80"


_MONTH_OF = {
    fold(word): number
    for cells in lx.MONTHS.values()
    for number, cell in enumerate(cells, start=1)
    for word in cell.split()
}
_MONTHS = alternation(word for cells in lx.MONTHS.values() for c in cells for word in c.split())
# What a text must hold to hold a date: a digit (any script's) or a Japanese era's first
# year, and with no default year a year itself (a date without one is then none).
_DIGIT = re.compile(r"\d|元年")
_YEARISH = re.compile(r"(?:19|20)\d\d|[０-９]|[元\d]\s*年")
_WIDE_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")

_Y = r"(?P<y>(?:19|20)\d{2})"
_NUMBER_START = r"(?<![\w.-])"  # not the tail of a word, a number, a version or an id
_NUMBER_END = r"(?!\d|[.,]\d)"
_LINK = rf"(?:{alternation(lx.CONNECTORS)}\s+)?"
_ORDINAL = "(?:" + "|".join(re.escape(o) for o in lx.ORDINALS) + ")?"
_CJK_DIGIT = "[" + "".join(lx.CJK_NUMERALS) + "]"


def _day(year: int, month: int, day: int) -> Period:
    one = date(year, month, day)
    return Period(one, one, DAY)


def _months(year: int, first: int, last: int, precision: str) -> Period:
    following = date(year + last // 12, last % 12 + 1, 1)
    return Period(date(year, first, 1), following - timedelta(days=1), precision)


def _year_of(found: _Groups, default_year: int | None) -> int | None:
    return int(found["y"]) if found["y"] else default_year


def _numeric_ymd(found: _Groups, _: int | None) -> Period | None:
    if found["s"] == "." and (len(found["m"]) < 2 or len(found["d"]) < 2):
        return None  # 2024.1.2: a version
    return _day(int(found["y"]), int(found["m"]), int(found["d"]))


def _numeric_dmy(found: _Groups, _: int | None) -> Period | None:
    first, second = int(found["a"]), int(found["b"])
    day, month = (second, first) if second > 12 >= first else (first, second)
    return _day(int(found["y"]), month, day)


def _iso_week(found: _Groups, _: int | None) -> Period | None:
    monday = date.fromisocalendar(int(found["y"]), int(found["w"]), 1)
    return Period(monday, monday + timedelta(days=6), WEEK)


def _code(found: _Groups, _: int | None) -> Period | None:
    part, year = int(found["n"]), int(found["y"])
    if found["k"].lower() == "h":
        return None if part > 2 else _months(year, part * 6 - 5, part * 6, HALF)
    return _months(year, part * 3 - 2, part * 3, QUARTER)


def _cjk(found: _Groups, _: int | None) -> Period | None:
    if found["era"]:
        number = 1 if found["en"] == "元" else int(found["en"])
        year = lx.JAPANESE_ERAS[found["era"]] + number
    else:
        year = int(found["y"])
    if found["q"] or found["q2"]:
        part = lx.CJK_NUMERALS[found["q"] or found["q2"]]
        return _months(year, part * 3 - 2, part * 3, QUARTER)
    if found["h"]:
        half = lx.CJK_HALVES[found["h"]]
        return _months(year, half * 6 - 5, half * 6, HALF)
    if found["m"] and found["d"]:
        return _day(year, int(found["m"]), int(found["d"]))
    if found["m"]:
        return _months(year, int(found["m"]), int(found["m"]), MONTH)
    return _months(year, 1, 12, YEAR)


def _cjk_month_day(found: _Groups, default_year: int | None) -> Period | None:
    if default_year is None:
        return None
    return _day(default_year, int(found["m"]), int(found["d"]))


def _named_day(found: _Groups, default_year: int | None) -> Period | None:
    year = _year_of(found, default_year)
    if year is None:
        return None
    return _day(year, _MONTH_OF[fold(found["mon"])], int(found["d"]))


def _named_month(found: _Groups, _: int | None) -> Period | None:
    month = _MONTH_OF[fold(found["mon"])]
    return _months(int(found["y"]), month, month, MONTH)


def _season(found: _Groups, _: int | None) -> Period | None:
    year, month = int(found["y"]), lx.SEASONS[_key(found["s"], lx.SEASONS)]
    return Period(date(year, month, 1), date(year, month, 15), SEASON)


def _year_part(found: _Groups, _: int | None) -> Period | None:
    first, last = lx.YEAR_PARTS[_key(found["p"], lx.YEAR_PARTS)]
    return _months(int(found["y"]), first, last, PART)


def _half_phrase(found: _Groups, _: int | None) -> Period | None:
    half = lx.HALF_PHRASES[_key(found["hp"], lx.HALF_PHRASES)]
    return _months(int(found["y"]), half * 6 - 5, half * 6, HALF)


def _bare_year(found: _Groups, _: int | None) -> Period | None:
    return _months(int(found["y"]), 1, 12, YEAR)


def _key(word: str, table: dict[str, object]) -> str:
    """The key of ``table`` that ``word`` (as written in a text) stands for."""
    wanted = fold(word)
    return next(key for key in table if fold(key) == wanted)


class _Groups:
    """One form's groups in the one pattern of all forms (``f3_y`` is form 3's ``y``)."""

    __slots__ = ("_match", "_prefix")

    def __init__(self, match: _Groups, prefix: str) -> None:
        self._match, self._prefix = match, prefix

    def __getitem__(self, name: str) -> str | None:
        return self._match[self._prefix + name]


_Reader = Callable[[_Groups, int | None], Period | None]
# The forms, in the order they are tried at one place: the longer reading first.
_FORMS: tuple[tuple[str, str, _Reader], ...] = (
    (
        "numeric",
        rf"{_NUMBER_START}{_Y}(?P<s>[-/.])(?P<m>\d{{1,2}})(?P=s)(?P<d>\d{{1,2}}){_NUMBER_END}",
        _numeric_ymd,
    ),
    (
        "numeric",
        rf"{_NUMBER_START}{_Y}-(?P<m>0[1-9]|1[0-2])(?!\d|-\d|[.,]\d)",
        lambda f, _: _months(int(f["y"]), int(f["m"]), int(f["m"]), MONTH),
    ),
    (
        "numeric",
        rf"{_NUMBER_START}(?P<a>\d{{1,2}})(?P<s>[-/.])(?P<b>\d{{1,2}})(?P=s){_Y}{_NUMBER_END}",
        _numeric_dmy,
    ),
    ("numeric", rf"{_NUMBER_START}{_Y}-?W(?P<w>\d{{2}})(?!\d)", _iso_week),
    ("code", rf"(?<![^\W\d_])(?P<k>[QH])(?P<n>[1-4])\s*[-/]?\s*{_Y}{_NUMBER_END}", _code),
    ("code", rf"{_NUMBER_START}{_Y}\s*[-/]?\s*(?P<k>[QH])(?P<n>[1-4])(?![\w])", _code),
    (
        "cjk",
        rf"(?:(?P<era>{'|'.join(lx.JAPANESE_ERAS)})\s*(?P<en>元|\d{{1,2}})|(?<!\d){_Y})"
        rf"\s*[{lx.CJK_YEAR}]"
        rf"(?:\s*(?:第\s*)?(?P<q>{_CJK_DIGIT})\s*(?:{'|'.join(lx.CJK_QUARTER)})"
        rf"|\s*Q(?P<q2>[1-4])"
        rf"|\s*(?P<h>{'|'.join(lx.CJK_HALVES)})"
        rf"|\s*(?P<m>\d{{1,2}})\s*[{lx.CJK_MONTH}](?:\s*(?P<d>\d{{1,2}})\s*[{lx.CJK_DAY}])?)?",
        _cjk,
    ),
    (
        "cjk",
        rf"(?<!\d)(?P<m>\d{{1,2}})\s*[{lx.CJK_MONTH}]\s*(?P<d>\d{{1,2}})\s*[{lx.CJK_DAY}]",
        _cjk_month_day,
    ),
    (
        "named",
        rf"(?<![\w.])(?P<d>\d{{1,2}}){_ORDINAL}\s*{_LINK}(?P<mon>{_MONTHS})\.?"
        rf"(?:,?\s*{_LINK}{_Y}(?!\d))?",
        _named_day,
    ),
    (
        "named",
        rf"(?P<mon>{_MONTHS})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?!\d)"
        rf"(?:,?\s+{_Y}(?!\d))?",
        _named_day,
    ),
    ("named", rf"(?P<mon>{_MONTHS})(?:\.\s*|,?\s+){_LINK}{_Y}(?!\d)", _named_month),
    ("named", rf"(?P<s>{alternation(lx.SEASONS)})\s+{_LINK}{_Y}(?!\d)", _season),
    ("named", rf"(?P<p>{alternation(lx.YEAR_PARTS)})[-\s]\s*{_LINK}{_Y}(?!\d)", _year_part),
    (
        "named",
        rf"(?:(?<![^\W\d_])the\s+)?(?P<hp>{alternation(lx.HALF_PHRASES)})\s+{_Y}(?!\d)",
        _half_phrase,
    ),
    (
        "named",
        rf"(?<!\d)(?P<n>[1-4]){_ORDINAL}\s*{alternation(lx.QUARTER_WORDS)}\s+{_LINK}{_Y}(?!\d)",
        lambda f, _: _months(int(f["y"]), int(f["n"]) * 3 - 2, int(f["n"]) * 3, QUARTER),
    ),
    ("bare", rf"{_NUMBER_START}{_Y}(?!\w|[.,]\d|[-/]\d)", _bare_year),
)


def _scoped(pattern: str, prefix: str) -> str:
    return re.sub(r"\(\?P([<=])(\w+)", lambda found: f"(?P{found[1]}{prefix}{found[2]}", pattern)


# One pattern of all forms, scanned once: at one place the first form that reads it wins.
_ANY_DATE = re.compile(
    "|".join(f"(?P<f{i}>{_scoped(pattern, f'f{i}_')})" for i, (_, pattern, _) in enumerate(_FORMS)),
    re.IGNORECASE,
)


def find_dates(text: str, default_year: int | None = None) -> Iterator[Mention]:
    """The dates in ``text``, in order, none overlapping another (at one place the
    first form of ``_FORMS`` wins: "14 March 2025" is a day, not the month "March 2025").
    ``default_year``: the year of a date written without one; None: such a date is none.
    """
    if (_DIGIT if default_year else _YEARISH).search(text) is None:  # a cheap answer
        return
    for match in _ANY_DATE.finditer(text.translate(_WIDE_DIGITS)):
        form = match.lastgroup or ""
        name, _, reader = _FORMS[int(form[1:])]
        try:
            period = reader(_Groups(match, form + "_"), default_year)
        except (ValueError, KeyError, StopIteration):
            continue
        if period is not None:
            yield Mention(period, *match.span(), bare=name == "bare", cjk=name == "cjk")


def first_date(
    text: str, default_year: int | None = None, *, anchored: bool = False
) -> Mention | None:
    """The first date in ``text`` that is one without words around it (no bare year);
    ``anchored``: only one that opens ``text`` (after blanks)."""
    opening = len(text) - len(text.lstrip())
    for mention in find_dates(text, default_year):
        if anchored and mention.start != opening:
            return None
        if not mention.bare:
            return mention
    return None


class Cue:
    """Words that say what a date next to them is ("effective 3 February", "as of March
    2024", "2025年4月1日施行", "2024年3月之前"): ``before`` finds one ending right before a
    date (separators may sit between, and with ``articles`` an article: "before the
    April 2025 change"), ``after`` one starting right after it. Each returns the word as
    its table spells it."""

    _SPAN = 40

    def __init__(
        self, before: Iterable[str], after: Iterable[str] = (), *, articles: bool = True
    ) -> None:
        before, after = tuple(before), tuple(after)
        self._words = {fold(word): word for word in (*before, *after)}
        article = rf"(?:\s+{alternation(lx.ARTICLES)})?" if articles else ""
        self._before = re.compile(
            rf"(?P<w>{alternation(before)}){article}[\s:：,]*$", re.IGNORECASE
        )
        self._after = (
            re.compile(rf"\s*(?P<w>{alternation(after)})", re.IGNORECASE) if after else None
        )

    def before(self, text: str, start: int) -> str | None:
        found = self._before.search(text, max(0, start - self._SPAN), start)
        return self._words[fold(found["w"])] if found else None

    def after(self, text: str, end: int) -> str | None:
        found = self._after.match(text, end) if self._after else None
        return self._words[fold(found["w"])] if found else None
