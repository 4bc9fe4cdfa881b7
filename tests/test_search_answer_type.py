"""The answer-type floor: a question asking for a number needs a passage holding one.

Pins issue 8's "abstention beyond lexical" item (and issue 9's abstention class): the
absent-answer questions share their words and topic with stored passages ("Which Redis
version does the session cache run?" against a page saying which Redis holds the
sessions, and no version). Guards against: abstaining when the value is stored, holding
Chinese questions or claims to an English question phrase, and counting the question's
own frame word ("how *many*") as a word the answer must contain.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from library_checks import keyword_library

from kb_mcp.embed.base import EmbeddingSignature
from kb_mcp.library import Library
from kb_mcp.search.engine import SearchRequest, run_search
from kb_mcp.search.floor import (
    ANSWER_WINDOW,
    PassageTerms,
    answer_type_reason,
    asks_for_number,
    asks_for_person,
    content_units,
    holds_number_near,
    names_someone,
    slot_words,
)
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.vector import VectorState

SESSIONS_WITHOUT_VERSION = (
    "# Session cache\n\nThe session cache runs on Redis. It holds the app sessions of the "
    "web and mobile clients; idle entries expire and are dropped.\n"
)
SESSIONS_WITH_VERSION = (
    "# Session cache\n\nThe session cache runs on Redis 7.2. It holds the app sessions of "
    "the web and mobile clients; idle entries expire and are dropped.\n"
)
OTHERS = {
    "api-release.md": "# API release notes\n\nVersion 3 of the public API adds paging.\n",
    "deploys.md": "# Deploys\n\nWe deploy the web app on weekdays after the review.\n",
    "queue.md": "# Job queue\n\nBackground jobs run on a worker pool fed by the queue.\n",
    "缓存.md": "# 会话缓存\n\n会话缓存运行在 Redis 上，保存网页和手机客户端的会话。\n",
}
REDIS_VERSION = "Which Redis version does the session cache run?"


def _library(base: Path, sessions: str) -> Library:
    return keyword_library(base, {"sessions.md": sessions, **OTHERS})


@pytest.fixture(scope="module")
def without_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    library = _library(tmp_path_factory.mktemp("without"), SESSIONS_WITHOUT_VERSION)
    yield library
    library.close()


@pytest.fixture(scope="module")
def with_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    library = _library(tmp_path_factory.mktemp("with"), SESSIONS_WITH_VERSION)
    yield library
    library.close()


def test_answer_type_missing_value_answers_nothing_with_the_reason(
    without_version: Library,
) -> None:
    """The page is about the session cache and Redis, but holds no version: empty."""
    result = without_version.search(REDIS_VERSION)
    assert result.hits == ()
    assert result.reason is not None
    assert result.reason.startswith(
        "nothing answers it: the question asks for a version, and none of "
        "the 3 closest passages holds a version near its words"
    )


def test_answer_type_stored_value_is_answered(with_version: Library) -> None:
    """The same library with "Redis 7.2" in the page answers, the page first."""
    result = with_version.search(REDIS_VERSION)
    assert result.hits, result.reason
    assert result.hits[0].path is not None and result.hits[0].path.endswith("sessions.md")


def test_answer_type_leaves_questions_not_asking_for_a_number(without_version: Library) -> None:
    result = without_version.search("What does the session cache hold?")
    assert result.hits and result.hits[0].path is not None
    assert result.hits[0].path.endswith("sessions.md")


def test_answer_type_leaves_chinese_questions_alone(without_version: Library) -> None:
    """A CJK question is never held to the English question phrases (CMRC2018 dev: no
    false empty): "which Redis version" asked in Chinese still gets the Chinese page."""
    result = without_version.search("会话缓存用的是哪个 Redis 版本？")
    assert result.hits, result.reason
    assert any(h.path is not None and h.path.endswith("缓存.md") for h in result.hits)


class WordOverlapLeg:
    """A real ``VectorLeg``: stored chunks ranked by the share of the question's words
    they hold, standing in for a model that finds the session page close in meaning."""

    signature = EmbeddingSignature("test", "word-overlap", 0, 2000)
    embed_seconds = 0.0

    def __init__(self, library: Library) -> None:
        self.library = library

    def state(self) -> VectorState:
        return VectorState.ready()

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        words = set(query.lower().split())
        rows = self.library.db.conn.execute("SELECT id, text FROM chunks").fetchall()
        scored = sorted(
            ((len(words & set(text.lower().split())) / len(words), cid) for cid, text in rows),
            key=lambda pair: (-pair[0], pair[1]),
        )
        return [LegHit(cid, rank, score) for rank, (score, cid) in enumerate(scored[:limit], 1)]

    def unembedded(self, chunk_ids: Sequence[int]) -> set[int]:
        return set()  # this leg scores every chunk: none waits for a vector


def test_answer_type_applies_in_hybrid_not_in_vector_mode(without_version: Library) -> None:
    """Hybrid runs the keyword leg, so the floor reads its passages; ``vector`` mode has
    no lexical floor (its question need not share a word with its answer), nor this one."""
    leg = WordOverlapLeg(without_version)
    db, fts = without_version.db, without_version.fts
    hybrid = run_search(db, fts, SearchRequest(REDIS_VERSION, mode="hybrid"), vectors=leg)
    assert hybrid.mode == "hybrid" and hybrid.hits == ()
    assert hybrid.reason is not None and hybrid.reason.startswith("nothing answers it")
    vector = run_search(db, fts, SearchRequest(REDIS_VERSION, mode="vector"), vectors=leg)
    assert vector.hits and vector.hits[0].path is not None
    assert vector.hits[0].path.endswith("sessions.md")


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How many validators does each tram car have?", "a count or an amount"),
        ("how much is a single fare", "a count or an amount"),
        ("How long are Slack messages kept?", "a duration or an age"),
        ("Which gRPC port does arrivals-api listen on?", "a port or number"),
        ("What PostgreSQL major version is the ledger on?", "a version"),
        ("What's the phone number of the duty office?", "a phone number"),
        ("What is the mobile number of Helena?", "a port or number"),
        ("How often do the boards poll?", None),  # answered in words as often as digits
        ("When does the summer timetable start?", None),
        ("python get version of package", None),  # no question phrase: a code search
        ("The number of cells increases with age.", None),  # a claim, not a question
        ("会话缓存用的是哪个版本？", None),
    ],
)
def test_answer_type_asks_for_number_reads_the_question_phrase(
    question: str, kind: str | None
) -> None:
    assert asks_for_number(question) == kind


def test_answer_type_content_units_drop_the_frame_word_and_fragments() -> None:
    units = {"many": ["mani"], "validators": ["valid"], "s": ["s"], "tram": ["tram"]}
    assert content_units("How many validators does a tram's car have?", units) == [
        ["valid"],
        ["tram"],
    ]
    assert ["mani"] in content_units("Which many-core box?", {"many": ["mani"]})


def test_answer_type_number_must_sit_near_a_matched_word() -> None:
    body = ["redi"] + ["x"] * ANSWER_WINDOW + ["session", "7"]
    assert not holds_number_near(body, {"redi"}, ANSWER_WINDOW)
    assert holds_number_near(body, {"session"}, ANSWER_WINDOW)
    assert holds_number_near(["two", "week", "leav"], {"leav"}, ANSWER_WINDOW)
    assert not holds_number_near(["on", "week", "leav"], {"leav"}, ANSWER_WINDOW)


def test_answer_type_reason_needs_coverage_and_a_number() -> None:
    units = {"Redis": ["redi"], "version": ["version"], "session": ["session"]}
    df = {"redi": 2, "version": 5, "session": 2}
    about = PassageTerms(frozenset({"session"}), ("redi", "hold", "session"))
    answers = PassageTerms(frozenset(), ("redi", "7", "hold", "session"), "Redis 7 holds sessions")
    elsewhere = PassageTerms(frozenset(), ("api", "version", "3"))  # a number, off topic
    question = "Which Redis version holds the sessions?"
    assert answer_type_reason(question, units, [about, elsewhere], df, 100) is not None
    assert answer_type_reason(question, units, [about, answers], df, 100) is None
    assert answer_type_reason("What holds the sessions?", units, [about], df, 100) is None
    assert answer_type_reason(question, units, [], df, 100) is None


def test_answer_type_version_must_be_written_as_one() -> None:
    """issue 9 (abstention): a version question is not answered by a passage about the
    thing whose only numbers are amounts or ids ("expiry stays at 30 days", ADR-0012);
    "7.2", "v3", "version 14", "PostgreSQL 14" answer it, a year does not."""
    units = {"Redis": ["redi"], "version": ["version"], "session": ["session"]}
    df = {"redi": 2, "version": 5, "session": 2}
    body = ("adr", "0012", "session", "redi", "expiri", "30", "dai")
    question = "Which Redis version holds the app sessions?"
    amounts = "ADR-0012: sessions move to Redis; the expiry stays at 30 days since March 2025."
    amount = PassageTerms(frozenset(), body, amounts)
    assert answer_type_reason(question, units, [amount], df, 100) is not None
    for written in ("Redis 7.2", "Redis v7", "Redis version 7", "Redis 7 holds them"):
        shaped = PassageTerms(frozenset(), body, f"{amounts} {written}.")
        assert answer_type_reason(question, units, [shaped], df, 100) is None, written
    port = "Which port holds the app sessions?"  # a port is any number: not held to shape
    assert answer_type_reason(port, {**units, "port": ["port"]}, [amount], df, 100) is None


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("What's the monthly fare cap?", ("monthly",)),
        ("Which gRPC port does arrivals-api listen on?", ("gRPC", "arrivals-api")),
        (
            "What is the per-key rate limit of journey-planner-api?",
            ("per-key", "journey-planner-api"),
        ),
        ("How long are Slack messages kept?", ("Slack",)),
        ("Which Redis version holds the app sessions?", ("Redis",)),
        # plain words are paraphrased ("calls" / "requests"), adjectives describe the value
        ("How many calls per minute could a single API key make?", ()),
        ("What's the oldest Android version the app supports?", ("Android",)),
        ("What's the maximum number of connections the pool opens?", ()),
        # the noun asked about ends at its verb: Harbor makes the attempts
        ("how many attempts does Harbor make", ()),
        ("How much money do I get for my home office?", ()),
        # Title Case names nothing by its capitals (NFCorpus titles)
        ("How Long to Detox From Fish Before Pregnancy?", ()),
    ],
)
def test_answer_type_slot_words_are_names_periods_and_identifiers(
    question: str, words: tuple[str, ...]
) -> None:
    """issue 9 (abstention): the words that tell the asked-for value from a neighbour's."""
    assert slot_words(question) == words


