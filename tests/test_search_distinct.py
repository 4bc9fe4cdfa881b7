"""The distinguishing-words floor: a question's names must be held by one leading passage.

Pins issue 9's abstention class ("absent answers whose words all appear in the
library"): the question names something the library mentions, and asks about a neighbour
of what it says ("Brightpay transaction fee" where only Paystream's fee is stored, "what's
new in 2.3.2" where only 2.3.1 has notes). Guards against: abstaining when one passage
holds the names, on a question answered across a hop, on claims and code searches, on
numbers and dates, and reading a version as the numbers it is made of.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from library_checks import keyword_library

from kb_mcp.library import Library
from kb_mcp.search.distinct import (
    distinguishing_words,
    feature_words,
    holds_version,
    is_lookup,
    possessions,
    written_as_lowercase_name,
)

DOCS = {
    "go-2-3-1.md": (
        "# Northline Go v2.3.1\n\nReleased 22 July 2025. A small release.\n\n"
        "- Fixed: the group ticket price did not update after removing a person.\n"
    ),
    "go-ios.md": (
        "# Which iPhones run Northline Go\n\nNorthline Go 3.0 runs on iOS 15 and later. "
        "The earliest iPhone that can install the app is the iPhone 6s.\n"
    ),
    "adr-0010.md": (
        "# ADR-0010: card acquirer\n\nWe choose Paystream. Paystream charges a transaction "
        "fee of 0.9 % per payment, settled daily.\n"
    ),
    "minutes.md": (
        "# Minutes, 19 March\n\nWe will look at Brightpay again next quarter; nobody has "
        "asked them for a quote yet.\n"
    ),
    "register.md": (
        "# Passenger systems register\n\n| System | Owned by |\n|---|---|\n"
        "| tap-gateway | Team Semaphore |\n| board-renderer | Team Lantern |\n"
    ),
    "semaphore.md": (
        "# Team Semaphore\n\nWe run ticketing. Questions go to Slack `#semaphore-help`; "
        "incidents to `#semaphore-incidents`.\n"
    ),
    "rostering.md": (
        "# Rostering export\n\nThe nightly rostering export is a CSV file with one row per duty.\n"
    ),
    "keyhold-access.md": (
        "# keyhold access requests\n\nAccess to keyhold is self-service now: open a merge "
        "request against `identity/keyhold-policies`; a Bastion engineer approves it.\n"
    ),
    "adr-0012.md": (
        "# ADR-0012: Move app sessions to Redis\n\nApp sessions move to a managed Redis "
        "cluster with key expiry doing the purge. Accounts remain in PostgreSQL.\n"
    ),
    "go-2-3-0.md": (
        "# Northline Go 2.3.0 release notes\n\n- Dark mode follows the system setting.\n"
        "- Buy a group day ticket for up to five people.\n"
    ),
    "adr-0005.md": (
        "# ADR-0005: Sign ticket payloads\n\nThe validators are offline for up to an hour "
        "at a time, so they check tickets without calling home.\n"
    ),
    "board-runbook.md": (
        "# Runbook: restarting board-renderer\n\nOpen the fleet console and press "
        "**Reload renderer**; the board comes back within a minute.\n"
    ),
    "semaphore-runbooks.md": (
        "# Team Semaphore runbooks\n\nOur runbook for restarting fare-engine is in the "
        "repository's docs folder.\n"
    ),
    "support.md": (
        "# Northline Go support handbook\n\nA passenger's journey history moves with the "
        "account when two accounts are merged.\n"
    ),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    opened = keyword_library(tmp_path_factory.mktemp("distinct"), DOCS)
    yield opened
    opened.close()


def _docs(library: Library, question: str) -> list[str]:
    return [Path(hit.path or "").name for hit in library.search(question, mode="keyword").hits]


@pytest.mark.parametrize(
    ("answered", "absent"),
    [
        ("Paystream transaction fee", "Brightpay transaction fee"),
        ("What was fixed in Northline Go 2.3.1?", "What's new in Northline Go 2.3.2?"),
        ("When was Northline Go 2.3.1 released?", "When was Northline Go 3.0 released?"),
    ],
)
def test_distinct_absent_neighbour_answers_nothing_and_its_sibling_answers(
    library: Library, answered: str, absent: str
) -> None:
    """The sibling whose names one passage holds is answered; the absent one is empty
    and says which names no passage holds together (issue 9, abstention)."""
    assert _docs(library, answered)
    result = library.search(absent, mode="keyword")
    assert result.hits == ()
    assert result.reason is not None and "together" in result.reason


@pytest.mark.parametrize(
    ("answered", "absent"),
    [
        ("Which ADR moved app sessions to Redis?", "Which ADR moved keyhold to Redis?"),
        (
            "How do I switch on dark mode in Northline Go?",
            "How do I switch on offline mode in Northline Go?",
        ),
        (
            "Find the runbook for restarting board-renderer",
            "Find the runbook for restarting tap-gateway",
        ),
    ],
)
def test_distinct_lowercase_system_and_missing_feature_answer_nothing(
    library: Library, answered: str, absent: str
) -> None:
    """Session 7 (golden2 dev): keyhold is a name though written in lowercase, and no
    passage holds it with Redis; offline and mode are stored, never with Northline Go;
    the runbooks restart board-renderer and fare-engine, and the register's tap-gateway
    row links to Team Semaphore's runbook page: a document asked for by name is not
    held a hop away."""
    assert _docs(library, answered)
    result = library.search(absent, mode="keyword")
    assert result.hits == ()
    assert result.reason is not None and "together" in result.reason


def test_distinct_lowercase_name_is_written_as_code_or_opens_a_title() -> None:
    """A title's lowercase first word and a code span are names; a lowercase word that
    opens a code line or a comment is not (CoSQA: "def", "# check the file")."""
    assert written_as_lowercase_name("keyhold", ["keyhold access requests\nAccess to keyhold."])
    assert written_as_lowercase_name("lantern", ["#lantern export, 14 October\nhi"])
    assert written_as_lowercase_name("interchange", ["Layouts\n- `interchange`: 16 rows"])
    assert not written_as_lowercase_name("check", ["c1.py\n# check the file\ndef check(): ..."])
    assert not written_as_lowercase_name("access", ["keyhold access requests\n"])


@pytest.mark.parametrize(
    ("question", "names", "words"),
    [
        (
            "How do I switch on offline mode in Northline Go?",
            ["Northline", "Go"],
            ["offline", "mode"],
        ),
        ("How do I set a home stop in Northline Go?", ["Northline", "Go"], ["home", "stop"]),
        ("How do I make the ticket code bigger for inspectors' older handhelds?", [], []),
        ("How do I get read access to a path in keyhold?", ["keyhold"], []),
        ("How do I restart the board?", [], []),
        ("Find the runbook for restarting tap-gateway", ["tap-gateway"], ["runbook"]),
        ("Open the tap-gateway staging config", ["tap-gateway"], ["staging", "config"]),
        ("Find the runbook for restarting a frozen departure board", [], []),
    ],
)
def test_distinct_feature_words_need_a_name_after_the_feature(
    question: str, names: list[str], words: list[str]
) -> None:
    assert feature_words(question, names) == words


def test_distinct_what_a_name_owns_is_held_with_it(tmp_path: Path) -> None:
    """Session 7 (golden2 dev): Semaphore's page has a retro, Lantern's a demo. Lantern's
    page holds the question's name, a guide the retro's words; "Lantern's retro" is held
    by no passage."""
    notes = {
        "lantern.md": (
            "# Team Lantern\n\n## Rituals\n\n- Standup Monday to Thursday at 10:00. No standup "
            "on Fridays: we demo at 14:00 instead.\n- Slack: `#lantern`.\n"
        ),
        "semaphore.md": (
            "# Team Semaphore\n\n## How we work\n\n- Standup at 09:15. Retro on alternate "
            "Fridays.\n- Slack: `#semaphore`.\n"
        ),
        "retro-guide.md": (
            "# Running a retro\n\nA good retro starts on time and ends with actions.\n"
        ),
    }
    with keyword_library(tmp_path, notes) as library:
        assert library.search("What time does Lantern's demo start?", mode="keyword").hits
        result = library.search("What time does Lantern's retro start?", mode="keyword")
        assert result.hits == ()
        assert result.reason is not None and "'Lantern' with its 'retro'" in result.reason


def test_distinct_possessions_are_a_name_and_the_word_after_it() -> None:
    names = ["Lantern", "fare-engine"]
    assert possessions("What time does Lantern's retro start?", names) == [("Lantern", "retro")]
    assert possessions("What is fare-engine's admin port?", names) == [("fare-engine", "admin")]
    assert possessions("What is the people team's phone extension?", names) == []


def test_distinct_undated_version_is_not_a_release_date(library: Library) -> None:
    """A page naming 3.0 without a date says 3.0 exists, not when it shipped."""
    result = library.search("When was Northline Go 3.0 released?", mode="keyword")
    assert result.reason is not None and "'3.0'" in result.reason and "date" in result.reason


def test_distinct_hop_question_may_have_its_names_in_two_passages(library: Library) -> None:
    """ "The team that runs tap-gateway" is in the register, its Slack channel on the
    team's page: a question answered a hop away is not emptied for that."""
    docs = _docs(library, "Which Slack channel does the team that runs tap-gateway use?")
    assert {"register.md", "semaphore.md"} <= set(docs)


