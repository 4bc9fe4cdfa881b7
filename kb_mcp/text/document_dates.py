"""Dates stated in a document's text. Pure.

Teams date their notes in the prose more often than in frontmatter: "Posted 12 March
2026 by the Fares team", "Update, 3 February 2026: …", "Customer payments working group
— 19 March 2026", a chat export's "#lantern · 14 October 2025", "Stand: 14.03.2025",
"发布日期：2025年3月14日". Freshness needs those dates (a file's mtime says when it was
copied, not when it was written), and document relations need the date a change takes
effect ("effective 3 February", "gilt ab 1. März", "2025年4月1日施行"). A date without a
year takes the document's own year; ``document_date`` wants a year.

The forms and the words are those of ``text/dates`` and ``text/lexicon`` (every language
the library reads). ``DATES_VERSION`` names these rules: a library dated under older
ones has its documents dated again (``ingest/redate``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date

from kb_mcp.text import lexicon as lx
from kb_mcp.text.dates import DAY, MONTH, WEEK, Cue, Mention, alternation, find_dates, first_date
from kb_mcp.text.frontmatter import meta_date, split_frontmatter
from kb_mcp.text.lines import first_lines

# The version of the rules below: documents dated under another are dated again by the
# first reader (``ingest/redate.StoredDates``). Bump it when what they read changes.
DATES_VERSION = 2  # 2: every language of text/lexicon, numeric and CJK forms
DATE_LINES = 6  # non-blank body lines read for the document's own date

_CUE = Cue(lx.DATE_CUES_BEFORE, lx.DATE_CUES_AFTER)
_LABEL = re.compile(
    rf"^[\W_]*{alternation(lx.DOCUMENT_DATE_LABELS)}[\s:：,]*"
    rf"(?:{alternation(lx.LABEL_LINKS)}\s*)?",
    re.IGNORECASE,
)
# A dated title or heading names its day, week or month; a year or a quarter in it
# ("2025年 事業計画", "Q3 2024 roadmap") is the subject, not when it was written.
_TITLE_PRECISION = frozenset({DAY, WEEK, MONTH})


def _year(doc_date: str | None) -> int | None:
    return int(doc_date[:4]) if doc_date and doc_date[:4].isdigit() else None


def stated_date(text: str, doc_date: str | None) -> str | None:
    """The date a cue states ("effective 3 February", "as of June 2026", "Posted 12 March
    2026", "gilt ab 1. März", "2025年4月1日起生效"), as ISO; a missing year is the
    document's own."""
    for mention in _mentions(text, doc_date):
        if _CUE.before(text, mention.start) or _CUE.after(text, mention.end):
            return mention.period.first.isoformat()
    return None


def _mentions(text: str, doc_date: str | None) -> Iterator[Mention]:
    return (m for m in find_dates(text, _year(doc_date)) if not m.bare)


def parse_date(text: str, doc_date: str | None, *, anchored: bool = False) -> str | None:
    """The first date in ``text`` (at its start when ``anchored``) as ``YYYY-MM-DD``: the
    first day of the period it names ("March 2025" → ``2025-03-01``)."""
    found = first_date(text, _year(doc_date), anchored=anchored)
    return found.period.first.isoformat() if found else None


def document_date(text: str, kind: str) -> str | None:
    """The date a document states for itself, ISO: a "Posted / Published / Updated /
    Date / Stand / 发布日期 / 更新日: <date>" line or an "Update, <date>:" head among its
    first lines, else a day or month in its first line (a dated title or heading). None
    without a year."""
    body = split_frontmatter(text).body if kind == "markdown" else text
    lines = [line for line in first_lines(body, 40) if line.strip()][:DATE_LINES]
    for line in lines:
        label = _LABEL.match(line)
        if label is not None:
            found = parse_date(line[label.end() : label.end() + 40], None, anchored=True)
            if found:
                return found
    if lines:
        found = first_date(lines[0])
        if found and found.period.precision in _TITLE_PRECISION:
            return found.period.first.isoformat()
    return None


def text_date(text: str, kind: str) -> str | None:
    """The date a document's own text gives it: its frontmatter's ``date`` / ``updated``,
    else the date it states for itself (``document_date``; code states none). The
    ingest (``ingest/filework``) and the re-dating under newer rules (``ingest/redate``)
    both date a document so."""
    meta = split_frontmatter(text).meta if kind == "markdown" else {}
    return meta_date(meta, "date", "updated") or (
        document_date(text, kind) if kind != "code" else None
    )


_PATH_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


def path_date(path: str) -> str | None:
    """A ``YYYY-MM-DD`` in a file's name (``notes/2026-01-05-fare-cap.md``), as teams name
    dated notes, minutes and postmortems."""
    found = _PATH_DATE.search(path.replace("\\", "/").rsplit("/", 1)[-1])
    if found is None:
        return None
    try:
        return date(*(int(g) for g in found.groups())).isoformat()
    except ValueError:
        return None
