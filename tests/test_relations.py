"""Document relations (issue 9, "Document relations"): detection from frontmatter and
prose, matching references to documents (ambiguity never guessed, pending until the
target arrives, in any ingest order), cleanup on removal, rebuild equality, and their
use in search (current version first, annotations, the past question, contradictions)
and in ``read``.

Failure modes guarded: a decoy sentence ("withdraw cash", "correction factor") turning
into an edge; two candidate documents guessed into one; an edge that exists only when
the target was ingested first; an edge left pointing at a removed document.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.relations.detect import SELF, detect_relations
from kb_mcp.relations.references import doc_names, match_reference
from kb_mcp.render import entities_text
from kb_mcp.search.freshness import as_of_date
from kb_mcp.settings import Settings
from kb_mcp.store import relations as relation_rows
from kb_mcp.text.document_dates import document_date, path_date

RETENTION = """---
title: Audit log retention policy
date: 2026-01-10
---
# Audit log retention policy

Audit logs are kept for 90 days in the archive bucket, then deleted for good.
"""
ERRATA = """---
date: 2026-02-03
---
# Errata for the audit log retention policy

Effective 3 February: audit logs are kept for 30 days in the archive bucket, not 90 days.
"""


def _open(home: Path) -> Library:
    return Library(Settings(home=home, embedder="none"))


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")


def _library(tmp_path: Path, files: dict[str, str]) -> Library:
    _write(tmp_path / "notes", files)
    lib = _open(tmp_path / "home")
    lib.folders.add_folder(tmp_path / "notes", "notes")
    lib.folders.sync("notes")
    return lib


def _edges(lib: Library) -> set[tuple[str, str, str, str]]:
    """(from title, kind, to title, state) for every row; open sides are '?'."""
    titles = dict(lib.db.query("SELECT id, title FROM documents"))
    return {
        (titles.get(r.from_id, "?"), r.kind, titles.get(r.to_id, "?"), r.state)
        for r in relation_rows.all_relations(lib.db.conn)
    }


# --- detection (pure) --------------------------------------------------------------------

PROSE = [
    (
        "# Errata for the v2.3.1 release notes\n\nTwo fixes.",
        "corrects",
        "the v2.3.1 release notes",
        False,
    ),
    ("# Correction to the on-call rota\n\nBob, not Ann.", "corrects", "the on-call rota", False),
    (
        "# Addendum to the postmortem of the 3 March outage\n",
        "corrects",
        "the postmortem of the 3 March outage",
        False,
    ),
    (
        "# WITHDRAWN: Office move to Pier 9\n\nThe move is off.",
        "withdraws",
        "Office move to Pier 9",
        False,
    ),
    (
        "# Notice\n\nThis notice withdraws the parking announcement of May.",
        "withdraws",
        "the parking announcement of May",
        False,
    ),
    ("# Notice\n\nThis notice cancels TICKET-88.", "withdraws", "TICKET-88", False),
    ("# Update, 3 February 2026: ADR-12 retention\n", "updates", "ADR-12 retention", False),
    ("# ADR-13: Use Kafka\n\nStatus: Superseded by ADR-0014\n", "supersedes", "ADR-0014", True),
    ("# ADR-14: Use Pulsar\n\nSupersedes ADR-13.\n", "supersedes", "ADR-13", False),
    ("# Retention settings — update, 3 Feb 2026\n", "updates", "Retention settings", False),
    ("# Pager policy (revised March 2026)\n", "updates", "Pager policy", False),
    ("# Release notes v2.3.1: errata\n", "corrects", "Release notes v2.3.1", False),
]


@pytest.mark.parametrize(("text", "kind", "reference", "reverse"), PROSE)
def test_detect_relations_reads_each_kind_from_prose(
    text: str, kind: str, reference: str, reverse: bool
) -> None:
    """issue 9: each relation kind is detected from titles, headings and opening lines."""
    found = detect_relations("", text, "markdown", "2026-02-01")
    assert [(d.kind, d.reference, d.reverse, d.detected) for d in found] == [
        (kind, reference, reverse, "prose")
    ]


@pytest.mark.parametrize(
    ("field", "kind", "reverse"),
    [
        ("supersedes", "supersedes", False),
        ("replaces", "supersedes", False),
        ("corrects", "corrects", False),
        ("withdraws", "withdraws", False),
        ("updates", "updates", False),
        ("superseded_by", "supersedes", True),
    ],
)
def test_detect_relations_reads_each_kind_from_frontmatter(
    field: str, kind: str, reverse: bool
) -> None:
    """issue 9: supersedes / replaces / corrects / withdraws / updates / superseded_by."""
    text = f"---\ntitle: Note\n{field}: other.md\n---\n# Note\n\nBody.\n"
    found = detect_relations("Note", text, "markdown", "2026-01-01")
    assert [(d.kind, d.reference, d.reverse, d.detected, d.start_line) for d in found] == [
        (kind, "other.md", reverse, "frontmatter", 3)
    ]


def test_detect_relations_reads_a_withdrawn_status() -> None:
    """issue 9: `status: withdrawn` with no `superseded_by` withdraws the document itself."""
    text = "---\ntitle: Parking\nstatus: withdrawn\n---\n# Parking\n\nLevel 2.\n"
    found = detect_relations("Parking", text, "markdown", "2026-01-01")
    assert [(d.kind, d.reference, d.reverse, d.detected, d.start_line) for d in found] == [
        ("withdraws", SELF, True, "frontmatter", 3)
    ]


def test_detect_relations_ignores_decoys() -> None:
    """issue 9: everyday words that look like cues produce no relation."""
    text = (
        "# Front desk\n\nWithdraw cash at the front desk before noon.\n"
        "The correction factor for the scale is 1.2.\nWe update the rota weekly.\n"
        "## Replacing the toner\n\nThe update script corrects typos.\n"
        "## Deploy steps: update the chart\n\n## Front desk - updated rota\n"
    )
    assert detect_relations("Front desk", text, "markdown", "2026-01-01") == []


def test_detect_relations_dates_the_change_from_the_text() -> None:
    """issue 9: "effective 3 February" in the opening dates the change (year: the doc's)."""
    found = detect_relations("", ERRATA, "markdown", "2026-02-10")
    assert [(d.kind, d.effective) for d in found] == [("corrects", "2026-02-03")]
    posted = "# Correction to the on-call rota\n\nPosted 12 March 2026. Bob, not Ann.\n"
    assert detect_relations("", posted, "markdown", None)[0].effective == "2026-03-12"


def test_match_reference_never_guesses_between_two_candidates() -> None:
    """issue 9: an ambiguous reference is two candidates, which the store keeps open."""
    names = [
        doc_names(1, "On-call rota", ["team-a/rota.md"]),
        doc_names(2, "On-call rota", ["team-b/rota.md"]),
        doc_names(3, "Errata for the on-call rota", ["errata.md"]),
    ]
    assert sorted(match_reference("the on-call rota", names)) == [1, 2]
    assert match_reference("team-b/rota.md", names) == [2]
    assert match_reference("rota", names) == []  # one word names a topic


# --- the store ---------------------------------------------------------------------------


def test_relations_resolve_in_either_ingest_order(tmp_path: Path) -> None:
    """issue 9: a reference to a document not yet ingested stays pending and resolves
    when it arrives; both orders give the same edge."""
    expected = {
        (
            "Errata for the audit log retention policy",
            "corrects",
            "Audit log retention policy",
            "resolved",
        )
    }
    for first, second in (("retention.md", "errata.md"), ("errata.md", "retention.md")):
        root = tmp_path / first
        files = {"retention.md": RETENTION, "errata.md": ERRATA}
        _write(root / "notes", {first: files[first]})
        with _open(root / "home") as lib:
            lib.folders.add_folder(root / "notes", "notes")
            lib.folders.sync("notes")
            if first == "errata.md":
                assert {e[3] for e in _edges(lib)} == {"pending"}
            _write(root / "notes", {second: files[second]})
            lib.folders.sync("notes")
            assert _edges(lib) == expected


def test_relations_ambiguous_reference_is_not_an_edge(tmp_path: Path) -> None:
    """issue 9: two documents answer the reference: no edge, and a third arrival or a
    removal re-decides."""
    rota = "# On-call rota\n\nAnn is on call in week {n}.\n"
    correction = "# Correction to the on-call rota\n\nBob is on call in week 3.\n"
    with _library(
        tmp_path, {"a.md": rota.format(n=1), "b.md": rota.format(n=2), "fix.md": correction}
    ) as lib:
        assert _edges(lib) == {("Correction to the on-call rota", "corrects", "?", "ambiguous")}
        (tmp_path / "notes" / "b.md").unlink()
        lib.folders.sync("notes")
        assert _edges(lib) == {
            ("Correction to the on-call rota", "corrects", "On-call rota", "resolved")
        }


def test_relations_removal_cleans_up(tmp_path: Path) -> None:
    """issue 9: removing the target leaves the row pending; removing the document that
    stated it removes the row."""
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}) as lib:
        (tmp_path / "notes" / "retention.md").unlink()
        lib.folders.sync("notes")
        assert {e[2:] for e in _edges(lib)} == {("?", "pending")}
        (tmp_path / "notes" / "errata.md").unlink()
        lib.folders.sync("notes")
        assert relation_rows.all_relations(lib.db.conn) == []


