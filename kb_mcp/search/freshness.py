"""When a question and a passage are: the period a question names and a changelog
entry's own date. Pure.

The ranking model reads both (``search/features.py``: a candidate dated after the period
asked about, recency among the candidates); nothing here moves a document itself.

- **As-of questions**: "as of March 2024", "as of 2023-10-01", "back in July 2024",
  "before the April 2025 change", "Q3 2024" name a period; ``as_of_date`` is the day the
  question asks about. English phrasings only: a question in another language names no
  period here, and the model then reads recency alone.
- **Changelog entries**: a passage under a heading that opens with a date ("## 2025-03-01",
  "## [2.4.0] - 2025-03-01") is as old as its entry, not as its document's latest edit.

Dates compare as ISO strings (``YYYY-MM-DD`` prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from kb_mcp.ingest.dates import parse_date

_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), start=1)}
# Every way a month is written: its name and its short forms ("sep", "sept").
MONTH_WORDS = frozenset(_MONTHS) | {m[:3] for m in _MONTHS} | {"sept"}
_MONTH_ALT = "|".join(sorted(MONTH_WORDS, key=len, reverse=True))
_SEASONS = {"spring": 4, "summer": 7, "autumn": 10, "fall": 10, "winter": 1}
_HALVES = {"early": (1, 3), "mid": (6, 6), "late": (9, 10), "end of": (12, 12)}
_PARTS = {"h1": (1, 6), "h2": (7, 12), "first half of": (1, 6), "second half of": (7, 12)}
# Issue 9 widened "as of" to the other ways a question names its time ("back in July
# 2024", "in summer 2025", "at the start of 2024", "just before the April 2025 change"),
# tuned on golden2 dev (time_bound); the first golden set's time_bound is unchanged.
# The quality pass added the leads that end a period ("until", "prior to": the day
# before, as "before"; not "up to", often inclusive) and quarters and halves ("Q3 2024",
# "the first half of 2025", "in H2 2024"); golden2 dev and golden scored the same.
_AS_OF = re.compile(
    r"\b(?P<lead>as of|back in|in|during|around|by|at the (?:start|beginning) of|"
    r"(?:just )?before(?: the)?|until|till|up until|prior to(?: the)?)\s+"
    r"(?:(?P<iso>\d{4}-\d{2}-\d{2})|(?P<half>mid|early|late|end of)[- ](?P<hy>\d{4})"
    r"|(?:the\s+)?(?P<quarter>q[1-4]|h[12]|first half of|second half of)\s+(?P<qy>\d{4})"
    r"|(?P<season>spring|summer|autumn|fall|winter)\s+(?P<sy>\d{4})"
    rf"|(?P<month>{_MONTH_ALT})\.?\s+(?:(?P<day>\d{{1,2}}),?\s+)?(?P<my>\d{{4}})"
    r"|(?P<year>(?:19|20)\d{2}))\b(?![-./]\d)",
    re.IGNORECASE,
)


def _month_key(name: str) -> int:
    name = name.lower()
    return next(n for m, n in _MONTHS.items() if m.startswith(name[:3]))


def _period(found: re.Match[str]) -> tuple[date, date]:
    """The first and last day of the time a question names."""
    if found["iso"]:
        day = date.fromisoformat(found["iso"])
        return day, day
    if found["half"]:
        first, last = _HALVES[found["half"].lower()]
        year = int(found["hy"])
        return date(year, first, 1), date.fromisoformat(_month_end(year, last))
    if found["quarter"]:
        year, part = int(found["qy"]), found["quarter"].lower()
        first, last = _PARTS.get(part) or ((int(part[1]) - 1) * 3 + 1, int(part[1]) * 3)
        return date(year, first, 1), date.fromisoformat(_month_end(year, last))
    if found["season"]:
        year, month = int(found["sy"]), _SEASONS[found["season"].lower()]
        return date(year, month, 1), date(year, month, 15)
    if found["month"]:
        year, month = int(found["my"]), _month_key(found["month"])
        if found["day"]:
            day = date(year, month, int(found["day"]))
            return day, day
        return date(year, month, 1), date.fromisoformat(_month_end(year, month))
    year = int(found["year"])
    return date(year, 1, 1), date(year, 12, 31)


def as_of_date(query: str) -> str | None:
    """The ISO date a question asks about: the end of the named month, season or year
    ("as of March 2024", "back in 2023"), the day before it ("before the April 2025
    change"), or early in it ("at the start of 2024")."""
    found = _AS_OF.search(query)
    if found is None:
        return None
    try:
        first, last = _period(found)
    except ValueError:
        return None
    lead = found["lead"].lower()
    if "before" in lead or lead.startswith(("until", "till", "up", "prior")):
        return date.fromordinal(first.toordinal() - 1).isoformat()
    if lead.startswith("at the"):
        return min(last, date.fromordinal(first.toordinal() + 30)).isoformat()
    return last.isoformat()


def section_date(heading_path: Sequence[str], doc_date: str | None) -> str | None:
    """The date a passage's section opens with, as a changelog dates its entries
    ("## 2025-03-01", "## [2.4.0] - 2025-03-01", "### 3 February 2026 — interval 30 s";
    a year left out is the document's). A document that logs changes over time holds
    several versions, and for the as-of cut each passage is as old as its entry, not as
    the document's latest edit. Only a heading that starts with the date: "Zones merge on
    1 June 2025" names an event, not when the entry was written."""
    for heading in reversed(heading_path):
        head = _ENTRY_LEAD.sub("", heading.strip(), count=1)
        found = parse_date(head, doc_date, anchored=True)
        if found:
            return found
    return None


# What may precede an entry's date in a changelog heading: a version ("[2.4.0] - ",
# "v2.4 — "), "Released" / "Update,".
_ENTRY_LEAD = re.compile(
    r"^(?:(?:\[v?\d+(?:\.\d+)*\]|v?\d+(?:\.\d+)+)\s*[-–—:]\s*"
    r"|(?:released|update[sd]?|changes?)\b[\s,:]*(?:on\s+)?)",
    re.IGNORECASE,
)


def _month_end(year: int, month: int) -> str:
    following = date(year + month // 12, month % 12 + 1, 1)
    return date.fromordinal(following.toordinal() - 1).isoformat()


def day(value: str | None) -> str:
    """An ISO date or timestamp's day (``YYYY-MM-DD``); "" for none, older than any."""
    return (value or "")[:10]
