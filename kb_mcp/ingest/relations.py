"""Document relations a document states about others: detected, then matched. Pure.

A later note corrects an earlier one, a notice withdraws an announcement, an ADR
supersedes another, a dated update changes a fact (issue 9, "Document relations"). The
document that says so is the evidence; this module reads it:

- **Frontmatter**: ``supersedes`` / ``replaces``, ``corrects``, ``withdraws``, ``updates``
  (this document changes the named ones) and ``superseded_by`` (the named one changes
  this one; with ``status: superseded`` or ``withdrawn`` the kind follows the status).
- **Prose**, only where authors put such statements: the title, the headings and the
  opening lines. "Errata for …", "Correction to …", "Addendum to the postmortem of …",
  "WITHDRAWN: …", "This notice withdraws / cancels …", "Update, 3 February 2026: …",
  "Supersedes ADR-7", "Status: Superseded by ADR-0012". A cue must be one of these
  shapes, so "withdraw cash at the desk" or "the correction factor is 1.2" say nothing.

Detection reads one document alone, so what is detected never depends on what else the
library holds or on ingest order; only *matching* a reference to a document does
(``match_reference``), and the store re-matches when documents arrive or leave.

A reference names its target by id or number (``ADR-12``, ``TICKET-88``, ``v2.3.1``), by
file name, or by title. An id or file name must match exactly; a title must match one
document clearly (``TITLE_MATCH`` and a margin of ``TITLE_MARGIN`` over the next). Two
candidates are an ambiguity, and an ambiguity is never guessed into an edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import PurePosixPath
from typing import Any

from rapidfuzz import fuzz

from kb_mcp.ingest.frontmatter import meta_list, split_frontmatter

# The version of the rules below: stored rows made under another are redone by the first
# reader (``ingest/relink.StoredRelations``). Bump it when detection or matching changes.
RELATIONS_VERSION = 1
SUPERSEDES, CORRECTS, WITHDRAWS, UPDATES = "supersedes", "corrects", "withdraws", "updates"
KINDS = (SUPERSEDES, CORRECTS, WITHDRAWS, UPDATES)
FRONTMATTER, PROSE = "frontmatter", "prose"
OPENING_LINES = 12  # body lines read for cues besides the title and headings
HEADING_LINES = 400  # headings are read this far into a document
# Title matching (rapidfuzz token_sort_ratio on normalized titles, 0-100). Hand-tuned on
# the unit corpora of tests/test_relations.py: "retention policy" vs "Errata for
# retention policy" scores 82 and must not pass; the title itself scores 100.
TITLE_MATCH = 85
TITLE_MARGIN = 10
EVIDENCE_CHARS = 160

_FIELD_KINDS = {
    "supersedes": SUPERSEDES,
    "replaces": SUPERSEDES,
    "corrects": CORRECTS,
    "withdraws": WITHDRAWS,
    "updates": UPDATES,
}
_REF = r"(?P<ref>\S.{2,200})"
# Each cue: a kind, whether the named document changes this one (reverse), and a pattern
# matched at the start of a title, heading or opening line (``#`` and emphasis stripped).
_CUES: tuple[tuple[str, bool, re.Pattern[str]], ...] = tuple(
    (kind, reverse, re.compile(pattern, re.IGNORECASE))
    for kind, reverse, pattern in (
        (
            CORRECTS,
            False,
            r"^(?:errata|erratum|corrigendum)\b\s*(?:to|for|of|on|in)?\s*[:\-–—]?\s*" + _REF,
        ),
        (
            CORRECTS,
            False,
            r"^(?:correction|corrections|addendum|amendment)\s+(?:to|for|of|on)\s+" + _REF,
        ),
        (
            CORRECTS,
            False,
            r"^this (?:note|page|document|post|notice|addendum|erratum|update) (?:corrects|amends) "
            + _REF,
        ),
        (WITHDRAWS, False, r"^(?:withdrawn|retracted|cancell?ed|rescinded)\s*[:\-–—]\s*" + _REF),
        (
            WITHDRAWS,
            False,
            r"^this (?:notice|note|memo|message|post|page|document|announcement) "
            r"(?:withdraws|retracts|cancels|rescinds|revokes) " + _REF,
        ),
        (
            WITHDRAWS,
            False,
            r"^(?:we are|we're|we have|we) (?:withdrawing|withdrawn|withdraw|retracting|"
            r"retracted|retract|cancell?ing|cancell?ed) " + _REF,
        ),
        (
            SUPERSEDES,
            True,
            r"^(?:status\s*[:\-–—]\s*)?(?:superseded|replaced|obsoleted) by\s*[:\-–—]?\s*" + _REF,
        ),
        (WITHDRAWS, True, r"^(?:status\s*[:\-–—]\s*)?withdrawn by\s*[:\-–—]?\s*" + _REF),
        (
            SUPERSEDES,
            False,
            r"^(?:this (?:adr|decision|document|page|note|runbook|policy|version|release|"
            r"record|guide) )?(?:supersedes|replaces|obsoletes)\s*[:\-–—]?\s*" + _REF,
        ),
        (
            UPDATES,
            False,
            r"^this (?:note|notice|page|document|post|update) (?:updates|changes|revises) " + _REF,
        ),
        (UPDATES, False, r"^update[sd]?\s+(?:to|for|on)\s+" + _REF),
    )
)
# "Retention settings — update, 3 February 2026" / "Release notes v2.3.1: errata": the
# cue after the name of what it changes (titles and headings only).
_TRAILING_CUE = re.compile(
    r"^(?P<ref>\S.{2,200}?)\s*(?:[—–:(]|\s-)\s*(?P<cue>update[sd]?|revised|revision|errata|"
    r"erratum|correction|corrections|addendum|withdrawn|retracted)\b"
    r"(?:\W*$|\s*[,(:]?\s*(?:on\s+|of\s+|from\s+)?(?:\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct"
    r"|nov|dec)[a-z]*\b))",
    re.IGNORECASE,
)
_TRAILING_KIND = {"withdrawn": WITHDRAWS, "retracted": WITHDRAWS}
_UPDATE_HEAD = re.compile(r"^update\b[^:]{0,40}:\s*" + _REF, re.IGNORECASE)
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+)?[*_`]*\s*")
_REF_END = re.compile(
    r"\s+[—–-]\s+|[:;(]\s|\.\s|\s+(?:effective|as of|from|starting|on)\s+\d|[.:]$"
)
_ID = re.compile(r"\b(?P<prefix>[A-Z][A-Z0-9]{1,9})[- ]#?0*(?P<number>\d{1,6})\b")
_VERSION = re.compile(r"(?<![\w.])v?(?P<v>\d+\.\d+(?:\.\d+){0,3})(?![\w.])")
_FILE = re.compile(r"[\w./-]+\.(?:md|markdown|txt|rst|org|adoc|html?|pdf|docx)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_STOP = frozenset("the a an of to for on in at and our this that".split())

_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE = re.compile(
    r"(?P<iso>\d{4}-\d{2}-\d{2})"
    rf"|(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+(?P<y1>\d{{4}}))?"
    rf"|{_MONTH.replace('mon', 'mon2')}\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?"
    r"(?:,?\s+(?P<y2>\d{4}))?"
    rf"|{_MONTH.replace('mon', 'mon3')}\s+(?P<y3>\d{{4}})",
    re.IGNORECASE,
)
_DATE_CUE = re.compile(
    r"\b(?:effective(?:\s+(?:from|on|as of))?|as of|posted(?:\s+on)?|dated|published(?:\s+on)?|"
    r"updated(?:\s+on)?|update,?|withdrawn(?:\s+on)?|starting|from)\s+",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Detected:
    """One relation a document states. ``reverse``: the named document changes this one."""

    kind: str
    reference: str
    effective: str | None
    evidence: str
    start_line: int
    end_line: int
    detected: str
    reverse: bool = False


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
    """How a document can be referred to: its title, ids in its title / paths, file names."""

    document_id: int
    title: str
    ids: frozenset[str]
    files: frozenset[str]


def detect_relations(
    title: str, text: str, kind: str, doc_date: str | None, supersedes: Sequence[str] = ()
) -> list[Detected]:
    """Every relation ``text`` (with its frontmatter, if any) states, in line order."""
    front = split_frontmatter(text) if kind == "markdown" else None
    meta = front.meta if front else {}
    found = _from_frontmatter(meta, text, doc_date, supersedes)
    body_start = front.body_start_line if front else 1
    lines = text.split("\n")
    seen_title, opening_date = False, None
    prose: list[Detected] = []
    for number, line in _cue_lines(lines, body_start, kind):
        seen_title = seen_title or _clean(line).lower() == title.strip().lower()
        heading = kind == "markdown" and line.lstrip().startswith("#")
        prose += _from_line(line, number, doc_date, heading)
        opening_date = opening_date or stated_date(_clean(line), doc_date)
    if not seen_title and title.strip():
        prose += _from_line(title, 1, doc_date, heading=True)
    # A date stated anywhere in the opening ("Effective 3 February: …") dates the change
    # a heading announced; else the document's own date.
    fallback = opening_date or doc_date
    found += [d if d.effective else replace(d, effective=fallback) for d in prose]
    return _unique(found)


def _cue_lines(lines: list[str], body_start: int, kind: str) -> Iterable[tuple[int, str]]:
    """(1-based number, line): the opening lines of the body, then the headings."""
    opening = 0
    for index in range(body_start - 1, min(len(lines), HEADING_LINES)):
        line = lines[index]
        if not line.strip():
            continue
        heading = kind == "markdown" and line.lstrip().startswith("#")
        if opening < OPENING_LINES or heading:
            yield index + 1, line
        opening += 1


def _from_frontmatter(
    meta: Mapping[str, Any], text: str, doc_date: str | None, supersedes: Sequence[str]
) -> list[Detected]:
    found = []
    listed: dict[str, tuple[str, ...]] = {f: meta_list(meta, f) for f in _FIELD_KINDS}
    listed["supersedes"] = tuple(dict.fromkeys((*listed["supersedes"], *supersedes)))
    effective = _frontmatter_date(meta) or doc_date
    for field_name, values in listed.items():
        for value in values:
            line = _field_line(text, field_name)
            found.append(
                Detected(
                    _FIELD_KINDS[field_name],
                    value,
                    effective,
                    f"{field_name}: {value}",
                    line,
                    line,
                    FRONTMATTER,
                )
            )
    status = str(meta.get("status") or "").strip().lower()
    reverse_kind = WITHDRAWS if status in ("withdrawn", "retracted") else SUPERSEDES
    for value in meta_list(meta, "superseded_by") + meta_list(meta, "withdrawn_by"):
        line = _field_line(text, "superseded_by")
        found.append(
            Detected(
                reverse_kind,
                value,
                _frontmatter_date(meta),
                f"superseded_by: {value}",
                line,
                line,
                FRONTMATTER,
                reverse=True,
            )
        )
    return found


def _frontmatter_date(meta: Mapping[str, Any]) -> str | None:
    for key in ("effective", "effective_date", "withdrawn_on", "superseded_on"):
        value = meta.get(key)
        if value:
            parsed = parse_date(str(value), None)
            if parsed:
                return parsed
    return None


def _field_line(text: str, field_name: str) -> int:
    for number, line in enumerate(text.split("\n")[:200], start=1):
        if line.startswith(f"{field_name}:"):
            return number
    return 1


def _clean(line: str) -> str:
    return _MARKUP.sub("", line).strip().strip("*_`").strip()


def _from_line(
    line: str, number: int, doc_date: str | None, heading: bool = False
) -> list[Detected]:
    """The relations one title, heading or opening line states (usually none)."""
    clean = _clean(line)
    trailing = _TRAILING_CUE.match(clean) if heading else None
    if trailing is not None:
        cue = trailing["cue"].lower()
        kind = _TRAILING_KIND.get(cue, UPDATES if cue.startswith(("update", "revis")) else CORRECTS)
        return _detected(kind, False, trailing["ref"], clean, number, doc_date)
    for kind, reverse, pattern in _CUES:
        match = pattern.match(clean)
        if match:
            return _detected(kind, reverse, match["ref"], clean, number, doc_date)
    match = _UPDATE_HEAD.match(clean)
    if match:  # "Update, 3 February 2026: …": the date is in the head, before the colon
        effective = stated_date(clean[: match.start("ref")], doc_date)
        reference = _cut(match["ref"])
        if _words(reference):
            evidence = clean[:EVIDENCE_CHARS]
            return [Detected(UPDATES, reference, effective, evidence, number, number, PROSE)]
    return []


def _detected(
    kind: str, reverse: bool, ref: str, clean: str, number: int, doc_date: str | None
) -> list[Detected]:
    reference = _cut(ref)
    if len(_words(reference)) == 0:
        return []
    effective = stated_date(clean, doc_date)
    return [
        Detected(kind, reference, effective, clean[:EVIDENCE_CHARS], number, number, PROSE, reverse)
    ]


def _cut(ref: str) -> str:
    """A reference up to where the sentence goes on about something else."""
    ref = ref.strip()
    end = _REF_END.search(ref)
    if end is not None and end.start() > 0:
        ref = ref[: end.start()]
    return ref.strip(" \"'“”‘’`*_.,")


def _unique(found: list[Detected]) -> list[Detected]:
    seen: set[tuple[str, str, bool]] = set()
    kept = []
    for item in found:
        key = (item.kind, normalize(item.reference), item.reverse)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


# --- dates -------------------------------------------------------------------------------


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


# --- matching ----------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Lower case words without articles and punctuation: how titles are compared."""
    return " ".join(w for w in _words(text) if w not in _STOP)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


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