def test_relations_removal_of_an_unnamed_document_changes_no_row(tmp_path: Path) -> None:
    """issue 10 (freshness): a removal or edit of a document no row names skips the
    re-match (it named the whole library per deleted file), and leaves every row as it
    was: resolved stays resolved, pending stays pending."""
    orphan = "# Withdrawal of the travel policy\n\nThe travel policy is withdrawn.\n"
    files = {"retention.md": RETENTION, "errata.md": ERRATA, "orphan.md": orphan}
    files["other.md"] = "# Lunch menu\n\nSoup on Monday.\n"
    with _library(tmp_path, files) as lib:
        before = _edges(lib)
        assert {e[3] for e in before} == {"resolved", "pending"}
        (tmp_path / "notes" / "other.md").write_text("# Lunch menu\n\nFish on Friday.\n")
        lib.folders.sync("notes")
        assert _edges(lib) == before
        (tmp_path / "notes" / "other.md").unlink()
        lib.folders.sync("notes")
        assert _edges(lib) == before


def test_relations_rebuild_recreates_them(tmp_path: Path) -> None:
    """issue 9: relations are derived data; `reindex --rebuild` gives the same rows."""
    adr13 = "# ADR-13: Use Kafka\n\nStatus: Superseded by ADR-14\n\nWe use Kafka.\n"
    adr14 = "# ADR-14: Use Pulsar\n\nSupersedes ADR-13.\n"
    files = {"retention.md": RETENTION, "errata.md": ERRATA, "a13.md": adr13, "a14.md": adr14}
    with _library(tmp_path, files) as lib:
        before = relation_rows.snapshot(lib.db.conn)
        assert len(before) == 3
        lib.writing.reindex(rebuild=True)
        assert relation_rows.snapshot(lib.db.conn) == before


def test_relations_of_an_older_database_are_detected_at_first_use(tmp_path: Path) -> None:
    """issue 9: a library stored before the relations table (or under older rules) gets
    its rows at the first search, without a rebuild."""
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}) as lib:
        before = relation_rows.snapshot(lib.db.conn)
        with lib.db.write() as conn:
            conn.execute("DELETE FROM doc_relations")
            conn.execute("DELETE FROM meta WHERE key = 'relations_version'")
    with _open(tmp_path / "home") as lib:
        assert lib.lookup.search("audit log retention").hits[1].relations
        assert relation_rows.snapshot(lib.db.conn) == before