def test_distinct_two_passages_linked_by_a_name_answer_together(library: Library) -> None:
    """A question answered across a hop though not phrased as one: the register writes
    "Team Semaphore" beside tap-gateway, and the team's page holds Slack."""
    docs = _docs(library, "Where does tap-gateway post to Slack?")
    assert {"register.md", "semaphore.md"} <= set(docs)


def test_distinct_names_spread_over_two_passages_answer_nothing(library: Library) -> None:
    """Northline Go's journey history and a CSV file are stored, never together, and no
    name links their passages ("The", "A": a sentence's first word links nothing)."""
    question = "How do I export my journey history from Northline Go as a CSV file?"
    assert library.search(question, mode="keyword").hits == ()


def test_distinct_claims_and_code_searches_are_not_read() -> None:
    """SciFact claims and CoSQA code searches name things they do not ask about."""
    assert is_lookup("Which Slack channel does Semaphore use?")
    assert is_lookup("Brightpay transaction fee")
    assert is_lookup("Find the runbook for restarting a frozen departure board")
    assert is_lookup("恒达 V7 固件 4.3.0 有哪些主要变更？")
    assert not is_lookup("DUSP4 decreases apoptosis.")
    assert not is_lookup("Active Ly49Q induces neutrophil polarization in the lung tissue.")