def parse_reference(reference: str) -> Reference:
    files = _reference_files(reference)
    return Reference(ids_in(reference), files, normalize(reference))


def doc_names(document_id: int, title: str, paths: Sequence[str]) -> DocNames:
    stems = " ".join(PurePosixPath(p).stem.upper() for p in paths)
    return DocNames(document_id, normalize(title), ids_in(f"{title} {stems}"), file_names(paths))


def match_reference(reference: str, candidates: Iterable[DocNames]) -> list[int]:
    """The documents ``reference`` can mean: one is a match, two or more an ambiguity."""
    ref = parse_reference(reference)
    if ref.exact:
        return [
            c.document_id
            for c in candidates
            if (ref.ids and ref.ids <= c.ids) or (ref.files and ref.files & c.files)
        ]
    if len(ref.title.split()) < 2:
        return []  # one word names a topic, not a document
    scored = sorted(
        ((_title_score(ref.title, c.title), c.document_id) for c in candidates),
        reverse=True,
    )
    if not scored or scored[0][0] < TITLE_MATCH:
        return []
    best = scored[0][0]
    return [doc for score, doc in scored if score >= max(TITLE_MATCH, best - TITLE_MARGIN)]


def _title_score(ref: str, title: str) -> float:
    """How well a reference names a title: the whole title inside the reference (two words
    or more) counts as a near match; otherwise the order-free similarity."""
    if not title:
        return 0.0
    words, ref_words = set(title.split()), set(ref.split())
    if len(words) >= 2 and words <= ref_words:
        return max(95.0, fuzz.token_sort_ratio(ref, title))
    return fuzz.token_sort_ratio(ref, title)