# --- search and read ---------------------------------------------------------------------


def test_search_puts_the_correction_first_and_says_so(tmp_path: Path) -> None:
    """issue 9: both match; the current one ranks first; each says what it is."""
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}) as lib:
        hits = lib.lookup.search("how many days are audit logs kept in the archive bucket").hits
        assert [h.title for h in hits] == [
            "Errata for the audit log retention policy",
            "Audit log retention policy",
        ]
        errata, old = hits
        assert old.relations == (f"corrected by {errata.doc}#L4-L4",)
        assert errata.relations == (f"corrects {old.doc}",)


def test_search_about_the_past_finds_the_old_version_first(tmp_path: Path) -> None:
    """issue 9: "before the change" asks for the old version."""
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}) as lib:
        query = "how many days were audit logs kept in the archive bucket before the change"
        hits = lib.lookup.search(query).hits
        assert hits[0].title == "Audit log retention policy"
        assert hits[0].relations  # still says it was corrected


def test_search_withdrawn_says_when_and_by_whom(tmp_path: Path) -> None:
    """issue 9: `withdrawn on <date> by <cite>`; relations off: no annotation, the old
    order."""
    move = (
        "---\ndate: 2026-03-01\n---\n# Office move to Pier 9\n\n"
        "The office moves to Pier 9 on 1 May.\n"
    )
    notice = (
        "---\ndate: 2026-03-20\n---\n# WITHDRAWN: Office move to Pier 9\n\n"
        "The office move to Pier 9 is off; we stay.\n"
    )
    with _library(tmp_path, {"move.md": move, "notice.md": notice}) as lib:
        hits = lib.lookup.search("office move to Pier 9").hits
        assert hits[0].title.startswith("WITHDRAWN")
        assert hits[1].relations == (f"withdrawn on 2026-03-20 by {hits[0].doc}#L4-L4",)
    off = Library(Settings(home=tmp_path / "home", embedder="none", relations=False))
    with off:
        assert all(h.relations == () for h in off.lookup.search("office move to Pier 9").hits)


def test_search_marks_a_contradiction_without_picking(tmp_path: Path) -> None:
    """issue 9: two documents on one topic with different values, neither referring to
    the other: both returned, both marked. A different topic is not a contradiction."""
    ops = "# Session timeout\n\nThe web session timeout is 30 minutes.\n"
    sec = "# Session timeout (security)\n\nThe web session timeout is 15 minutes.\n"
    cache = "# Cache warmup\n\nThe web cache warmup takes 5 minutes after session start.\n"
    with _library(tmp_path, {"ops.md": ops, "sec.md": sec, "cache.md": cache}) as lib:
        hits = {h.title: h for h in lib.lookup.search("web session timeout minutes").hits}
        a, b = hits["Session timeout"], hits["Session timeout (security)"]
        assert a.relations == (f"contradicts {b.cite}",)
        assert b.relations == (f"contradicts {a.cite}",)
        assert hits["Cache warmup"].relations == ()


def test_read_shows_relations_both_ways(tmp_path: Path) -> None:
    """issue 9: `read` lists a document's relations with cites, in both directions, and
    the references it makes that match nothing."""
    extra = "# Correction to the parking rules\n\nLevel 2, not 3.\n"
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA, "p.md": extra}) as lib:
        errata = lib.lookup.search("errata audit log retention").hits[0]
        old = lib.lookup.read("retention.md")
        assert old.relations == (
            f"corrected by {errata.doc} (evidence: {errata.doc}#L4-L4, from prose)",
        )
        assert lib.lookup.read(errata.doc).relations == (
            f"corrects {old.doc} (evidence: {errata.doc}#L4-L4, from prose)",
        )
        assert lib.lookup.read("p.md").relations == ("corrects 'the parking rules': pending (L1)",)


@pytest.mark.anyio
async def test_search_tool_reports_relations_over_stdio(
    tmp_path: Path, home: Path, mcp_client
) -> None:
    """issue 9: through the real stdio server, the current document ranks first and the
    results carry their relations (JSON and text)."""
    _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}).close()
    async with mcp_client() as client:
        found = await client.call_tool(
            "search", {"query": "how many days are audit logs kept in the archive bucket"}
        )
    first, second = found.structured_content["results"][:2]
    assert first["title"].startswith("Errata")
    assert second["relations"] == [f"corrected by {first['doc']}#L4-L4"]
    assert f"relations: corrects {second['doc']}" in found.content[0].text


def test_detect_relations_reads_a_withdrawal_named_by_date() -> None:
    """issue 9: "Our post of 1 December said … we have withdrawn it" names its document
    by date (the year is the stater's); a document that says it was withdrawn names
    itself, and its "WITHDRAWN: X" title then names no other."""
    retraction = (
        "# Retraction: tram Wi-Fi\n\nOur post of 1 December said that every tram gets Wi-Fi.\n"
        "That was wrong and we have withdrawn it.\n"
    )
    found = detect_relations("", retraction, "markdown", "2025-12-09")
    assert [(d.reference, d.start_line, d.end_line) for d in found] == [
        ("dated 2025-12-01", 3, 4),
        ("tram Wi-Fi", 1, 1),
    ]
    itself = "# WITHDRAWN: Jenkins retirement\n\n*This announcement was withdrawn on 19 January.*\n"
    found = detect_relations("", itself, "markdown", "2026-01-02")
    assert [(d.kind, d.reference, d.effective, d.reverse) for d in found] == [
        ("withdraws", SELF, "2026-01-19", True)
    ]


