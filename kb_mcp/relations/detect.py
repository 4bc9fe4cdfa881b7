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
file name, by title or by date; ``relations/references.py`` decides which document that is,
and two candidates are an ambiguity, never guessed into an edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kb_mcp.relations.references import DATED, content_words, ids_in, normalize, parse_reference
from kb_mcp.store.relations import Statement
from kb_mcp.text import lexicon as lx
from kb_mcp.text.document_dates import parse_date, stated_date
from kb_mcp.text.frontmatter import meta_list, split_frontmatter
from kb_mcp.text.lines import first_lines

# The version of the rules below: stored rows made under another are redone by the first
# reader (``relations/relink.StoredRelations``). Bump it when detection or matching changes.
RELATIONS_VERSION = (
    7  # 3: withdrawal phrasings; 4: an agent's document names no document of the user's sources;
    # 5: outdated banners, Reverted sections, known issues fixed, errata named below, series;
    # 6: effective dates in every language of text/lexicon (text/document_dates.DATES_VERSION 2);
    # 7: structural cues of text/lexicon's languages, RFC headers, status fields, title marks
)
SUPERSEDES, CORRECTS, WITHDRAWS, UPDATES = "supersedes", "corrects", "withdraws", "updates"
KINDS = (SUPERSEDES, CORRECTS, WITHDRAWS, UPDATES)
FRONTMATTER, PROSE = "frontmatter", "prose"
SELF = "(this document)"  # the reference of a document that says it was withdrawn itself
OPENING_LINES = 12  # body lines read for cues besides the title and headings
HEADING_LINES = 400  # headings are read this far into a document
EVIDENCE_CHARS = 160

_FIELD_KINDS = {
    "supersedes": SUPERSEDES,
    "replaces": SUPERSEDES,
    "corrects": CORRECTS,
    "withdraws": WITHDRAWS,
    "updates": UPDATES,
}
_SEP = r"(?:[:：–—]|--?)"  # between a cue and what it names (a full-width colon in CJK)
# What it names: no separator first ("Obsoletes: 12" names "12", not ": 12").
_REF = r"(?P<ref>[^\s:：–—-].{1,200})"


def _words(*tables: Mapping[str, Sequence[str]], cjk: bool = False) -> str:
    """An alternation of the tables' Latin (or, ``cjk``, CJK) words, longest first; a
    Latin word ends at a word boundary, a CJK one runs into what follows."""
    words = {w for table in tables for row in table.values() for w in row}
    chosen = sorted((w for w in words if (w[0] >= "\u2e80") == cjk), key=len, reverse=True)
    alternation = "|".join(r"[\s-]+".join(map(re.escape, w.split())) for w in chosen)
    alternation = alternation or "(?!)"  # no word of this script: a cue that never matches
    return "(?:(?:" + alternation + (")" if cjk else r")\b") + ")"


def _head(table: Mapping[str, Sequence[str]], after: str = rf"\s*{_SEP}?") -> str:
    """A cue at the head of a line: a Latin word and what must follow it (``after``) or a
    CJK word and its separator ("勘误：…": "更正后的数据" is prose)."""
    return rf"(?:{_words(table)}{after}|{_words(table, cjk=True)}\s*{_SEP})\s*"


def _any(table: Mapping[str, Sequence[str]]) -> str:
    """The table's words in either script."""
    return f"(?:{_words(table)}|{_words(table, cjk=True)})"