SIBLINGS = {
    "avl-ingest.md": "# avl-ingest changelog\n\n- gRPC endpoint for the map: port 7070.\n",
    "arrivals-api.md": (
        "# arrivals-api\n\n## Running it\n\nThe arrivals-api server listens on port 8088 "
        "for HTTP requests from the boards.\n"
    ),
    "fares.md": "# Fares\n\n## Caps\n\n- Daily fare cap: £5.50.\n- Weekly fare cap: £22.00.\n",
    "deploys.md": "# Deploys\n\nWe deploy the web app on weekdays after the review.\n",
}


def _siblings(base: Path, extra: dict[str, str]) -> Library:
    return keyword_library(base, {**SIBLINGS, **extra})


def test_answer_type_neighbours_value_answers_nothing(tmp_path: Path) -> None:
    """issue 9 (golden2 abstention): another service's gRPC port, arrivals-api's HTTP
    port and the daily and weekly caps are numbers near the question's words, but not
    the asked-for one: empty, naming the words no close passage holds with a number."""
    with _siblings(tmp_path, {}) as library:
        grpc = library.search("Which gRPC port does arrivals-api listen on?")
        assert grpc.hits == ()
        assert grpc.reason is not None and "beside 'gRPC', 'arrivals-api'" in grpc.reason
        assert library.search("What's the monthly fare cap?").hits == ()
        assert library.search("Which port does arrivals-api listen on?").hits
        assert library.search("What's the weekly fare cap?").hits


