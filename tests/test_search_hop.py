"""The hop leg: a question about a system's team reaches the team's page through the
names its closest passages give beside the system (issue 9, multi-hop: "facts that only
join across two documents"). Guards against: running for claims and code searches,
taking a sentence's opening words or the question's own names for the hop, and
answering differently when only the keyword leg is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from library_checks import keyword_library

from kb_mcp.library import Library
from kb_mcp.search.hop import asks_for_someone, concerning_lines, hop_names, line_names

NOTES = {
    "register.md": (
        "# Systems register\n\nWho runs what.\n\n| System | What it is | Owned by |\n"
        "|---|---|---|\n| tap-gateway | receives taps from the validators | Team Semaphore |\n"
        "| arrivals-api | predicted arrivals | Team Lantern |\n"
    ),
    "semaphore.md": (
        "# Team Semaphore\n\nTicketing.\n\n## Talking to us\n\n"
        "Post in `#semaphore-incidents` on Slack and page the primary rota.\n"
    ),
    "lantern.md": (
        "# Team Lantern\n\nPassenger information.\n\n## Contact\n\n"
        "Our Slack channel is `#lantern`: raise anything there, in production or not.\n"
    ),
    "tap-gateway.md": (
        "# tap-gateway configuration\n\nThe tap-gateway listens on port 8443 in production.\n"
    ),
    "catalog.yaml": (
        "apiVersion: backstage.io/v1alpha1\nkind: Component\nmetadata:\n  name: avl-ingest\n"
        "spec:\n  owner: team-axle\n"
    ),
}
NOTES["adr-0003.md"] = (
    "# ADR-0003: NATS as the message broker\n\n- Status: Accepted\n- Author: Tobias Lindqvist\n\n"
    "## Context\n\n" + "We compared Kafka, RabbitMQ and NATS on our own workloads. " * 12 + "\n\n"
    "## Decision\n\nWe choose NATS JetStream as the message broker for every event.\n"
)
NOTES["bastion.md"] = (
    "# Team Bastion\n\nSecurity and identity.\n\n## People\n\n"
    "- Engineering manager: Mei Takahashi\n- Engineers: Tobias Lindqvist, Sipho Dlamini\n"
)
QUESTION = "Which Slack channel do I raise a tap-gateway problem in, in production?"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    library = keyword_library(tmp_path_factory.mktemp("hop"), NOTES)
    yield library
    library.close()


def _ranked(library: Library, question: str, **kwargs: object) -> list[str]:
    result = library.search(question, top_k=5, **kwargs)  # type: ignore[arg-type]
    return [Path(h.path or "").name for h in result.hits]


def test_hop_reaches_the_owning_team_page(library: Library) -> None:
    """Keyword alone ranks the page sharing the question's words (Team Lantern's
    channel) above the owner's; the hop searches again with "Team Semaphore", the name
    the register gives beside tap-gateway, and the owner's page comes first."""
    alone = _ranked(library, QUESTION, legs=("keyword",))
    assert alone.index("lantern.md") < alone.index("semaphore.md")
    default = library.search(QUESTION, top_k=5, mode="keyword")
    names = [Path(h.path or "").name for h in default.hits]
    assert names.index("semaphore.md") < names.index("lantern.md")
    assert "hop" in default.hits[names.index("semaphore.md")].legs


def test_hop_reads_the_header_of_the_first_document(library: Library) -> None:
    """The decision matches the question, the author stands in the ADR's header (another
    passage): the hop reads that header and finds the author's team page."""
    question = "The person who wrote the decision choosing our message broker: which team?"
    alone = _ranked(library, question, legs=("keyword",))
    assert "bastion.md" not in alone[:2]
    assert _ranked(library, question, mode="keyword")[:2] == ["adr-0003.md", "bastion.md"]


def test_hop_runs_only_for_questions_about_someone(library: Library) -> None:
    """A question for a port is answered by the system's page: no hop leg runs."""
    result = library.search("Which port does tap-gateway listen on?", mode="keyword")
    assert result.hits and all("hop" not in h.legs for h in result.hits)
    named = library.search("Which port does tap-gateway listen on?", legs=("keyword", "hop"))
    assert named.hits and all("hop" not in h.legs for h in named.hits)


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Which Slack channel should I raise it in?", True),
        ("Who manages the team that owns the firmware build?", True),
        ("where do I ask about sso-broker configuration", True),
        ("Which port does tap-gateway listen on?", False),
        ("Including pharmacists in rounding teams reduces adverse events.", False),  # a claim
        ("python only list files with specific extension", False),  # a code search
    ],
)
def test_hop_asks_for_someone_reads_questions_only(text: str, asks: bool) -> None:
    assert asks_for_someone(text) is asks


def test_hop_names_skip_sentence_openings_and_the_questions_own_names() -> None:
    assert line_names("| tap-gateway | receives taps | Team Semaphore |") == ["Team Semaphore"]
    assert line_names("- Standup Monday to Thursday at 10:00.") == []
    assert line_names("- Incident commander: Dara Quinn") == ["Dara Quinn"]
    assert line_names("  owner: team-axle") == ["team-axle"]
    assert line_names("- **Owner:** Team Kestrel") == ["Team Kestrel"]

    def tokens(text: str) -> list[str]:
        return text.lower().split()

    lines = [("Team Lantern runs it with Team Semaphore", 5.0), ("Fenwick Road office", 1.0)]
    assert hop_names(lines, {"team", "lantern"}, tokens) == ["Team Semaphore"]


def test_hop_concerning_lines_count_the_section_heading() -> None:
    """A catalogue states the owner under the thing's heading ("## billing-worker" …
    "Owner: Team Kestrel"): the line concerns the question through its heading."""

    def tokens(text: str) -> list[str]:
        return text.lower().replace("-", " ").split()

    weights = {"billing": 2.0, "worker": 2.0}
    lines = concerning_lines([("billing-worker", "- Owner: Team Kestrel")], weights, tokens)
    assert lines == [("- Owner: Team Kestrel", 4.0)]
    assert concerning_lines([("ledger-api", "- Owner: Team Kestrel")], weights, tokens) == []
