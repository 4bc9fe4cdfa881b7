"""When a question is: the period it names. Pure.

The ranking model reads it (``search/features.py``: a candidate dated after the period
asked about, the version valid then); nothing here moves a document itself.

- **As-of questions**: "as of March 2024", "as of 2023-10-01", "back in July 2024",
  "before the April 2025 change", "in Q3 2024", "Stand März 2024", "bis 14.03.2025",
  "截至2024年3月", "2024年当時の上限は", "2024년 3월 기준" name a period (``text/dates``
  reads its forms, ``text/lexicon`` the words around it in each language);
  ``as_of_date`` is the day the question asks about.

Dates compare as ISO strings (``YYYY-MM-DD`` prefixes).
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from kb_mcp.text import lexicon as lx
from kb_mcp.text.dates import Cue, Mention, Period, find_dates, fold

_DIGIT = re.compile(r"\d")
_LEAD = Cue(lx.LEADS_BEFORE, lx.LEADS_AFTER, articles=False)
# An article may follow a word that cuts before a date ("before the April 2025 change",
# "vor dem 1. April"), not one that names it: "in the March 2026 refresh" labels an event.
_LEAD_CUTTING = Cue((w for w, role in lx.LEADS_BEFORE.items() if role == lx.BEFORE))
_ROLES = {fold(word): role for word, role in (*lx.LEADS_BEFORE.items(), *lx.LEADS_AFTER.items())}
_START_DAYS = 30  # "at the start of 2024": its first month


def as_of_date(query: str) -> str | None:
    """The ISO date a question asks about: the end of the named period ("as of March
    2024", "back in 2023", "2024年当時"), the day before it ("before the April 2025
    change", "2024年3月之前"), or early in it ("at the start of 2024"); None for a
    question that names no period, or only the time after one ("after March 2024").

    A date counts where a word of time stands next to it (``lexicon.LEADS_BEFORE`` /
    ``LEADS_AFTER``), or written with 年/月/日 (a question in Chinese, Japanese or Korean
    names its time so): "H2 2024 desk hours" labels, "2048 connections" counts. Runs on
    every search: a question without a digit is answered before any pattern runs."""
    if _DIGIT.search(query) is None:
        return None
    for mention in find_dates(query):
        role = _role(query, mention)
        if role == lx.AFTER:
            return None
        if role is not None:
            return _day_asked(mention.period, role).isoformat()
    return None


def _role(query: str, mention: Mention) -> str | None:
    """What the words around ``mention`` say of it (``lexicon.END`` / ``BEFORE`` /
    ``START`` / ``AFTER``); None: a date no word asks about."""
    after = _LEAD.after(query, mention.end)
    after_role = _ROLES[fold(after)] if after else None
    if after_role in (lx.BEFORE, lx.AFTER):  # "在2024年以前": the word after decides
        return after_role
    before = _LEAD.before(query, mention.start) or _LEAD_CUTTING.before(query, mention.start)
    if before:
        return _ROLES[fold(before)]
    if after_role or mention.cjk:
        return lx.END
    return None


def _day_asked(period: Period, role: str) -> date:
    if role == lx.BEFORE:
        return period.first - timedelta(days=1)
    if role == lx.START:
        return min(period.last, period.first + timedelta(days=_START_DAYS))
    return period.last


# What may precede an entry's date in a changelog heading: a version ("[2.4.0] - ",
# "v2.4 — "), "Released" / "Update,".
_ENTRY_LEAD = re.compile(
    r"^(?:(?:\[v?\d+(?:\.\d+)*\]|v?\d+(?:\.\d+)+)\s*[-–—:]\s*"
    r"|(?:released|update[sd]?|changes?)\b[\s,:]*(?:on\s+)?)",
    re.IGNORECASE,
)


def day(value: str | None) -> str:
    """An ISO date or timestamp's day (``YYYY-MM-DD``); "" for none, older than any."""
    return (value or "")[:10]