def test_answer_type_own_value_is_answered(tmp_path: Path) -> None:
    """The same library once a page states arrivals-api's gRPC port and a monthly cap."""
    extra = {
        "arrivals-grpc.md": "# arrivals-api gRPC\n\narrivals-api serves gRPC on port 9090.\n",
        "monthly.md": "# Monthly cap\n\nThe monthly fare cap is £80.\n",
    }
    with _siblings(tmp_path, extra) as library:
        grpc = library.search("Which gRPC port does arrivals-api listen on?")
        assert grpc.hits and grpc.hits[0].path is not None
        assert grpc.hits[0].path.endswith("arrivals-grpc.md")
        cap = library.search("What's the monthly fare cap?")
        assert cap.hits and cap.hits[0].path is not None and cap.hits[0].path.endswith("monthly.md")


def test_answer_type_duration_must_carry_its_unit() -> None:
    """issue 9 (golden2 dev hybrid): "how long are Slack messages kept" is not answered
    by a team page whose number near "Slack" is a clock time ("until 22:00")."""
    units = {"Slack": ["slack"], "messages": ["messag"], "kept": ["kept"]}
    df = {"slack": 3, "messag": 5, "kept": 4}
    body = ("slack", "almanac", "page", "staf", "until", "22", "00")
    clock = PassageTerms(frozenset(), body, "Slack: #almanac. Paging staffed until 22:00.")
    question = "How long are Slack messages kept?"
    assert answer_type_reason(question, units, [clock], df, 100) is not None
    for written in ("kept for 90 days", "kept two years", "kept 24 h", "kept indefinitely"):
        held = PassageTerms(frozenset(), body, f"Slack messages are {written}. Until 22:00.")
        assert answer_type_reason(question, units, [held], df, 100) is None, written