def test_relations_match_by_date_and_by_series(tmp_path: Path) -> None:
    """issue 9: a dated reference resolves to the document of that day; "last week's
    minutes" to the latest earlier document of the stater's own series."""
    files = {
        "closing.md": (
            "---\ndate: 2025-05-02\n---\n# Quarry Lane desk closes on 30 May\n\nIt closes.\n"
        ),
        "stays.md": (
            "---\ndate: 2025-05-21\n---\n# Quarry Lane desk stays open\n\n"
            "The closure we announced on 2 May is withdrawn.\n"
        ),
        "m1.md": "---\ndate: 2026-03-05\n---\n# Payments group, minutes\n\nRefunds: 5 days.\n",
        "m2.md": "---\ndate: 2026-03-12\n---\n# Payments group, minutes\n\nRefunds: 3 days.\n",
        "m3.md": (
            "---\ndate: 2026-03-19\n---\n# Payments group, minutes\n\n"
            "Correction to item 1 of last week's minutes: refunds stay at 5 days.\n"
        ),
    }
    with _library(tmp_path, files) as lib:
        dated = {(f, k, t) for f, k, t, state in _edges(lib) if state == "resolved"}
        assert (
            "Quarry Lane desk stays open",
            "withdraws",
            "Quarry Lane desk closes on 30 May",
        ) in dated
        assert (
            lib.lookup.read("m2.md")
            .relations[0]
            .startswith(f"corrected by {lib.lookup.read('m3.md').doc}")
        )
        assert lib.lookup.read("m1.md").relations == ()


def test_document_date_is_read_from_the_text_and_the_file_name() -> None:
    """issue 9: "Posted 12 March 2026", an "Update, <date>:" head, a dated first line,
    a dated file name; nothing without a year."""
    assert document_date("# Hours\n\nPosted 18 August 2025.\n", "markdown") == "2025-08-18"
    assert document_date("# R\n\nUpdate, 3 February 2026: now 36 months\n", "markdown") == (
        "2026-02-03"
    )
    assert document_date("**#lantern** · 14 October 2025\n\nhi\n", "markdown") == "2025-10-14"
    assert document_date("# Fares\n\nFrom 1 April the cap is higher.\n", "markdown") is None
    assert path_date("notes/semaphore/2026-01-05-fare-cap.md") == "2026-01-05"
    assert path_date("notes/2026-13-05.md") is None


@pytest.mark.parametrize(
    ("query", "as_of"),
    [
        ("How much was the daily fare cap back in July 2024?", "2024-07-31"),
        ("the most you could pay just before the April 2025 fare change", "2025-03-31"),
        ("As of autumn 2025, what is the cap", "2025-10-15"),
        ("At the start of 2024, how many requests", "2024-01-31"),
        ("minimum password length in 2024", "2024-12-31"),
        ("deploy python 3.11 in 2 steps", None),
        ("What was the polling interval until March 2025?", "2025-02-28"),
        ("retention prior to the 2024 review", "2023-12-31"),
        ("which Kubernetes version did we run in Q3 2024", "2024-09-30"),
        ("the reporting interval in the first half of 2025", "2025-06-30"),
        ("H2 2024 desk hours", None),  # no lead word: a label, not a time asked about
        ("up until 2023, who approved access", "2022-12-31"),
    ],
)
def test_as_of_date_reads_the_ways_questions_name_a_time(query: str, as_of: str | None) -> None:
    """issue 9 (time_bound): "as of" is one of several ways to ask about a time."""
    assert as_of_date(query) == as_of


def test_cli_read_prints_relations(tmp_path: Path, kb_cli) -> None:
    """issue 9: `kb-mcp read` shows the relations, with cites, in its text output."""
    with _library(tmp_path, {"retention.md": RETENTION, "errata.md": ERRATA}) as lib:
        errata = lib.lookup.read("errata.md").doc
    done = kb_cli("read", "retention.md")
    assert done.returncode == 0, done.stderr
    assert f"relations:\n- corrected by {errata} (evidence: {errata}#L4-L4, from prose)" in (
        done.stdout
    )


def test_entities_show_the_relations_of_the_documents_they_list(tmp_path: Path) -> None:
    """issue 9 (`kb-mcp entities` shows the document relations of a document): an entity
    mentioned in a withdrawn announcement says so beside that mention, in text and JSON."""
    move = "---\ndate: 2026-03-01\n---\n# Office move to Pier 9\n\nFacilities moves to Pier 9.\n"
    notice = (
        "---\ndate: 2026-03-20\n---\n# WITHDRAWN: Office move to Pier 9\n\n"
        "Facilities stays where it is.\n"
    )
    with _library(tmp_path, {"move.md": move, "notice.md": notice}) as lib:
        (pier, *_) = lib.entities.find("Pier 9")
        old = lib.lookup.read("move.md").doc
        assert pier.relations[old] == (
            f"withdrawn on 2026-03-20 by {lib.lookup.read('notice.md').doc}#L4-L4",
        )
        assert "withdrawn on 2026-03-20 by" in entities_text([pier])


# --- withdrawals as real notices word them (issue 9, quality pass) --------------------
# Conventions other than golden2 dev's: a parish-council / school / IT-ops register,
# bracketed title marks, "please disregard", a subject that "is no longer valid", an
# "Update:" lead over the old text, and Chinese 撤回 / 作废 notices.

WITHDRAWALS = [
    ("# [Cancelled] Allotment open day\n\nNo event.", "Allotment open day", False),
    ("# Allotment open day (rescinded)\n\nNo event.", "Allotment open day", False),
    ("# Rescinded: Travel expenses policy 2024\n", "Travel expenses policy 2024", False),
    ("# Notice\n\nPlease disregard the parking permit renewal email.", None, False),
    ("# Notice\n\nThe parking permit renewal notice is no longer valid.", None, False),
    ("# Notice\n\nThe school trip announcement is hereby withdrawn.", None, False),
    ("# IT news\n\nWe've pulled the printer driver rollout notice.", None, False),
    ("# Printer driver rollout\n\n> **Update:** this rollout has been called off.", SELF, True),
    ("# Parking permits\n\nThis page is no longer valid; see the permits portal.", SELF, True),
    ("# 撤回通知\n\n关于调整夜班车时刻表的通知现予撤回。", "关于调整夜班车时刻表的通知", False),
    ("# 关于调整夜班车时刻表的通知（已撤回）\n", "关于调整夜班车时刻表的通知", False),
    ("# 作废声明\n\n《车库开放日安排》即日起作废。", "车库开放日安排", False),
    ("# Allotment open day called off\n\nRain.", "Allotment open day", False),
    ("# SEC-2026-07 withdrawn\n\nNo action needed.", "SEC-2026-07", False),
]


