"""When a question and a passage are: the period a question names, a changelog entry's
own date. The ranking model reads both (``search/features.py``)."""

from __future__ import annotations

import pytest

from kb_mcp.ingest.dates import parse_date
from kb_mcp.search.freshness import as_of_date, section_date


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("rate limits as of March 2024", "2024-03-31"),
        ("as of 2023-10-01, which version", "2023-10-01"),
        ("release cadence as of mid-2022", "2022-06-30"),
        ("as of 2023", "2023-12-31"),
        ("rate limits today", None),
    ],
)
def test_freshness_as_of_date_reads_the_question(query: str, expected: str | None) -> None:
    assert as_of_date(query) == expected


def test_freshness_section_date_reads_a_changelog_entry_not_an_event() -> None:
    """issue 9 (time_bound, "dated in a changelog heading"): a passage is as old as the
    changelog entry it sits in; a heading that names an event's date is no entry date."""
    assert section_date(("Changelog", "2024-06-01"), "2026-01-01") == "2024-06-01"
    assert section_date(("Changelog", "[2.4.0] - 2025-03-01"), None) == "2025-03-01"
    assert section_date(("Log", "3 February — interval 30 s"), "2026-05-01") == "2026-02-03"
    assert section_date(("Log", "v2.3 — March 2025"), None) == "2025-03-01"
    assert section_date(("Fares", "Zones merge on 1 June 2025"), None) is None
    assert section_date(("Fares 2024",), None) is None


def test_parse_date_month_and_year_is_not_a_day() -> None:
    """ "March 2025" is the month, never 20 March (the "20" of the year read as a day)."""
    assert parse_date("effective March 2025", None) == "2025-03-01"
    assert parse_date("March 20, 2025", None) == "2025-03-20"
    assert parse_date("March 20", "2024-01-01") == "2024-03-20"