def test_answer_type_phone_question_needs_a_phone_number() -> None:
    """issue 9 (golden2 dev, enlarged): "what's the phone number for Semaphore's standup
    video link" is not answered by the team page's standup time; an extension or a
    grouped number is a phone number."""
    units = {"phone": ["phone"], "number": ["number"], "Semaphore": ["semaphor"]}
    units |= {"standup": ["standup"]}
    df = {"phone": 3, "number": 5, "semaphor": 4, "standup": 4}
    body = ("semaphor", "standup", "09", "15", "video", "link")
    clock = PassageTerms(frozenset(), body, "Semaphore standup 09:15 on the video link.")
    question = "What's the phone number for Semaphore's standup?"
    assert asks_for_number(question) == "a phone number"
    assert answer_type_reason(question, units, [clock], df, 100) is not None
    for written in ("extension 4400", "ext. 4400", "x4400", "0161 555 0440"):
        held = PassageTerms(frozenset(), body, f"Semaphore standup 09:15; phone {written}.")
        assert answer_type_reason(question, units, [held], df, 100) is None, written


@pytest.mark.parametrize(
    ("question", "role"),
    [
        ("Who is the author of ADR-0012?", "author"),
        ("Who is the designer for Team Lantern?", "designer"),
        ("Who is the manager of the IT Service Desk?", "manager"),
        ("Who's the engineering manager for whoever looks after the board renderer?", "manager"),
        ("who is our data protection officer and how do I reach them", "officer"),
        ("Who manages the team that owns the firmware build?", None),  # not "who is the"
        ("Who has to sign off a schema migration?", None),
        ("Who is the assignee of HD-5521?", "assignee"),
        ("Who reviewed ADR-0009?", "review"),
        ("Who wrote ADR-0012?", "author"),
        ("The engineer who wrote the decision record: which team are they on?", None),
    ],
)
def test_answer_type_asks_for_person_reads_who_is_the_role(question: str, role: str | None) -> None:
    assert asks_for_person(question) == role


