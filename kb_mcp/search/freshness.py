"""Let the current version of a fact win. Pure rules over per-document candidates.

Three signals, all from the documents themselves, each applied to the fused score as a
factor that the result reports (``search/adjust.py``):

- **Demotion** (a factor rule). A document another one supersedes (``supersedes:``,
  effective from the superseding document's date), and speculative or obsolete documents
  (``ingest/status.py``), are scored ×``DEMOTION``: below a current document that
  answers as well, still first when asked about the proposal itself.
- **As-of questions** (an order pass). "as of March 2024", "as of 2023-10-01", "as of
  mid-2022": documents dated after that day are scored just below the last document
  dated on or before it. A passage in a changelog entry is dated by its entry
  (``section_date``).
- **Recency on near-ties** (an order pass). A newer document that matches about as well
  as an older one just above it (within ``LEG_TIE`` on each leg's own score), on a
  similar title or section, takes that document's score and the place above it: of two
  versions of a fact, the later wins.

Dates compare as ISO strings (``YYYY-MM-DD`` prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from rapidfuzz import fuzz

from kb_mcp.ingest.dates import parse_date
from kb_mcp.ingest.status import CURRENT, OBSOLETE
from kb_mcp.search.adjust import Adjustment, Candidate, Rule
from kb_mcp.search.fuse import RRF_K

# Issue 8 moved these rules from the bm25 scale onto the fused (RRF) scale, where
# neighbours differ by one rank (1/61 vs 1/62) however close their matches are. Golden set,
# keyword mode, nDCG@10 (bm25-scale rules before: 0.910):
# - DEMOTION is expressed in ranks: a demoted document scores as it would DEMOTION_RANKS
#   ranks lower (1/66 instead of 1/61 at the head of a leg). 3 to 60 ranks (factor 0.95
#   to 0.5) all give 0.911; 2 ranks (0.97) loses 4 points on hypothetical. The bm25 rule
#   (DOMINANCE 2.0) came to about 2 ranks on this set (median count of documents within
#   2x of the top bm25, interquartile 1-4). 5 keeps a margin and still lets a proposal
#   that matches far better than anything current come first.
# - LEG_TIE: a near-tie is read on each leg's own score, not on the fused one. On the
#   fused score alone ("within N ranks") the best setting scored 0.906 and lost 11
#   points on corrections; keyword 0.8 of the bm25 score (0.7: 0.902, 0.9: 0.906) is the
#   bm25-scale value of before, and scores 0.911. Vector: 0.9 of the cosine; hybrid with
#   the local model (all-MiniLM-L6-v2-int8) scores 0.953 at 0.7-0.9, 0.950 at 0.95, 0.945
#   at 1.0 (correction 1.0 / 0.95 / 0.89).
# - SAME_TOPIC 50: 40 loses 1 point overall (retraction, multi-hop), 60 loses 5 on
#   corrections.
DEMOTION_RANKS = 5
DEMOTION = (RRF_K + 1) / (RRF_K + 1 + DEMOTION_RANKS)
LEG_TIE = {"keyword": 0.8, "vector": 0.9}
SAME_TOPIC = 50

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


def demotion_rule(as_of: str | None) -> Rule:
    """The factor rule for superseded, speculative and obsolete documents (one factor
    even when several apply: a superseded draft is not twice as wrong)."""

    def demote(c: Candidate) -> Adjustment | None:
        if c.superseded_on is not None and (as_of is None or day(c.superseded_on) <= as_of):
            by = f" by {c.superseded_by}" if c.superseded_by else ""
            return Adjustment(f"superseded{by} on {day(c.superseded_on)}", DEMOTION)
        if c.status == OBSOLETE:
            return Adjustment("obsolete: its status says it no longer holds", DEMOTION)
        if c.status != CURRENT:
            return Adjustment("speculative: a draft, proposal or idea", DEMOTION)
        return None

    return demote


def same_topic(a: str, b: str) -> bool:
    """Whether two passages read as versions of one another (titles and sections alike)."""
    return fuzz.token_set_ratio(a.lower(), b.lower()) >= SAME_TOPIC


def near_tied(upper: Candidate, lower: Candidate) -> bool:
    """Whether ``lower`` matches about as well as ``upper``, by the legs' own evidence: in
    every leg that found ``upper``, ``lower`` was found with at least ``LEG_TIE`` of its
    score. (The fused score cannot tell: under RRF neighbours differ by one rank, however
    close or far apart their matches are.)"""
    for leg, score in upper.evidence.items():
        mine = lower.evidence.get(leg)
        if mine is None or mine < LEG_TIE.get(leg, 1.0) * score:
            return False
    return True


def _standing(c: Candidate) -> float:
    """The product of the factors the rules gave ``c`` (1.0: nothing held against it)."""
    product = 1.0
    for adjustment in c.adjustments:
        product *= adjustment.factor
    return product


def may_pass(upper: Candidate, lower: Candidate) -> bool:
    """Whether the recency pass moves ``lower`` above ``upper`` when they are neighbours in
    equal standing: newer, about as good a match, on a similar topic."""
    return (
        day(lower.date) > day(upper.date)
        and near_tied(upper, lower)
        and same_topic(upper.topic, lower.topic)
    )


def _recency_pass(ranked: list[Candidate]) -> list[Candidate]:
    """Move newer near-tied documents above older ones (only upward, so it terminates).

    Only between documents in equal standing: recency picks the later of two versions, it
    never lifts a draft or a superseded document over a current one. A mover takes the
    score of the one it passes, so the order stays the order of the scores.
    """
    ranked = list(ranked)
    standing = {c.key: _standing(c) for c in ranked}
    moved = True
    while moved:
        moved = False
        for i in range(len(ranked) - 1):
            upper, lower = ranked[i], ranked[i + 1]
            if standing[lower.key] >= standing[upper.key] and may_pass(upper, lower):
                reason = f"newer version of {upper.key}: moved above it"
                ranked[i], ranked[i + 1] = lower.moved_to(upper.score, reason), upper
                moved = True
    return ranked


def _after_as_of(future: list[Candidate], floor: float, as_of: str) -> list[Candidate]:
    """Documents dated after ``as_of``, scored below ``floor`` by one common factor (so
    their own order stays)."""
    if not future or future[0].score <= floor:
        return future
    factor = floor / future[0].score
    return [
        c.adjusted(
            Adjustment(
                f"dated {day(_dated(c))}, after the asked date {as_of}: placed below the "
                "documents of that time",
                factor,
            )
        )
        for c in future
    ]


def _dated(c: Candidate) -> str | None:
    """The date the as-of cut reads: the passage's changelog entry's, else the document's."""
    return c.section_date or c.date


def reorder(ranked: list[Candidate], as_of: str | None) -> list[Candidate]:
    """The order passes over best-first candidates: the as-of cut, then recency."""
    if as_of is None:
        return _recency_pass(ranked)
    present = [c for c in ranked if not _dated(c) or day(_dated(c)) <= as_of]
    future = [c for c in ranked if _dated(c) and day(_dated(c)) > as_of]
    present = _recency_pass(present)
    floor = present[-1].score if present else float("inf")
    return present + _after_as_of(future, floor, as_of)