@pytest.mark.parametrize(
    ("question", "texts", "expected"),
    [
        (
            "Which gRPC port does arrivals-api listen on?",
            ["arrivals-api"],
            ("gRPC", "arrivals-api"),
        ),
        (
            "As of October 2025, could I drop by the Quarry Lane desk on a Saturday?",
            [],
            ("Quarry", "Lane"),
        ),
        ("python dataset get first 50 rows", [], ()),
        ("how to read file from aws s3 using python3", [], ()),
        ("What changed in 恒达 V7 firmware 4.3.0?", [], ("4.3.0",)),
        ("Is vitamin D3 preferable to D2 in V8 juice?", [], ()),
        ("Caloric Restriction vs. Plant-Based Diets", ["plant-based diets"], ()),
        ("When does the end-of-year code freeze start?", ["the end of year freeze"], ()),
        ("How Long to Detox From Fish Before Pregnancy?", [], ()),
        ("Bastion product owner", ["It is run by Team Bastion."], ("Bastion",)),
        ("Find the runbook for restarting tap-gateway", ["Find the runbook."], ()),
    ],
)
def test_distinct_words_are_names_versions_and_identifiers(
    question: str, texts: list[str], expected: tuple[str, ...]
) -> None:
    """Names, versions and the identifiers the library writes so; not dates, numbers,
    words with a digit, Title Case capitals and compounds, or a first word the library
    writes only at a sentence start."""
    assert distinguishing_words(question, texts) == expected


@pytest.mark.parametrize(
    ("version", "text", "held"),
    [
        ("2.3", "Northline Go v2.3.1", True),
        ("2.3.1", "Northline Go v2.3.1", True),
        ("2.3.2", "Northline Go v2.3.1", False),
        ("3.0", "Correction to the v2.3.0 notes.", False),
        ("23.5", "塔身高23.5米", True),
    ],
)
def test_distinct_version_is_held_only_as_written(version: str, text: str, held: bool) -> None:
    """The index splits "2.3.2" into numbers every release note holds; the floor reads
    the version as written, a later part allowed ("2.3" in "v2.3.1")."""
    assert holds_version(version, text) is held