@pytest.mark.parametrize(("text", "reference", "reverse"), WITHDRAWALS)
def test_detect_relations_reads_withdrawals_in_other_phrasings(
    text: str, reference: str | None, reverse: bool
) -> None:
    """issue 9: a withdrawal is read in the phrasings notices use (retracted, rescinded,
    no longer valid, disregard, cancelled, pulled, 撤回, 作废), naming its document by
    title, or itself (``SELF``) when the old text carries the mark."""
    found = detect_relations("", text, "markdown", "2026-05-10")
    assert [(d.kind, d.reverse) for d in found] == [("withdraws", reverse)]
    if reference is not None:
        assert found[0].reference == reference


def test_detect_relations_withdrawal_by_date_through_disregard() -> None:
    """issue 9: "please disregard our post of 2 May" names the post by its date."""
    text = "# Notice\n\nPlease disregard our post of 2 May about parking permits.\n"
    found = detect_relations("", text, "markdown", "2026-05-10")
    assert [(d.kind, d.reference) for d in found] == [("withdraws", "dated 2026-05-02")]


def test_detect_relations_ignores_withdrawal_words_in_rules_and_tables() -> None:
    """issue 9: rules and tables that use the words are not notices: plural subjects,
    no announced thing, a table row, a Chinese title whose verb is part of its name,
    a bare 取消 without a named document, and the ambiguous present tense."""
    texts = [
        "# Key hygiene\n\nKeys unused for a year are revoked automatically.\n",
        "# Invoices\n\nSent when an open invoice is cancelled by the customer.\n",
        "# Message types\n\n| `CANCELLED` | This trip is cancelled |\n",
        "# 关于停止执行旧版考勤制度的通知\n\n自三月起使用新系统。\n",
        "# 订单说明\n\n乘客可以在出发前取消订单。\n",
        "# Depot open day\n\n**This event is cancelled.**\n",
        "# Bus stop closure\n\nThe stop is cancelled for two weeks while the road is dug up.\n",
        "def close(self):\n    # ignore close errors\n    pass\n",
        "# Message types\n\n## Trips cancelled\n\nSent per trip.\n",
        "# Limits\n\n# rate limit violation. This happens when a script is cancelled\n",
    ]
    for text in texts:
        assert detect_relations("", text, "markdown", "2026-05-10") == [], text


def test_match_reference_reads_chinese_titles_by_their_pieces() -> None:
    """issue 9: a Chinese title has no spaces; it is matched by two-character pieces
    without the notice's framing (关于 … 的通知), and one piece names a topic only."""
    names = [
        doc_names(1, "关于调整夜班车时刻表的通知", ["a.md"]),
        doc_names(2, "关于车库开放日安排的通知", ["b.md"]),
    ]
    assert match_reference("《调整夜班车时刻表》", names) == [1]
    assert match_reference("车库开放日安排", names) == [2]
    assert match_reference("车库", names) == []


def test_search_ranks_a_chinese_withdrawal_first_and_says_so(tmp_path: Path) -> None:
    """issue 9: 撤回 notice and the notice it withdraws both match; the withdrawal ranks
    first and the old one says `withdrawn on <date> by <cite>`."""
    old = (
        "---\ndate: 2026-03-01\n---\n# 关于调整夜班车时刻表的通知\n\n"
        "自四月一日起，夜班车末班时间调整为凌晨一点。\n"
    )
    notice = (
        "---\ndate: 2026-03-20\n---\n# 撤回通知\n\n"
        "关于调整夜班车时刻表的通知现予撤回，夜班车末班时间不变。\n"
    )
    with _library(tmp_path, {"old.md": old, "notice.md": notice}) as lib:
        hits = lib.lookup.search("夜班车末班时间").hits
        assert [h.title for h in hits] == ["撤回通知", "关于调整夜班车时刻表的通知"]
        assert hits[1].relations == (f"withdrawn on 2026-03-20 by {hits[0].doc}#L6-L6",)


POSTMORTEM = """---
date: 2026-02-10
---
# Postmortem: harbour ferry ticket gates outage

Incident commander: Priya Raman of the gates team, paged at 06:40.

The outage hit 14 ferry ticket gates at the harbour terminal for two hours.
"""
ADDENDUM = """---
date: 2026-02-20
---
# Addendum to the postmortem of the harbour ferry ticket gates outage

Recount: the outage hit 19 ferry ticket gates at the harbour terminal, not 14.
"""


def test_search_demotes_a_corrected_document_only_for_the_corrected_fact(
    tmp_path: Path,
) -> None:
    """issue 9 (demote only the part that changed): an addendum that corrects the gate
    count puts itself first for the count, but a question about what it leaves alone
    (the incident commander) still gets the postmortem first, not demoted, and the
    postmortem still says it was corrected."""
    with _library(tmp_path, {"pm.md": POSTMORTEM, "addendum.md": ADDENDUM}) as lib:
        count = lib.lookup.search("how many ferry ticket gates did the harbour outage hit").hits
        assert count[0].title.startswith("Addendum")
        who = lib.lookup.search("who was incident commander of the harbour ferry gates outage").hits
        assert who[0].title.startswith("Postmortem")
        assert who[0].adjustments == ()
        assert who[0].relations == (f"corrected by {count[0].doc}#L4-L4",)