_CONNECTOR = _words(lx.HEAD_CONNECTORS)
_MONTH_WORDS = {lang: " ".join(cells).split() for lang, cells in lx.MONTHS.items()}
# After an errata or withdrawal head, what shows it heads a name: a connector, a separator
# or a bracket ("Errata for …", "WITHDRAWN: …", "Errata (2025-05-02)"); "Errata are
# reported on the list" and "Cancelled labels are not billed" are sentences.
_NAMING = rf"(?:\s+{_CONNECTOR}\s*{_SEP}?|\s*{_SEP}|\s*(?=\())"
# A status line, its value before a separator ("Status: Deprecated -- replaced by …",
# "Status: Closed (superseded by …)", reST ":Status:", AsciiDoc ":status:").
_STATUS = (
    rf"(?::?{_any({'': lx.STATUS_LABELS})}:?\s*{_SEP}?\s*(?:[^:()]{{1,30}}?\s*(?:{_SEP}|[(,])\s*)?)"
)
_WITHDRAWN = _any(lx.WITHDRAWN_STATUSES)
_WITHDRAWN_STATUSES = frozenset(w for row in lx.WITHDRAWN_STATUSES.values() for w in row)
# Each cue: a kind, whether the named document changes this one (reverse), and a pattern
# matched at the start of a title, heading or opening line (``#`` and emphasis stripped).
_CUES: tuple[tuple[str, bool, re.Pattern[str]], ...] = tuple(
    (kind, reverse, re.compile(pattern, re.IGNORECASE))
    for kind, reverse, pattern in (
        (CORRECTS, False, "^" + _head(lx.ERRATA_HEADS, _NAMING) + _REF),
        (CORRECTS, False, rf"^{_words(lx.CORRECTION_HEADS)}\s+{_CONNECTOR}\s+" + _REF),
        (
            CORRECTS,
            False,
            r"^this (?:note|page|document|post|notice|addendum|erratum|update) (?:corrects|amends) "
            + _REF,
        ),
        (
            WITHDRAWS,
            False,
            r"^[\[(]?" + _head(lx.WITHDRAWAL_HEADS, rf"(?:[\])]\s*{_SEP}?|{_NAMING})") + _REF,
        ),
        (
            WITHDRAWS,
            False,
            r"^this (?:notice|note|memo|message|post|page|document|announcement) "
            r"(?:withdraws|retracts|cancels|rescinds|revokes) " + _REF,
        ),
        (
            WITHDRAWS,
            False,
            r"^(?:we are|we're|we have|we've|we) (?:withdrawing|withdrawn|withdraw|retracting|"
            r"retracted|retract|cancell?ing|cancell?ed|rescinding|rescinded|rescind|pulled|"
            r"pulling|calling off|called off) " + _REF,
        ),
        # "Please disregard the parking email of 2 May": the notice names what it voids.
        # "Ignore" alone is a code comment's word ("# ignore close errors"): only "please".
        (WITHDRAWS, False, r"^(?:(?:please\s+)?disregard|please\s+ignore)\s+" + _REF),
        # A changelog's "Reverted: repeat pushes (added in 3.8.0)", git's 'Revert "Add X"':
        # the change a page describes is taken back. A colon, dash or quote must follow
        # ("Reverted the config by hand" is a sentence about something else).
        (
            WITHDRAWS,
            False,
            r"^(?:reverted|revert|rolled back|backed out)\s*(?:[:\-–—]\s*|(?=[\"“]))" + _REF,
        ),
        (SUPERSEDES, True, rf"^{_STATUS}?" + _head(lx.REPLACED_BY_HEADS) + _REF),
        (WITHDRAWS, True, rf"^{_STATUS}?withdrawn by\s*{_SEP}?\s*" + _REF),
        # "Updated by: RFC 5678", a header ("updated by the Fares team" is a sentence).
        (UPDATES, True, rf"^{_any(lx.UPDATED_BY_HEADS)}\s*{_SEP}\s*" + _REF),
        # "> **Outdated** — see [Follow-me printing](follow-me-printing.md)", "This page is
        # deprecated; use X instead": the banner a wiki puts on the old page names the new.
        (
            SUPERSEDES,
            True,
            r"^(?:(?:warning|note|notice|caution)\s*[:\-–—]\s*)?"
            r"(?:this (?:page|document|note|guide|runbook|article|section|procedure) "
            r"(?:is|has been) (?:now )?)?"
            r"(?:outdated|out[ -]of[ -]date|obsolete|deprecated|no longer maintained)[*_]*"
            r"\s*[.,;:\-–—]*\s*(?:please\s+)?(?:see|use|read|refer to|go to|moved to|"
            r"replaced by|superseded by)\s*[:\-–—]?\s*" + _REF,
        ),
        (
            SUPERSEDES,
            False,
            r"^(?:this (?:(?:adr|decision|document|page|note|runbook|policy|version|release|"
            r"record|guide|guidance|procedure|process|standard|spec|specification|handbook|"
            r"manual|checklist|article|notice) )?)?" + _head(lx.REPLACES_HEADS) + _REF,
        ),
        (
            UPDATES,
            False,
            r"^this (?:note|notice|page|document|post|update) (?:updates|changes|revises) " + _REF,
        ),
        (UPDATES, False, r"^update[sd]?\s+(?:to|for|on)\s+" + _REF),
        # An RFC's "Updates: RFC 2026": the header's colon, not the verb of a sentence.
        (UPDATES, False, rf"^{_any(lx.UPDATES_HEADS)}\s*{_SEP}\s*" + _REF),
    )
)
# "Retention settings — update, 3 February 2026" / "Release notes v2.3.1: errata": the
# cue after the name of what it changes (titles and headings only).
_TRAILING_CUE = re.compile(
    r"^(?P<ref>\S.{2,200}?)\s*(?:[—–:(]|\s-)\s*(?P<cue>update[sd]?|revised|revision|errata|"
    r"erratum|correction|corrections|addendum|withdrawn|retracted|cancell?ed|rescinded|"
    r"revoked|called off)\b"
    rf"(?:\W*$|\s*[,(:]?\s*(?:on\s+|of\s+|from\s+)?(?:\d|{_words(_MONTH_WORDS)}))",
    re.IGNORECASE,
)
# "Zone merger cancelled", "Depot open day is called off": a title or heading that ends
# with the verb, without a separator (two naming words at least: "Trips cancelled" in a
# message-type table names a kind of message, not a document; one sentence only: "…
# violation. This can happen if a script is cancelled" is prose).
_ENDS_WITHDRAWN = re.compile(
    r"^(?P<ref>[^\s.!?](?:(?!\.\s)[^!?]){2,120}?)\s+(?:is\s+|has been\s+)?"
    r"(?:cancell?ed|withdrawn|retracted|"
    r"rescinded|called off|scrapped|shelved)[\s.!]*$",
    re.IGNORECASE,
)
# "*This announcement was withdrawn on 19 January 2026.*", "This notice has been
# withdrawn": the document withdraws itself (past tense only: "This announcement is
# cancelled" in a cancellation notice speaks of the announcement it cancels).
# Also after an "Update:" / "Note:" / "Edit:" lead put on top of the old text, and in
# the present tense where only the document itself can be meant ("This page is no
# longer valid").
_LEAD = r"^(?:(?:update|updated|note|edit|edited|notice|important|nb)\b[^:]{0,40}:[\s*_]*)?[*_]*"
# Also "[RETRACTED] Cache sizing study", "Status: Withdrawn", reST ":Status: withdrawn",
# AsciiDoc ":status: withdrawn": a title mark or a status line.
_SELF_WITHDRAWN = re.compile(
    rf"^(?:[\[(【]\s*{_any(lx.WITHDRAWN_MARKS)}\s*[\])】]|{_STATUS}{_WITHDRAWN}[\s.!]*$)|"
    + _LEAD
    + r"this (?:announcement|notice|post|page|document|note|memo|message|plan|advisory|"
    r"event|meeting|change|offer|trial|closure|rollout|guidance|instruction|decision) "
    r"(?:(?:was|has been|had been) (?:withdrawn|cancell?ed|retracted|rescinded|revoked|"
    r"called off|pulled|annulled|voided)\b|(?:is|was) no longer (?:valid|in effect|in force|"
    r"accurate|current|applicable)\b)",
    re.IGNORECASE,
)
# "The depot open day announcement is hereby withdrawn", "The parking notice of May is
# no longer valid": a notice that names what it withdraws as the subject of its verb.
# Singular, and not in a table row: "Keys unused for a year are revoked" and
# "| CANCELLED | This trip is cancelled |" state rules, not withdrawals.
_NAMED_WITHDRAWN = re.compile(
    _LEAD + r"(?P<ref>[^|\s].{2,150}?)\s+(?:is|has been|was)\s+"
    r"(?:hereby\s+|now\s+|officially\s+)?(?:withdrawn|retracted|rescinded|revoked|"
    r"cancell?ed|called off|annulled|void(?:ed)?|no longer (?:valid|in effect|in force))\b",
    re.IGNORECASE,
)
# The subject must name something announced (or be an id / a file name).
_NOTICE_NOUN = re.compile(
    r"\b(?:announcement|notice|post|plan|email|e-mail|memo|message|advisory|bulletin|"
    r"newsletter|change|closure|update|page|policy|decision|proposal|event|meeting|rollout|"
    r"trial|offer|instruction|guidance|article|item|entry)s?\b|[\"“'‘]",
    re.IGNORECASE,
)
# Chinese notices: "关于调整夜班车时刻表的通知现予撤回", "《车库开放日通知》作废",
# "撤回通知：…", a title "…（已撤回）". The document is named in 《》 or 「」, or as
# "关于…的通知/公告"; a bare verb ("取消订单") names nothing and says nothing.
_CJK_WITHDRAW_VERB = re.compile(_words(lx.WITHDRAWAL_HEADS, cjk=True))
_CJK_NAMED = re.compile(
    r"[《「“](?P<quoted>[^》」”]{2,60})[》」”]|(?P<about>关于[^，。；：]{2,60}?的(?:通知|公告))"
)
_CJK_MARKED = re.compile(
    r"^(?P<ref>.{2,80}?)\s*[（(【\[]\s*已?" + _CJK_WITHDRAW_VERB.pattern + r"\s*[）)】\]]\s*$"
)
# "Our post of 1 December said … we have withdrawn it", "The closure we announced on
# 2 May is withdrawn": a withdrawal that names its document by date.
_DATED_REF = re.compile(
    r"\b(?:post|notice|announcement|message|email|note|plan|closure|change|update|article|"
    r"we announced|we posted|we published|we sent|announced|posted|published)\s+"
    r"(?:of|on|from|dated)\s+(?P<when>[^.;]{3,30})",
    re.IGNORECASE,
)
_WITHDRAW_VERB = re.compile(
    r"\b(?:is|was|has been|have|we have|we've) (?:now )?(?:withdrawn|retracted|cancell?ed|"
    r"rescinded)\b|\bwe (?:withdraw|retract)\b|\bwas wrong\b|\bdisregard\b",
    re.IGNORECASE,
)
_WITHDRAW_STEMS = ("withdr", "retract", "cancel", "rescind", "wrong", "disregard")
_UPDATE_HEAD = re.compile(r"^update\b[^:]{0,40}:\s*" + _REF, re.IGNORECASE)
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>[>\s]*|[-*+]\s+)?[*_`]*\s*")
_REF_END = re.compile(  # "Obsoletes: 1920      February 1997": a header's next column
    r"\s{3,}|\s+[—–-]\s+|[:;(]\s|\.\s|\s+(?:effective|as of|from|starting|on)\s+\d|[.:]$"
)


@dataclass(frozen=True, slots=True)
class Detected(Statement):
    """One relation a document states (``store/relations.Statement``'s fields).
    ``reverse``: the named document changes this one."""

    reverse: bool = False


def detect_relations(
    title: str, text: str, kind: str, doc_date: str | None, supersedes: Sequence[str] = ()
) -> list[Detected]:
    """Every relation ``text`` (with its frontmatter, if any) states, in line order."""
    front = split_frontmatter(text) if kind == "markdown" else None
    meta = front.meta if front else {}
    found = _from_frontmatter(meta, text, doc_date, supersedes)
    body_start = front.body_start_line if front else 1
    # Only the opening and the headings this far are read: never a list of every line.
    lines = first_lines(text, max(HEADING_LINES, body_start - 1 + OPENING_LINES * 2))
    seen_title = False
    prose: list[Detected] = []
    for number, paragraph in _opening_paragraphs(lines, body_start):
        prose += [d for d in _dated_withdrawal(paragraph, number, doc_date) if "\n" in paragraph]
    opening = list(_cue_lines(lines, body_start, kind))
    for number, line in opening:
        seen_title = seen_title or _clean(line).lower() == title.strip().lower()
        heading = kind == "markdown" and line.lstrip().startswith("#")
        prose += _from_line(line, number, doc_date, heading)
    if not seen_title and title.strip():
        prose += _from_line(title, 1, doc_date, heading=True)
    prose = [_named_below(d, lines) for d in prose]
    prose += _section_relations(title, lines, body_start, kind, doc_date)
    if not prose:  # else an "Effective <date>" line dates the change another cue states
        prose = [
            d
            for number, line in opening
            for d in _effective_update(_paragraph_at(lines, number), number, doc_date)
        ]
    if not prose:
        return _unique(found)  # most documents: no cue, and no date to look for
    # A date stated anywhere in the opening ("Effective 3 February: …") dates the change
    # a heading announced; else the document's own date.
    dates = (stated_date(_clean(line), doc_date) for _, line in opening)
    fallback = next((d for d in dates if d), None) or doc_date
    # A reverse row ("Superseded by ADR-12") takes effect on the other document's date,
    # which the store knows: left empty here.
    prose = [d if d.effective or d.reverse else replace(d, effective=fallback) for d in prose]
    prose += _update_of_own_title(title, prose)
    if any(d.reference == SELF for d in prose):  # "WITHDRAWN: X" then names itself
        prose = [d for d in prose if d.kind != WITHDRAWS or d.reference == SELF]
    return _unique(found + prose)


# "## Errata (2025-05-02)" then "The March issue said boards dim from 22:00": a heading
# that names no document, whose next line names it as the subject of "said".
_SAID = re.compile(
    r"^(?P<ref>(?:the|our|my|last|this|that)\s.{2,80}?)\s+(?:said|says|stated|states|gave|"
    r"gives|listed|lists|reported|showed|shows|printed|claimed|had|has)\b",
    re.IGNORECASE,
)
_DATE_WORDS = re.compile(rf"\b\d+\b|{_words(_MONTH_WORDS)}", re.IGNORECASE)
# A changelog section of taken-back changes ("### Reverted"), whose bullets name them.
_REVERTED_SECTION = re.compile(r"^(?:reverted|reverts|rolled back|backed out)\W*$", re.I)
_BULLET = re.compile(r"^\s*[-*+]\s+(?P<item>\S.*)$")
_TRAILING_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
# Release notes: "## Known issue fixed in 4.2.1" corrects the previous release's notes;
# "Known issue (fixed in 4.2.1)" left in the old notes names the release that fixed it.
_KNOWN_FIXED = re.compile(
    r"^(?:(?:previously\s+)?known issues?\s*(?:\(|[:\-–—])?\s*(?:now\s+)?(?:fixed|resolved)|"
    r"(?:fixed|resolved) known issues?)\b(?:\s+(?P<prep>in|from|of)\s+(?:v(?:ersion)?\s*)?"
    r"(?P<version>\d+(?:\.\d+)+))?\W*$",
    re.IGNORECASE,
)
PREVIOUS_RELEASE = "the previous release"  # a relative reference (``relations/references``)


# "Effective 3 February, report suspicious e-mails with the Report button": an opening
# line that states a change from a date names the fact it changes, as an "Update,
# <date>:" head does (matched loosely, ``match_reference``).
_EFFECTIVE_HEAD = re.compile(
    r"^(?:effective|with effect from)\s+(?P<when>[^,:;]{3,30}?)\s*[,:]\s*" + _REF, re.I
)


def _paragraph_at(lines: list[str], number: int) -> str:
    """Line ``number`` (1-based) joined with the lines that continue its paragraph: a
    sentence in Markdown source wraps."""
    joined = []
    for line in lines[number - 1 :]:
        if not line.strip() or (joined and line.lstrip().startswith(("#", "-", "*", "|"))):
            break
        joined.append(line.strip())
    return " ".join(joined)


def _effective_update(line: str, number: int, doc_date: str | None) -> list[Detected]:
    """The update an "Effective <date>, <sentence>" opening line states, if dated."""
    clean = _clean(line)
    match = _EFFECTIVE_HEAD.match(clean)
    when = parse_date(match["when"], doc_date, anchored=True) if match else None
    if match is None or when is None:
        return []
    reference = _cut(match["ref"])
    if len(content_words(normalize(reference))) < 2:
        return []
    return [Detected(UPDATES, reference, when, clean[:EVIDENCE_CHARS], number, number, PROSE)]


def _names_nothing(reference: str) -> bool:
    """Whether a reference is only a date or a bracket ("(2025-05-02)", "3 May")."""
    return not re.search(r"[^\W\d_]", _DATE_WORDS.sub(" ", reference))


def _named_below(found: Detected, lines: list[str]) -> Detected:
    """A correction heading that names only a date takes its reference from the next
    line's subject ("The March issue said …"), when that line has one."""
    if found.kind != CORRECTS or found.reverse or not _names_nothing(found.reference):
        return found
    following = (line for line in lines[found.end_line :] if line.strip())
    line = next(following, "")
    said = _SAID.match(_clean(line))
    if said is None:
        return found
    return replace(found, reference=said["ref"], effective=parse_date(found.evidence, None))


def _section_relations(
    title: str, lines: list[str], body_start: int, kind: str, doc_date: str | None
) -> list[Detected]:
    """Relations a heading states over the lines below it: a changelog's "Reverted"
    section withdraws each change it lists, a "Known issue fixed" heading corrects
    the release notes that listed the issue. Markdown headings only."""
    if kind != "markdown":
        return []
    found: list[Detected] = []
    dated = doc_date
    end = min(len(lines), HEADING_LINES)
    for index in range(body_start - 1, end):
        line = lines[index]
        if not line.lstrip().startswith("#"):
            continue
        clean = _clean(line)
        dated = parse_date(clean, doc_date) or dated
        if _REVERTED_SECTION.match(clean):
            found += _reverted_items(lines, index + 1, end, dated)
        fixed = _KNOWN_FIXED.match(clean)
        if fixed is not None:
            found.append(_known_issue_fixed(title, fixed, clean, index + 1, dated))
    return found


def _reverted_items(lines: list[str], start: int, end: int, dated: str | None) -> list[Detected]:
    """One withdrawal per bullet under a "Reverted" heading, named by its words up to
    the first sentence end, without a trailing "(added in 3.8.0)"."""
    found = []
    for index in range(start, end):
        line = lines[index]
        if line.lstrip().startswith("#"):
            break
        bullet = _BULLET.match(line)
        if bullet is None:
            continue
        reference = _TRAILING_PAREN.sub("", _cut(bullet["item"]))
        if len(content_words(normalize(reference))) >= 2:
            evidence = _clean(line)[:EVIDENCE_CHARS]
            found.append(
                Detected(WITHDRAWS, reference, dated, evidence, index + 1, index + 1, PROSE)
            )
    return found


def _known_issue_fixed(
    title: str, fixed: re.Match[str], clean: str, number: int, dated: str | None
) -> Detected:
    """The release that fixed a known issue corrects the previous release's notes (or
    the one it names: "Fixed known issues from 4.2.0"); old notes that name the fixing
    release ("Known issue (fixed in 4.2.1)") are corrected by it (reverse)."""
    evidence = clean[:EVIDENCE_CHARS]
    version = fixed["version"]
    if version and f"v{version}" not in ids_in(title):
        reverse = fixed["prep"].lower() == "in"
        effective = None if reverse else dated
        return Detected(
            CORRECTS, f"v{version}", effective, evidence, number, number, PROSE, reverse
        )
    return Detected(CORRECTS, PREVIOUS_RELEASE, dated, evidence, number, number, PROSE)


def _update_of_own_title(title: str, prose: list[Detected]) -> list[Detected]:
    """An "Update, <date>: <sentence>" names a fact, not a page; the note's own title
    ("Password policy: what changes") often names the page it updates. Not a header's
    numbers ("Updates: 31", "Updated-By: 37" name documents of the series)."""
    named = _cut(title)
    if len(content_words(normalize(named))) < 2:
        return []
    return [
        replace(d, reference=named)
        for d in prose
        if d.kind == UPDATES
        and not d.reverse
        and not parse_reference(d.reference).exact
        and not d.reference.replace(",", " ").replace(" ", "").isdigit()
    ][:1]


def _opening_paragraphs(lines: list[str], body_start: int) -> list[tuple[int, str]]:
    """(first line number, text) of the paragraphs in the opening lines: a withdrawal
    that names its document by date often spans two lines."""
    paragraphs: list[tuple[int, list[str]]] = []
    end = min(len(lines), body_start - 1 + OPENING_LINES * 2)
    for index in range(body_start - 1, end):
        line = lines[index].strip()
        if not line:
            paragraphs.append((index + 2, []))
        elif paragraphs:
            paragraphs[-1][1].append(line)
        else:
            paragraphs.append((index + 1, [line]))
    return [(n, "\n".join(p)) for n, p in paragraphs if len(p) > 1]


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
    def stated(
        kind: str, value: str, field: str, when: str | None, reverse: bool = False
    ) -> Detected:
        line, said = _field_line(text, field), status if value == SELF else value
        return Detected(kind, value, when, f"{field}: {said}", line, line, FRONTMATTER, reverse)

    status = str(meta.get("status") or "").strip().lower()
    listed: dict[str, tuple[str, ...]] = {f: meta_list(meta, f) for f in _FIELD_KINDS}
    listed["supersedes"] = tuple(dict.fromkeys((*listed["supersedes"], *supersedes)))
    effective = _frontmatter_date(meta) or doc_date
    found = [
        stated(_FIELD_KINDS[field], value, field, effective)
        for field, values in listed.items()
        for value in values
    ]
    withdrawn = status in _WITHDRAWN_STATUSES
    reverse_kind = WITHDRAWS if withdrawn else SUPERSEDES
    for value in meta_list(meta, "superseded_by") + meta_list(meta, "withdrawn_by"):
        found.append(stated(reverse_kind, value, "superseded_by", _frontmatter_date(meta), True))
    if withdrawn and not any(d.reverse for d in found):  # withdrawn, by no named document
        found.append(stated(WITHDRAWS, SELF, "status", effective, True))
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
    for number, line in enumerate(first_lines(text, 200), start=1):
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
    if _SELF_WITHDRAWN.match(clean):
        effective = stated_date(clean, doc_date)
        evidence = clean[:EVIDENCE_CHARS]
        return [Detected(WITHDRAWS, SELF, effective, evidence, number, number, PROSE, True)]
    dated = _dated_withdrawal(clean, number, doc_date)
    if dated:
        return dated
    trailing = _TRAILING_CUE.match(clean) if heading else None
    ended = _ENDS_WITHDRAWN.match(clean) if heading and trailing is None else None
    if ended is not None and len(content_words(normalize(ended["ref"]))) >= 2:
        return _detected(WITHDRAWS, False, ended["ref"], clean, number, doc_date)
    if trailing is not None:
        cue = trailing["cue"].lower()
        kind = UPDATES if cue.startswith(("update", "revis")) else CORRECTS
        kind = WITHDRAWS if cue in _WITHDRAWN_STATUSES else kind
        return _detected(kind, False, trailing["ref"], clean, number, doc_date)
    for kind, reverse, pattern in _CUES:
        match = pattern.match(clean)
        if match:
            return _detected(kind, reverse, match["ref"], clean, number, doc_date)
    named = _named_withdrawal(clean)
    if named is not None:
        return _detected(WITHDRAWS, False, named, clean, number, doc_date)
    match = _UPDATE_HEAD.match(clean)
    if match:  # "Update, 3 February 2026: …": the date is in the head, before the colon
        effective = stated_date(clean[: match.start("ref")], doc_date)
        reference = _cut(match["ref"])
        if re.search(r"\w", reference):
            evidence = clean[:EVIDENCE_CHARS]
            return [Detected(UPDATES, reference, effective, evidence, number, number, PROSE)]
    return []


def _named_withdrawal(clean: str) -> str | None:
    """What a line withdraws by naming it ("The parking notice of May is no longer
    valid", "《车库开放日通知》作废"), or None. A subject of fewer than two naming words
    ("This announcement is cancelled", "It was called off") names no document."""
    match = _NAMED_WITHDRAWN.match(clean)
    if match is not None:
        named = _cut(match["ref"])
        if _NOTICE_NOUN.search(named) is None and not parse_reference(named).exact:
            return None  # "Sent when an open invoice is cancelled": a rule, not a notice
        return named if len(content_words(normalize(named))) >= 2 else None
    if _CJK_WITHDRAW_VERB.search(clean) is None:
        return None
    marked = _CJK_MARKED.match(clean)
    if marked is not None:
        return marked["ref"].strip()
    cited = _CJK_NAMED.search(clean)
    if cited is None:  # the verb must act on the name, not be part of it
        return None
    if _CJK_WITHDRAW_VERB.search(clean[: cited.start()] + " " + clean[cited.end() :]) is None:
        return None
    return (cited["quoted"] or cited["about"]).strip()


def _dated_withdrawal(clean: str, number: int, doc_date: str | None) -> list[Detected]:
    """A line that withdraws a document it names by date (the year: the stater's)."""
    lowered = clean.lower()
    if not any(verb in lowered for verb in _WITHDRAW_STEMS):  # cheap first: most lines
        return []
    if _WITHDRAW_VERB.search(clean) is None:
        return []
    last = number + clean.count("\n")
    clean = clean.replace("\n", " ")
    named = _DATED_REF.search(clean)
    when = parse_date(named["when"], doc_date, anchored=True) if named else None
    if when is None or (doc_date and when > doc_date[:10]):
        return []
    evidence = clean[:EVIDENCE_CHARS]
    return [Detected(WITHDRAWS, DATED + when, None, evidence, number, last, PROSE)]


def _detected(
    kind: str, reverse: bool, ref: str, clean: str, number: int, doc_date: str | None
) -> list[Detected]:
    reference = _cut(ref)
    if not re.search(r"\w", reference):
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
