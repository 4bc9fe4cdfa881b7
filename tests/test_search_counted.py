"""The counted noun: a "how many X" question needs a number that counts X.

Pins issue 9's abstention class for counts stored beside another count (golden2 dev,
session 7): "how many handhelds do the ticket inspectors have" against a page that
counts phones, "how many columns does the stop-large layout have" against a layout
list whose only column count is the interchange's. Guards against: emptying a question
whose noun the answer says another way ("how many vehicles" answered by "25 buses"),
reading a count of one ("an extra day"), and a count whose names sit in the title.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from library_checks import keyword_library

from kb_mcp.library import Library
from kb_mcp.search.counted import clauses, counted_noun, counts, counts_noun
from kb_mcp.search.floor import is_number

DOCS = {
    "adr-0007.md": (
        "# ADR-0007: Aztec codes for mobile tickets\n\n## Context\n\nMobile tickets are shown "
        "as a 2D code that the Hengda V7 validators and the inspectors' handhelds read. We "
        "compared QR and Aztec on 400 phones with cracked screens, low brightness and screen "
        "protectors.\n"
    ),
    "board-renderer.md": (
        "# board-renderer\n\nboard-renderer draws the departure boards.\n\n## Layouts\n\n"
        "- `stop-small`: 4 rows, portrait, for shelters.\n"
        "- `stop-large`: 8 rows, landscape.\n"
        "- `interchange`: 16 rows in two columns, with platform letters.\n"
    ),
    "rollout.md": (
        "# Validator firmware rollout procedure (2026)\n\n1. Build and sign the image.\n"
        "2. Canary: 25 buses spread over both depots and all three tram cars of set T07, "
        "for 72 hours.\n"
    ),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    opened = keyword_library(tmp_path_factory.mktemp("counted"), DOCS)
    yield opened
    opened.close()


@pytest.mark.parametrize(
    ("answered", "absent"),
    [
        ("How many phones were in the Aztec sample?", "How many handhelds do the inspectors have?"),
        (
            "how many columns does the interchange layout have",
            "how many columns does the stop-large layout have",
        ),
    ],
)
def test_counted_noun_counted_elsewhere_answers_nothing_and_its_sibling_answers(
    library: Library, answered: str, absent: str
) -> None:
    assert library.search(answered, mode="keyword").hits
    result = library.search(absent, mode="keyword")
    assert result.hits == ()
    assert result.reason is not None and "count" in result.reason


def test_counted_noun_said_another_way_is_answered(library: Library) -> None:
    """ "vehicles" is written nowhere in the rollout page: its "25 buses" may answer."""
    question = "How many vehicles go in the canary stage of a validator firmware rollout?"
    hits = library.search(question, mode="keyword").hits
    assert hits and (hits[0].path or "").endswith("rollout.md")


@pytest.mark.parametrize(
    ("question", "noun"),
    [
        ("How many tram cars are in set T09?", "cars"),
        ("How many characters fit on a departure board ticker?", "characters"),
        ("How many people can travel on one group day ticket?", "people"),
        ("how many columns does the stop-large layout have", "columns"),
        ("How many days of paid holiday do we get each year?", "days"),
        ("How much is a single fare?", None),
        ("What is the daily cap?", None),
    ],
)
def test_counted_noun_is_the_phrase_plural_after_how_many(question: str, noun: str | None) -> None:
    assert counted_noun(question) == noun


def test_counts_reads_a_number_just_before_or_after_the_noun() -> None:
    assert counts(["12", "newest", "tram", "car"], ["car"], is_number)
    assert counts(["an", "extra", "dai", "to", "prepar"], ["dai"], is_number)
    assert counts(["buse", "212"], ["buse"], is_number)
    assert not counts(["400", "phone", "with", "crack", "screen"], ["screen"], is_number)


def test_counts_noun_needs_the_names_in_the_counting_clause_or_the_head() -> None:
    """The interchange's "two columns" is not the stop-large layout's; T07 in the title
    counts for every clause under it; a passage without the noun cannot tell (None)."""
    text = DOCS["board-renderer.md"].split("## Layouts\n\n")[1]
    cut = [
        c.lower().replace("`", "").replace(":", "").replace(",", "").split() for c in clauses(text)
    ]
    names = {"stop-large": ["stop-large"]}
    assert counts_noun(set(), cut, ["columns"], names, is_number) is False
    assert counts_noun(set(), cut, ["columns"], {"interchange": ["interchange"]}, is_number)
    assert counts_noun({"t07"}, [["three", "tram", "cars"]], ["cars"], {"T07": ["t07"]}, is_number)
    assert counts_noun(set(), [["25", "buses"]], ["vehicles"], {}, is_number) is None


def test_clauses_break_at_sentences_lines_and_cells_not_decimals() -> None:
    assert clauses("Fee 0.9 %. Sits on 1,100 validators; rotated monthly.\n| a | b |") == [
        "Fee 0.9 %",
        " Sits on 1,100 validators",
        " rotated monthly",
        " a ",
        " b ",
    ]
