"""When a question is: the period it names. The ranking model reads it
(``search/features.py``)."""

from __future__ import annotations

import pytest

from kb_mcp.search.freshness import as_of_date
from kb_mcp.text.document_dates import parse_date


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


def test_parse_date_month_and_year_is_not_a_day() -> None:
    """ "March 2025" is the month, never 20 March (the "20" of the year read as a day)."""
    assert parse_date("effective March 2025", None) == "2025-03-01"
    assert parse_date("March 20, 2025", None) == "2025-03-20"
    assert parse_date("March 20", "2024-01-01") == "2024-03-20"