@pytest.mark.parametrize(
    ("query", "past", "kept"),
    [
        ("what were the previous desk hours", True, "what were the desk hours"),
        (
            "the earlier retention period for ridership data",
            True,
            "the retention period for ridership data",
        ),
        ("what was the rate limit before ADR-0012", True, "what was the rate limit"),
        ("which interval applied before v2.3", True, "which interval applied"),
        ("previous page of the results", False, "previous page of the results"),
        ("what is the rate limit", False, "what is the rate limit"),
    ],
)
def test_asks_about_past_reads_previous_settings_and_changes_by_id(
    query: str, past: bool, kept: str
) -> None:
    """issue 9 (time_bound): "the previous / earlier <setting>" and "before ADR-12" ask
    for the old version; only the framing words leave the match, never the setting."""
    from kb_mcp.search.relations import asks_about_past, without_past_phrase

    assert asks_about_past(query) is past
    assert " ".join(without_past_phrase(query).split()) == kept


# --- relations in other conventions (issue 9, reldev) -----------------------------------
# A wiki banner on the old page, "This replaces the guidance in <title>", a changelog
# section of reverted changes, release notes that fix a known issue, an errata heading
# dated only, whose next line names the issue it corrects.

CONVENTIONS = [
    (
        "> **Outdated** — see [Build agents](build-agents.md).\n\n# CI runners\n\nUse ci-3.\n",
        "supersedes",
        "[Build agents](build-agents.md)",
        True,
    ),
    (
        "# Old wiki page\n\nThis page is deprecated; use the [new runbook](runbook-v2.md).\n",
        "supersedes",
        "the [new runbook](runbook-v2.md)",
        True,
    ),
    (
        "# Handling card data\n\nThis replaces the guidance in *Card data at the desk*. "
        "Never write card numbers down.\n",
        "supersedes",
        "the guidance in *Card data at the desk",
        False,
    ),
    (
        "# Changelog\n\n## 2.4.1 - 2025-03-02\n\n### Reverted\n\n"
        "- Dark mode for the timetable page (added in 2.4.0). It broke printing.\n",
        "withdraws",
        "Dark mode for the timetable page",
        False,
    ),
    (
        "# Changelog\n\n- Reverted: nightly export to S3\n",
        "withdraws",
        "nightly export to S3",
        False,
    ),
]


