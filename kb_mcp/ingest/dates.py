"""Dates stated in a document's text. Pure.

Teams date their notes in the prose more often than in frontmatter: "Posted 12 March
2026 by the Fares team", "Update, 3 February 2026: …", "Customer payments working group
— 19 March 2026", a chat export's "#lantern · 14 October 2025". Freshness needs those
dates (a file's mtime says when it was copied, not when it was written), and document
relations need the date a change takes effect ("effective 3 February", "as of June").
A date without a year takes the document's own year; ``document_date`` wants a year.
"""

from __future__ import annotations

import re
from datetime import date

from kb_mcp.ingest.decode import first_lines
from kb_mcp.ingest.frontmatter import split_frontmatter

DATE_LINES = 6  # non-blank body lines read for the document's own date

_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE = re.compile(
    r"(?P<iso>\d{4}-\d{2}-\d{2})"
    rf"|(?<!\d)(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+(?P<y1>\d{{4}}))?"
    rf"|{_MONTH.replace('mon', 'mon2')}\s+(?P<d2>\d{{1,2}})(?!\d)(?:st|nd|rd|th)?"
    r"(?:,?\s+(?P<y2>\d{4}))?"
    rf"|{_MONTH.replace('mon', 'mon3')}\s+(?P<y3>\d{{4}})",
    re.IGNORECASE,
)
_DATE_CUE = re.compile(
    r"\b(?:effective(?:\s+(?:from|on|as of))?|as of|posted(?:\s+on)?|dated|published(?:\s+on)?|"
    r"updated(?:\s+on)?|update,?|added(?:\s+on)?|(?:withdrawn|cancell?ed|retracted)(?:\s+on)?|"
    r"starting|from)\s+",
    re.IGNORECASE,
)
_POSTED = re.compile(
    r"^[\W_]*(?:posted|published|added|written|dated|date|last updated|updated|update|"
    r"effective(?: from| on)?|valid from|in force from)\b"
    r"[\s:,]*(?:on\s+)?",
    re.IGNORECASE,
)


def stated_date(text: str, doc_date: str | None) -> str | None:
    """The date a cue states ("effective 3 February", "as of June 2026", "Posted 12 March
    2026"), as ISO; a missing year is the document's own."""
    for cue in _DATE_CUE.finditer(text):
        parsed = parse_date(text[cue.end() : cue.end() + 40], doc_date, anchored=True)
        if parsed:
            return parsed
    return None


def parse_date(text: str, doc_date: str | None, *, anchored: bool = False) -> str | None:
    """The first date in ``text`` (at its start when ``anchored``) as ``YYYY-MM-DD``."""
    match = _DATE.match(text.strip()) if anchored else _DATE.search(text)
    if match is None:
        return None
    year_default = int(doc_date[:4]) if doc_date and doc_date[:4].isdigit() else None
    try:
        if match["iso"]:
            return date.fromisoformat(match["iso"]).isoformat()
        if match["mon"]:
            day, month, year = int(match["d1"]), match["mon"], match["y1"]
        elif match["mon2"]:
            day, month, year = int(match["d2"]), match["mon2"], match["y2"]
        else:
            day, month, year = 1, match["mon3"], match["y3"]
        year_value = int(year) if year else year_default
        if year_value is None:
            return None
        return date(year_value, _month(month), day).isoformat()
    except ValueError:
        return None


def _month(name: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, start=1) if m.startswith(name.lower()[:3]))


def document_date(text: str, kind: str) -> str | None:
    """The date a document states for itself, ISO: a "Posted / Published / Updated /
    Date: <date>" line or an "Update, <date>:" head among its first lines, else a full
    date in its first line (a dated title or heading). None without a year."""
    body = split_frontmatter(text).body if kind == "markdown" else text
    lines = [line for line in first_lines(body, 40) if line.strip()][:DATE_LINES]
    for line in lines:
        cue = _POSTED.match(line)
        if cue is not None:
            found = parse_date(line[cue.end() : cue.end() + 40], None, anchored=True)
            if found:
                return found
    if lines:
        return parse_date(lines[0], None)
    return None


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
