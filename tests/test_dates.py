"""Dates as people write them, in every language the library reads (issue 21, "time").

A document is dated, and a question names its time, in many forms and languages; the
document end (``text/document_dates``) and the question end (``search/freshness.as_of_date``)
read them with one grammar (``text/dates``) over one set of word tables
(``text/lexicon``). Failure modes guarded: a German, Chinese or Japanese date read as
none (the ranking model then has no date to compare), a day-first date read month-first,
a version or a count read as a year.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kb_mcp.ingest import redate
from kb_mcp.library import Library
from kb_mcp.search.freshness import as_of_date
from kb_mcp.settings import Settings
from kb_mcp.store import meta
from kb_mcp.text import lexicon
from kb_mcp.text.dates import find_dates, fold
from kb_mcp.text.document_dates import DATES_VERSION, document_date, parse_date, stated_date


def _period(text: str) -> tuple[str, str, str] | None:
    found = [m for m in find_dates(text) if not m.bare]
    if not found:
        return None
    period = found[0].period
    return period.first.isoformat(), period.last.isoformat(), period.precision


@pytest.mark.parametrize(
    ("text", "period"),
    [
        # numeric: year first, or day first by the rule (month first only when it must be)
        ("2025-03-14", ("2025-03-14", "2025-03-14", "day")),
        ("2025/03/14", ("2025-03-14", "2025-03-14", "day")),
        ("2025/3/4", ("2025-03-04", "2025-03-04", "day")),
        ("2024.03.14", ("2024-03-14", "2024-03-14", "day")),
        ("14.03.2025", ("2025-03-14", "2025-03-14", "day")),
        ("14/03/2025", ("2025-03-14", "2025-03-14", "day")),
        ("03/04/2025", ("2025-04-03", "2025-04-03", "day")),
        ("03/14/2025", ("2025-03-14", "2025-03-14", "day")),
        ("2024-03", ("2024-03-01", "2024-03-31", "month")),
        ("2024-W12", ("2024-03-18", "2024-03-24", "week")),
        # English
        ("March 14th, 2025", ("2025-03-14", "2025-03-14", "day")),
        ("14 March 2025", ("2025-03-14", "2025-03-14", "day")),
        ("Mar 2025", ("2025-03-01", "2025-03-31", "month")),
        ("Sept. 2024", ("2024-09-01", "2024-09-30", "month")),
        # German, French, Spanish, Italian, Portuguese, Dutch (accents optional)
        ("14. März 2025", ("2025-03-14", "2025-03-14", "day")),
        ("Marz 2025", ("2025-03-01", "2025-03-31", "month")),
        ("3. Okt. 2024", ("2024-10-03", "2024-10-03", "day")),
        ("1er mars 2025", ("2025-03-01", "2025-03-01", "day")),
        ("14 février 2025", ("2025-02-14", "2025-02-14", "day")),
        ("août 2024", ("2024-08-01", "2024-08-31", "month")),
        ("14 de marzo de 2025", ("2025-03-14", "2025-03-14", "day")),
        ("diciembre de 2024", ("2024-12-01", "2024-12-31", "month")),
        ("14 marzo 2025", ("2025-03-14", "2025-03-14", "day")),
        ("3 giu 2025", ("2025-06-03", "2025-06-03", "day")),
        ("14 de março de 2025", ("2025-03-14", "2025-03-14", "day")),
        ("setembro de 2024", ("2024-09-01", "2024-09-30", "month")),
        ("14 maart 2025", ("2025-03-14", "2025-03-14", "day")),
        ("mrt 2025", ("2025-03-01", "2025-03-31", "month")),
        # Chinese, Japanese (with its eras), Korean; full-width digits
        ("2025年3月14日", ("2025-03-14", "2025-03-14", "day")),
        ("2025年3月14号", ("2025-03-14", "2025-03-14", "day")),
        ("2025年3月", ("2025-03-01", "2025-03-31", "month")),
        ("2025年", ("2025-01-01", "2025-12-31", "year")),
        ("２０２５年３月", ("2025-03-01", "2025-03-31", "month")),
        ("令和7年3月14日", ("2025-03-14", "2025-03-14", "day")),
        ("令和元年5月", ("2019-05-01", "2019-05-31", "month")),
        ("平成30年", ("2018-01-01", "2018-12-31", "year")),
        ("2025년 3월 14일", ("2025-03-14", "2025-03-14", "day")),
        # quarters, halves, parts and seasons of a year
        ("Q3 2024", ("2024-07-01", "2024-09-30", "quarter")),
        ("2024 Q3", ("2024-07-01", "2024-09-30", "quarter")),
        ("2024年第3四半期", ("2024-07-01", "2024-09-30", "quarter")),
        ("2024年第三季度", ("2024-07-01", "2024-09-30", "quarter")),
        ("2024년 3분기", ("2024-07-01", "2024-09-30", "quarter")),
        ("3. Quartal 2024", ("2024-07-01", "2024-09-30", "quarter")),
        ("H1 2025", ("2025-01-01", "2025-06-30", "half")),
        ("2025年上半期", ("2025-01-01", "2025-06-30", "half")),
        ("the second half of 2024", ("2024-07-01", "2024-12-31", "half")),
        ("mid-2022", ("2022-06-01", "2022-06-30", "part")),
        ("Ende 2024", ("2024-12-01", "2024-12-31", "part")),
        ("autumn 2025", ("2025-10-01", "2025-10-15", "season")),
        # no date: versions, counts, ranges, a day without a year
        ("v2024.1", None),
        ("release 2024.1.2", None),
        ("2048 connections", None),
        ("port 2025", None),
        ("the 2023-24 season", None),
        ("advisory SEC-2025-04", None),  # an id, not April
        ("CVE-2024-1234", None),
        ("3 February", None),
        ("Step 2 may fail", None),
    ],
)
def test_dates_read_every_form_as_a_period(text: str, period: tuple[str, str, str] | None) -> None:
    assert _period(text) == period


def test_dates_a_lone_number_is_a_bare_mention_for_the_words_around_it_to_judge() -> None:
    assert [m.bare for m in find_dates("in 2024 we moved; port 2025")] == [True, True]


def test_dates_no_month_word_names_two_months() -> None:
    """The month tables of all languages share one lookup: a word naming March in one
    language and May in another would read one of them wrong."""
    seen: dict[str, int] = {}
    for cells in lexicon.MONTHS.values():
        for number, cell in enumerate(cells, start=1):
            for word in cell.split():
                assert seen.setdefault(fold(word), number) == number, word


def test_parse_date_keeps_the_first_day_and_the_documents_year() -> None:
    assert parse_date("gilt ab 1. März", "2025-01-09", anchored=True) is None
    assert parse_date("1. März", "2025-01-09", anchored=True) == "2025-03-01"
    assert parse_date("im 3. Quartal 2024", None) == "2024-07-01"
    assert parse_date("3月14日に公開", "2025-01-01") == "2025-03-14"


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("Die Obergrenze gilt ab 1. März.", "2026-03-01"),
        ("Le plafond s'applique à compter du 1er avril.", "2026-04-01"),
        ("El límite rige a partir del 2 de mayo de 2025.", "2025-05-02"),
        ("新的上限自2025年4月1日起生效。", "2025-04-01"),
        ("新しい上限は2025年4月1日施行。", "2025-04-01"),
        ("effective 3 February", "2026-02-03"),
        ("Das Team traf sich am 3. März.", None),  # a date no cue states
    ],
)
def test_stated_date_reads_cues_in_every_language(text: str, stated: str | None) -> None:
    assert stated_date(text, "2026-01-15") == stated


@pytest.mark.parametrize(
    ("text", "dated"),
    [
        ("# Obergrenzen\n\nStand: 14.03.2025\n", "2025-03-14"),
        ("# 上限\n\n发布日期：2025年3月14日\n", "2025-03-14"),
        ("# 上限\n\n更新日: 2025年3月14日\n", "2025-03-14"),
        ("# Limits\n\nDate: 14/03/2025\n", "2025-03-14"),
        ("# Plafonds\n\nPublié le 3 mars 2025\n", "2025-03-03"),
        ("# 上限\n\n作成日：令和7年3月14日\n", "2025-03-14"),
        ("# 2025年3月14日 定例会議\n\n議事録\n", "2025-03-14"),
        ("# Q3 2024 roadmap\n\nplans\n", None),  # a quarter in a title is its subject
        ("# 2025年 事業計画\n\n計画\n", None),
    ],
)
def test_document_date_reads_labels_in_every_language(text: str, dated: str | None) -> None:
    assert document_date(text, "markdown") == dated


@pytest.mark.parametrize(
    ("query", "as_of"),
    [
        ("What was the upload limit in Q3 2024?", "2024-09-30"),
        ("upload limit 2024 Q3", None),  # a label: no word asks about it
        ("Wie hoch war das Limit Stand März 2024?", "2024-03-31"),
        ("Welche Grenze galt vor dem 1. April 2025?", "2025-03-31"),
        ("Welche Grenze galt bis 14.03.2025?", "2025-03-13"),
        ("Welche Grenze gilt seit März 2024?", "2024-03-31"),
        ("Quelle limite avant mars 2024 ?", "2024-02-29"),
        ("¿Cuál era el límite antes de marzo de 2024?", "2024-02-29"),
        ("Qual era o limite em março de 2024?", "2024-03-31"),
        ("Qual era il limite prima di marzo 2024?", "2024-02-29"),
        ("Wat was de limiet in maart 2024?", "2024-03-31"),
        ("截至2024年3月的上限是多少？", "2024-03-31"),
        ("2024年3月之前的上限是多少？", "2024-02-29"),
        ("2024年当時の上限は？", "2024-12-31"),
        ("令和6年時点の上限は？", "2024-12-31"),
        ("2024年第三季度的上限", "2024-09-30"),
        ("2024년 3월 기준 한도는?", "2024-03-31"),
        ("2024-W12 の当番は？", "2024-03-24"),
        ("which limit applied in 2024-W12", "2024-03-24"),
        # an article after "in" makes the date a label of an event; after "before", a cut
        ("what shipped in the May 2025 rollout", None),
        ("what was the limit before the May 2025 rollout", "2025-04-30"),
        ("the limit in the second half of 2024", "2024-12-31"),
        # the time after a date: no period to cut at
        ("What changed after March 2024?", None),
        ("2024年4月以降の上限は？", None),
        # counts, versions and ports are no years
        ("How do I allow 2048 connections?", None),
        ("what changed in v2024.1", None),
        ("the server listens on port 2025", None),
        ("limit in 2024.1.2 release", None),
        ("wie viele Verbindungen erlaubt der Server", None),
        ("服务器允许多少连接", None),
    ],
)
def test_as_of_date_reads_questions_in_every_language(query: str, as_of: str | None) -> None:
    assert as_of_date(query) == as_of


# --- documents dated through the ingest, and dated again under newer rules ----------------

NOTES = {
    "obergrenzen.md": "# Upload-Obergrenzen\n\nStand: 14.03.2025\n\nDie Grenze: 50 MB.\n",
    "shangxian.md": "# 上传上限\n\n发布日期：2025年3月14日\n\n上传上限为 50 MB。\n",
    "jougen.md": "# アップロード上限\n\n更新日: 令和7年2月1日\n\n上限は 50 MB です。\n",
    "limits.md": "# Upload limits\n\nDate: 14/03/2025\n\nThe cap is 50 MB.\n",
    "front.md": "---\ndate: 2024-11-02\n---\n# Quotas\n\nStand: 14.03.2025\n",
    "undated.md": "# Quotas\n\nThe cap is 50 MB.\n",
}
DATED = {
    "obergrenzen.md": "2025-03-14",
    "shangxian.md": "2025-03-14",
    "jougen.md": "2025-02-01",
    "limits.md": "2025-03-14",
    "front.md": "2024-11-02",  # frontmatter first
    "undated.md": "2021-06-01",  # the file's mtime
}
MTIME = datetime(2021, 6, 1, 12, tzinfo=UTC).timestamp()


def _notes(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, text in NOTES.items():
        (folder / name).write_text(text, encoding="utf-8")
        os.utime(folder / name, (MTIME, MTIME))


def _dates(lib: Library) -> dict[str, str | None]:
    return {name: lib.lookup.read(name).date for name in NOTES}


def test_ingest_dates_notes_written_in_german_chinese_and_japanese(tmp_path: Path) -> None:
    _notes(tmp_path / "notes")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as lib:
        lib.folders.add_folder(tmp_path / "notes", "notes")
        lib.folders.sync("notes")
        assert _dates(lib) == DATED


def test_a_library_dated_under_older_rules_is_dated_again_by_its_first_reader(
    tmp_path: Path,
) -> None:
    """A library ingested before these rules holds the mtime where the text states a
    date the old rules could not read, and no ``dates_version``: the first search dates
    its documents again from their stored text, without a sync; a date from frontmatter
    or the mtime stays, and an agent's document (dated by its frontmatter only) too."""
    _notes(tmp_path / "notes")
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as lib:
        lib.folders.add_folder(tmp_path / "notes", "notes")
        lib.folders.sync("notes")
        agent_doc = lib.writing.add_document(
            "Agent note", "Stand: 14.03.2025\n\nhi", "mem://agent-note", by_agent=False
        )
        with lib.db.write() as conn:  # what the English-only rules stored
            conn.execute(
                "UPDATE documents SET doc_date = '2021-06-01' WHERE title != 'Quotas' "
                "AND title != 'Agent note'"
            )
            conn.execute("UPDATE documents SET doc_date = NULL WHERE title = 'Agent note'")
            meta.delete(conn, redate.VERSION_KEY)
    with Library(Settings(home=home, embedder="none")) as lib:
        stored = "SELECT doc_date FROM documents WHERE title = 'Upload-Obergrenzen'"
        assert lib.db.query(stored) == [("2021-06-01",)]  # opening it waits for nothing
        lib.lookup.search("Obergrenze")
        assert lib.db.query(stored) == [("2025-03-14",)]
        assert _dates(lib) == DATED
        assert lib.lookup.read(agent_doc.doc).date is None
        assert meta.get(lib.db.conn, redate.VERSION_KEY) == str(DATES_VERSION)