@pytest.mark.parametrize(("text", "kind", "reference", "reverse"), CONVENTIONS)
def test_detect_relations_reads_banners_replacements_and_reverts(
    text: str, kind: str, reference: str, reverse: bool
) -> None:
    """issue 9: the conventions wikis and changelogs use besides the ones first read."""
    found = detect_relations("", text, "markdown", "2025-06-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [(kind, reference, reverse)]


def test_detect_relations_reverted_section_takes_its_release_date() -> None:
    text = (
        "# Changelog\n\n## 3.1.0 - 2025-09-01\n\n### Added\n\n- Offline maps\n\n"
        "## 3.0.2 - 2025-08-11\n\n### Reverted\n\n- Offline maps for trams\n- Typo\n"
    )
    found = detect_relations("Changelog", text, "markdown", None)
    assert [(d.reference, d.effective) for d in found] == [("Offline maps for trams", "2025-08-11")]


def test_detect_relations_ignores_revert_words_in_prose_and_other_sections() -> None:
    """A sentence that starts with "Reverted" and a "Reverted" word inside a heading
    about something else state nothing."""
    for text in (
        "# Incident\n\nReverted the config by hand at 10:02.\n",
        "# Changelog\n\n### Reverted commits are listed in git\n\n- Offline maps for trams\n",
        "# Release notes\n\n## Known issues\n\n- Printing is slow.\n",
    ):
        assert detect_relations("", text, "markdown", "2025-06-01") == [], text


def test_detect_relations_known_issue_fixed_names_the_release() -> None:
    """The fixing release corrects the previous one; old notes naming the fixing
    release are corrected by it."""
    new = "# gate 2.8.1\n\n## Known issues fixed in 2.8.1\n\n- Login works again.\n"
    found = detect_relations("gate 2.8.1", new, "markdown", "2025-06-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [
        ("corrects", "the previous release", False)
    ]
    old = "# gate 2.8.0\n\n## Known issue (fixed in 2.8.1)\n\n- Login fails.\n"
    found = detect_relations("gate 2.8.0", old, "markdown", "2025-05-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [("corrects", "v2.8.1", True)]


def test_detect_relations_errata_heading_named_by_the_next_line() -> None:
    text = (
        "# Depot news, June\n\n## Canteen\n\nNew menu.\n\n## Errata (2025-07-03)\n\n"
        "The May issue said the canteen closes at 15:00. It closes at 16:00.\n"
    )
    found = detect_relations("Depot news, June", text, "markdown", "2025-06-30")
    assert [(d.kind, d.reference, d.effective) for d in found] == [
        ("corrects", "The May issue", "2025-07-03")
    ]


def test_relations_match_a_month_and_a_release_in_the_series(tmp_path: Path) -> None:
    """issue 9: "The May issue" names the May document of the stater's series (not
    another series' May issue, not the April one); "the previous release" names the
    latest earlier release notes of the same product."""
    files = {
        "apr.md": "---\ndate: 2025-04-30\n---\n# Depot news, April 2025\n\nCanteen 14:00.\n",
        "may.md": "---\ndate: 2025-05-30\n---\n# Depot news, May 2025\n\nCanteen 15:00.\n",
        "other.md": "---\ndate: 2025-05-29\n---\n# Fleet digest, May 2025\n\nNothing.\n",
        "jun.md": (
            "---\ndate: 2025-06-30\n---\n# Depot news, June 2025\n\n## Canteen\n\nNew menu.\n\n"
            "## Errata (2025-07-03)\n\nThe May issue said the canteen closes at 15:00. "
            "It closes at 16:00.\n"
        ),
        "g0.md": "---\ndate: 2025-05-01\n---\n# gate 2.8.0\n\n## Known issues\n\n- Login.\n",
        "g1.md": (
            "---\ndate: 2025-06-01\n---\n# gate 2.8.1\n\n## Known issue fixed in 2.8.1\n\n"
            "- Login works.\n"
        ),
        "h1.md": "---\ndate: 2025-05-20\n---\n# hatch 2.8.1\n\nOther product.\n",
    }
    with _library(tmp_path, files) as lib:
        resolved = {(f, k, t) for f, k, t, state in _edges(lib) if state == "resolved"}
        assert resolved == {
            ("Depot news, June 2025", "corrects", "Depot news, May 2025"),
            ("gate 2.8.1", "corrects", "gate 2.8.0"),
        }


def test_detect_relations_effective_line_names_the_fact_it_changes(tmp_path: Path) -> None:
    """issue 9: "Effective 3 February, <sentence>" (no year: the document's) updates the
    page its wrapped sentence names; in an errata the same line only dates the errata."""
    notice = (
        "---\ndate: 2026-01-19\n---\n# The new badge readers\n\n"
        "Effective 3 February, tap your staff badge on the reader to open the\n"
        "bike store door. The key safe is removed.\n"
    )
    found = detect_relations("The new badge readers", notice, "markdown", "2026-01-19")
    assert [(d.kind, d.effective) for d in found][:1] == [("updates", "2026-02-03")]
    assert "bike store door" in found[0].reference
    assert [d.kind for d in detect_relations("", ERRATA, "markdown", "2026-02-03")] == ["corrects"]
    files = {
        "old.md": "---\ndate: 2024-05-01\n---\n# Bike store door\n\nAsk for the key.\n",
        "new.md": notice,
    }
    with _library(tmp_path, files) as lib:
        resolved = {(f, k, t) for f, k, t, state in _edges(lib) if state == "resolved"}
        assert resolved == {("The new badge readers", "updates", "Bike store door")}


def test_series_and_month_references_read_whole_month_words() -> None:
    """A word that starts like a month ("market", "decision") is no month: "the market
    report" is not relative, and "Marketing plan" is not one series with "Plan"."""
    from kb_mcp.relations.references import is_relative, series_key

    assert is_relative("The March issue") and is_relative("the Sept. minutes")
    assert not is_relative("the market report")
    assert series_key("marketing plan 2025") == "marketing plan"
    assert series_key("lantern news march 2025") == series_key("lantern news april 2025")
    fixed = "# gate 2.8.1\n\n## Fixed known issues from 2.8.0\n\n- Login.\n"
    found = detect_relations("gate 2.8.1", fixed, "markdown", "2025-06-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [("corrects", "v2.8.0", False)]


def test_relations_an_outdated_banner_naming_two_files_is_no_edge(tmp_path: Path) -> None:
    """issue 9: "> **Outdated** — see [README](README.md)" with a README.md in two
    folders names neither; a Reverted bullet that two pages' titles fit equally, neither."""
    folder = tmp_path / "notes"
    for sub in ("a", "b"):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "README.md").write_text(f"# {sub} service\n\nRun it.\n")
    (folder / "old.md").write_text("> **Outdated** — see [README](README.md).\n\n# Old\n\nx\n")
    (folder / "p1.md").write_text("# Offline maps for trams\n\nMaps.\n")
    (folder / "p2.md").write_text("# Offline maps for buses\n\nMaps.\n")
    (folder / "CHANGELOG.md").write_text(
        "# Changelog\n\n## 2.0.1 - 2025-03-02\n\n### Reverted\n\n- Offline maps (added in 2.0.0)\n"
    )
    with _open(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "notes")
        lib.folders.sync("notes")
        states = {(f, k, t, state) for f, k, t, state in _edges(lib)}
        assert states == {  # the open side is '?': a reverse row's changer, a bullet's page
            ("?", "supersedes", "Old", "ambiguous"),
            ("Changelog", "withdraws", "?", "ambiguous"),
        }


# Structural cues in other languages and formats (issue 21): (reader kind, text, kind,
# reference, reverse). Each names its cue the way such documents do; the words come from
# ``text/lexicon``'s relation tables.
STRUCTURAL = [
    # German
    ("markdown", "# Berichtigung zur Preisliste 2026\n", "corrects", "Preisliste 2026", False),
    ("markdown", "# Korrektur zum Rundschreiben RS-12\n", "corrects", "Rundschreiben RS-12", False),
    ("text", "Ersetzt durch: Dienstanweisung DA-9\n", "supersedes", "Dienstanweisung DA-9", True),
    ("text", "Ersetzt: Dienstanweisung DA-7\n", "supersedes", "Dienstanweisung DA-7", False),
    (
        "markdown",
        "# Zurückgezogen: Rundschreiben RS-12\n",
        "withdraws",
        "Rundschreiben RS-12",
        False,
    ),
    (
        "markdown",
        "# Widerruf des Rundschreibens RS-12\n",
        "withdraws",
        "Rundschreibens RS-12",
        False,
    ),
    (
        "markdown",
        "# Aufgehoben: Dienstanweisung DA-7\n",
        "withdraws",
        "Dienstanweisung DA-7",
        False,
    ),
    ("text", "Status: gilt nicht mehr\n", "withdraws", SELF, True),
    # French
    (
        "markdown",
        "# Rectificatif : Guide d'installation v2\n",
        "corrects",
        "Guide d'installation v2",
        False,
    ),
    ("text", "Remplacé par : ADR-0014\n", "supersedes", "ADR-0014", True),
    ("text", "Annule et remplace : la note NS-4\n", "supersedes", "la note NS-4", False),
    ("markdown", "# Retiré : avis AV-3\n", "withdraws", "avis AV-3", False),
    # Spanish
    ("markdown", "# Fe de erratas del boletín BO-12\n", "corrects", "boletín BO-12", False),
    ("text", "Sustituye a: Norma N-3\n", "supersedes", "Norma N-3", False),
    ("markdown", "# Retirado: aviso AV-9\n", "withdraws", "aviso AV-9", False),
    # Chinese
    ("markdown", "# 勘误：2025年度报告\n", "corrects", "2025年度报告", False),
    ("markdown", "# 更正：停车场收费标准\n", "corrects", "停车场收费标准", False),
    ("markdown", "# 取代：夜班车时刻表\n", "supersedes", "夜班车时刻表", False),
    ("markdown", "# 替代：夜班车时刻表\n", "supersedes", "夜班车时刻表", False),
    ("markdown", "# 已撤回：车库开放日安排\n", "withdraws", "车库开放日安排", False),
    # Japanese
    ("markdown", "# 正誤表：2025年度報告書\n", "corrects", "2025年度報告書", False),
    ("markdown", "# 訂正：料金表\n", "corrects", "料金表", False),
    ("markdown", "# 廃止：旧就業規程\n", "withdraws", "旧就業規程", False),
    ("markdown", "# 撤回：駐車場のお知らせ\n", "withdraws", "駐車場のお知らせ", False),
    ("markdown", "# 改訂：就業規則\n", "updates", "就業規則", False),
    ("markdown", "# 差し替え：旧手順書\n", "supersedes", "旧手順書", False),
    # RFC headers (a header block pads the columns)
    ("text", "Updates: RFC 2026\n", "updates", "RFC 2026", False),
    ("text", "Updated by: RFC 5678\n", "updates", "RFC 5678", True),
    (
        "text",
        "Obsoleted by: RFC 5678                          March 2003\n",
        "supersedes",
        "RFC 5678",
        True,
    ),
    # reST field lists and AsciiDoc attributes
    ("text", "PEP 9\n=====\n\n:Status: Withdrawn\n", "withdraws", SELF, True),
    ("text", ":Status: Superseded by PEP 12\n", "supersedes", "PEP 12", True),
    ("text", "= Build guide\n:status: withdrawn\n", "withdraws", SELF, True),
    # Header and status columns: a bare number, a double dash, a hyphenated header,
    # a status value before what replaced it
    ("text", "Obsoletes: 12\n", "supersedes", "12", False),
    ("text", "Updated-By: 37\n", "updates", "37", True),
    ("text", "Errata -- Pump manual PM-3\n", "corrects", "Pump manual PM-3", False),
    ("text", "Status: Deprecated -- replaced by ADR-0021\n", "supersedes", "ADR-0021", True),
    ("text", "Status: ABGELÖST -- ersetzt durch SB-12\n", "supersedes", "SB-12", True),
    ("text", ">>> This notice was withdrawn on 3 May 2025.\n", "withdraws", SELF, True),
    # Title marks
    ("markdown", "# 【廃止】旧就業規程について\n", "withdraws", SELF, True),
    ("markdown", "# [RETRACTED] Cache sizing study\n", "withdraws", SELF, True),
    ("markdown", "# [WITHDRAWN] Depot open day\n", "withdraws", SELF, True),
]


@pytest.mark.parametrize(("reader", "text", "kind", "reference", "reverse"), STRUCTURAL)
def test_detect_relations_reads_structural_cues_of_other_languages_and_formats(
    reader: str, text: str, kind: str, reference: str, reverse: bool
) -> None:
    """issue 21: errata headings, status lines, RFC headers, field lists and title marks
    in German, French, Spanish, Chinese, Japanese, reST and AsciiDoc, not only English."""
    found = detect_relations("", text, reader, "2026-02-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [(kind, reference, reverse)]


@pytest.mark.parametrize(
    "text",
    [
        "# 更正后的数据如下\n",  # a CJK cue needs its separator: this is a sentence
        "Status: Draft\n",
        "Updates are applied nightly.\n",
        "Errata are reported on the mailing list.\n",  # a sentence, not a head
        "Cancelled labels are not billed.\n",
        "Prices are updated by the Fares team.\n",
        "Updated by the Fares team every quarter.\n",
        "# [Draft] Cache sizing study\n",
        ":status: approved\n",
    ],
)
def test_detect_relations_structural_cues_need_their_structure(text: str) -> None:
    """issue 21: a cue word outside its structure (no separator, another status, another
    mark) states no relation."""
    assert detect_relations("", text, "text", "2026-02-01") == []


PRICE_LIST = "# Preisliste 2026\n\nEin Einzelfahrschein kostet 4 Euro.\n"
PRICE_ERRATUM = "# Berichtigung zur Preisliste 2026\n\nEin Einzelfahrschein kostet 5 Euro.\n"


def test_relations_of_a_library_stored_under_older_rules_are_detected_again(
    tmp_path: Path,
) -> None:
    """issue 21: a library whose rows were detected under the rules before the other
    languages' cues (``RELATIONS_VERSION`` 6: no row for a German erratum) gets them at
    first use, without a rebuild."""
    files = {"preisliste.md": PRICE_LIST, "berichtigung.md": PRICE_ERRATUM}
    with _library(tmp_path, files) as lib, lib.db.write() as conn:
        conn.execute("DELETE FROM doc_relations")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'relations_version'")
    with _open(tmp_path / "home") as lib:
        lib.lookup.search("Einzelfahrschein Preis")
        rows = lib.db.conn.execute("SELECT kind FROM doc_relations").fetchall()
        assert rows == [("corrects",)]


def test_detect_relations_header_numbers_name_documents_not_facts() -> None:
    """issue 21: "Updates: 31" in a document's header names document 31 of its series;
    the document's own title is no second reference (as it is for "Update, <date>: …")."""
    text = "BEP: 37\nTitle: Paged index page sizes\nUpdates: 31\n\nBody.\n"
    found = detect_relations("BEP 37: Paged index page sizes", text, "text", "2026-02-01")
    assert [(d.kind, d.reference, d.reverse) for d in found] == [("updates", "31", False)]