def test_answer_type_person_needs_a_name_beside_the_role() -> None:
    """issue 9 (golden2 dev abstention): "ask your manager" next to "the Service Desk"
    names no one; "Engineering manager: **Rafael Duarte**" does. The question's own
    names ("Service Desk") are not an answer."""
    question = "Who is the manager of the IT Service Desk?"
    assert not names_someone(
        "- Your manager for your role.\n- The Service Desk.", "manager", question
    )
    assert names_someone("- Engineering manager: **Rafael Duarte**", "manager", question)
    assert not names_someone(
        "Rafael Duarte joined.\n" + "x" * 100 + " manager", "manager", question
    )


def test_answer_type_absent_person_answers_nothing(tmp_path: Path) -> None:
    """A library holding the Service Desk's page and another team's manager: the question
    for the Service Desk's manager is answered empty; the other team's is answered."""
    extra = {
        "service-desk.md": "# IT Service Desk\n\nThe Service Desk handles accounts and laptops. "
        "Ask your manager before ordering hardware.\n",
        "team-lantern.md": "# Team Lantern\n\n## People\n\n- Engineering manager: Rafael Duarte\n",
    }
    with _siblings(tmp_path, extra) as library:
        absent = library.search("Who is the manager of the IT Service Desk?")
        assert absent.hits == ()
        assert absent.reason is not None and "who the manager is" in absent.reason
        found = library.search("Who is the engineering manager of Team Lantern?")
        assert found.hits and found.hits[0].path is not None
        assert found.hits[0].path.endswith("team-lantern.md")


def test_answer_type_record_field_without_a_name_answers_nothing(tmp_path: Path) -> None:
    """Session 7 (golden2 dev): ADR-0007 lists its reviewers, ADR-0009 does not; SEC-311
    has an assignee, the vendor request HD-5521 named in a postmortem has none."""
    extra = {
        "adr-0007.md": "# ADR-0007: Aztec codes\n\n- Status: Accepted\n- Author: Tobias "
        "Lindqvist\n- Reviewers: Dara Quinn, Mei Takahashi\n\nWe use Aztec codes.\n",
        "adr-0009.md": "# ADR-0009: Ed25519 signatures\n\nStatus: Accepted. Supersedes "
        "ADR-0005.\n\nfare-engine signs each payload with an Ed25519 key.\n",
        "sec-311.md": "**SEC-311** · Hardware keys: wrong pickup location\nReporter: Ruth "
        "Okonkwo · Assignee: Laila Farouk · Status: Done\n",
        "postmortem.md": "# Postmortem: validators\n\n## Actions\n\n1. Alert before the "
        "certificate expires (owner: Priya Nair).\n2. Validators keep accepting offline "
        "taps (vendor request HD-5521).\n",
    }
    with _siblings(tmp_path, extra) as library:
        for absent in ("Who reviewed ADR-0009?", "Who is the assignee of HD-5521?"):
            result = library.search(absent, mode="keyword")
            assert result.hits == (), absent
            assert result.reason is not None and "names someone" in result.reason
        for answered, doc in (
            ("Who reviewed ADR-0007?", "adr-0007.md"),
            ("Who is the assignee of SEC-311?", "sec-311.md"),
        ):
            hits = library.search(answered, mode="keyword").hits
            assert hits and (hits[0].path or "").endswith(doc), answered
