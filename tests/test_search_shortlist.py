"""The ranking stage's shortlist changes no result (issue 10, "cut the ranking stage").

``search/shortlist.py`` ranks only the keyword leg's first documents when its scores prove
nothing below can reach them. Pinned here against ranking every candidate, over real
libraries: the second golden set (dates, supersessions, relations, code and test paths)
and a folder built so that a newer near-tied version sits just below the shortlist.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kb_mcp.bench.beir import GOLDEN2_SET, GOLDEN_SET, load_beir
from kb_mcp.bench.retrieval import ingest
from kb_mcp.library import Library
from kb_mcp.search.engine import KEYWORD_WEIGHT
from kb_mcp.search.keyword import keyword_leg
from kb_mcp.search.query import parse_query
from kb_mcp.search.rank import CANDIDATE_DOCUMENTS, Ranking, RankInputs, rank
from kb_mcp.search.shortlist import SHORTLIST_DOCUMENTS
from kb_mcp.search.stats import unit_stats
from kb_mcp.settings import Settings

HEAD = 10  # the answer's top_k and the person floor's passages: what a search reads


def _head(ranking: Ranking, count: int = HEAD) -> list[tuple[str, float, tuple]]:
    return [(c.key, c.score, c.adjustments) for c in ranking.order[:count]]


def _same_head(short: Ranking, full: Ranking) -> bool:
    """The shortlist's whole order is the head of the full one (what its proof claims),
    and so the answer's first ten are the same."""
    return _head(short, len(short.order)) == _head(full, len(short.order))


def _both(library: Library, question: str) -> tuple[Ranking, Ranking] | None:
    """The question ranked with and without the shortlist (None: it matches nothing)."""
    query = parse_query(question)
    if query.is_empty:
        return None
    hits = keyword_leg(library.fts, query, CANDIDATE_DOCUMENTS)
    if not hits:
        return None
    stats = unit_stats(library.fts, query)
    inputs = RankInputs(question, {"keyword": KEYWORD_WEIGHT}, stats=stats, head=HEAD)
    legs = {"keyword": hits}
    full = RankInputs(question, inputs.weights, stats=stats, head=HEAD, shortlist=False)
    return rank(library.db, library.fts, legs, inputs), rank(library.db, library.fts, legs, full)


@pytest.fixture(scope="module", params=["golden", "golden2"])
def golden(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Library, list[str]]]:
    """A golden set's name, library and questions (both splits of golden2)."""
    path = GOLDEN_SET if request.param == "golden" else GOLDEN2_SET
    splits = ("test",) if request.param == "golden" else ("dev", "test")
    home = tmp_path_factory.mktemp(f"shortlist-{request.param}") / "home"
    library = Library(Settings(home=home, embedder="none"))
    ingest(library, load_beir(path, splits[0]), None)
    yield request.param, library, [q.text for s in splits for q in load_beir(path, s).queries]
    library.close()


def test_shortlist_ranks_the_head_as_ranking_every_candidate_does(golden) -> None:
    """Every golden question: the first ten documents, their scores and adjustments are
    those of ranking all candidates. The shortlist ran for some golden questions (one that
    never proves anything would pass the comparison without testing it); on golden2,
    whose relations link candidates of nearly every question, it must decline."""
    name, library, questions = golden
    shortlisted = 0
    for question in questions:
        found = _both(library, question)
        if found is None:
            continue
        short, full = found
        assert _same_head(short, full), question
        assert short.keyword_top == full.keyword_top
        shortlisted += len(short.order) < len(full.order)
    if name == "golden":  # golden2's relations link candidates of nearly every question
        assert shortlisted >= 5


# Distinct one-word titles: no two of them are on a similar topic (``same_topic``).
TITLES = (
    "Quartz Harbour Violin Meadow Copper Lantern Orchid Falcon Saddle Tundra Ember Juniper "
    "Thistle Bamboo Cobalt Hazel Lotus Nectar Oasis Zephyr Mystic Kiwi Yacht Sphinx Gnome "
    "Jockey Buzz Oxygen Lynx Rhythm"
).split()


def _note(title: str, day: int, word: str, repeats: int) -> str:
    dated = f"2024-{day // 28 + 1:02d}-{day % 28 + 1:02d}"
    return f"---\ndate: {dated}\n---\n# {title}\n\n{' '.join([word] * repeats)} filter.\n"


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """30 notes on impellers, all titled alike, each newer and matching a little less than
    the one before; 30 on gaskets with distinct titles, the same way, and 30 on valves
    with the third in ``tests/``; 30 on rotors calling ``spinRotor()``, the third defining
    it; 40 unrelated notes."""
    base = tmp_path_factory.mktemp("shortlist-versions")
    folder = base / "notes"
    folder.mkdir()
    for n in range(30):
        impeller = _note("Impeller maintenance", n, "impeller", 40 - n)
        (folder / f"impeller-{n:02d}.md").write_text(impeller, encoding="utf-8")
        (folder / f"gasket-{n:02d}.md").write_text(_note(TITLES[n], n, "gasket", 40 - n))
        valve = _note(TITLES[n], n, "valve", 40 - n)
        sub = folder / "tests" if n == 3 else folder  # the prior demotes a test file
        sub.mkdir(exist_ok=True)
        (sub / f"valve-{n:02d}.md").write_text(valve, encoding="utf-8")
        rotor = _note(TITLES[n], n, "rotor", 40 - n) + "Then call spinRotor() again.\n"
        if n == 2:  # the one note that defines what all of them call (long: ranked low)
            rotor += "\n    def spinRotor():\n        return 1\n\n" + "lorem ipsum " * 100
        (folder / f"rotor-{n:02d}.md").write_text(rotor, encoding="utf-8")
    for n in range(40):
        (folder / f"garden-{n:02d}.md").write_text(f"# Garden {n}\n\ntomato bed {n} watered.\n")
    library = Library(Settings(home=base / "home", embedder="none"))
    library.add_folder(folder)
    library.sync()
    yield library
    library.close()


def test_shortlist_ranks_all_when_a_newer_version_below_could_pass_one(versions) -> None:
    """Newer near-tied versions on one topic climb from below the shortlist into the head
    (the recency pass): the proof sees that one could pass a shortlisted document, and
    every candidate is ranked."""
    short, full = _both(versions, "impeller")
    below = {full.fused[c.key].chunk_id for c in full.order[SHORTLIST_DOCUMENTS:]}
    first = [h.chunk_id for h in keyword_leg(versions.fts, parse_query("impeller"), 100)]
    assert any(full.fused[c.key].chunk_id in first[SHORTLIST_DOCUMENTS:] for c in full.order[:HEAD])
    assert below  # the full ranking holds more than the shortlist
    assert len(short.order) == len(full.order) > SHORTLIST_DOCUMENTS
    assert _same_head(short, full)


def test_shortlist_proves_the_head_when_no_document_below_could_pass(versions) -> None:
    """Distinct topics: no document below can pass a shortlisted one, so only the first
    twenty are ranked, with the head ranking all would give."""
    short, full = _both(versions, "gasket")
    assert len(short.order) == SHORTLIST_DOCUMENTS < len(full.order)
    assert _same_head(short, full)


def test_shortlist_ranks_all_when_a_rule_sinks_a_shortlisted_document(versions) -> None:
    """The test file among the valve notes is demoted below where the first document
    below the shortlist scores: ranked alone it would stay twentieth, so every candidate
    is ranked."""
    short, full = _both(versions, "valve")
    assert any(c.adjustments for c in full.order[SHORTLIST_DOCUMENTS:])
    assert len(short.order) == len(full.order) > SHORTLIST_DOCUMENTS
    assert _same_head(short, full)


def test_shortlist_ranks_all_when_a_document_below_defines_a_name_asked_for(versions) -> None:
    """The note defining ``spinRotor`` ranks below the shortlist by bm25, and the
    definition rule promotes it into the head: every candidate is ranked."""
    short, full = _both(versions, "spinRotor rotor")
    promoted = [c for c in full.order[:HEAD] if c.adjustments]
    assert promoted and full.order.index(promoted[0]) < SHORTLIST_DOCUMENTS
    assert len(short.order) == len(full.order) > SHORTLIST_DOCUMENTS
    assert _same_head(short, full)


def test_rank_sees_a_supersession_written_after_a_search(tmp_path) -> None:
    """The ranking stage keeps "does any document supersede another" per data version;
    a folder file that supersedes another, synced after a search, demotes it at once."""
    folder = tmp_path / "notes"
    folder.mkdir()
    old = "# Pump runbook\n\nRestart the pump with the red lever.\n"
    (folder / "runbook-v1.md").write_text(old, encoding="utf-8")
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        library.add_folder(folder)
        library.sync()
        assert not library.search("restart the pump lever", mode="keyword").hits[0].adjustments
        new = "---\nsupersedes: runbook-v1.md\n---\n# Pump runbook v2\n\nRestart the pump.\n"
        (folder / "runbook-v2.md").write_text(new, encoding="utf-8")
        library.sync()
        hits = library.search("restart the pump lever", mode="keyword").hits
        demoted = [h for h in hits if h.path == "runbook-v1.md"]
        # the frontmatter's demotion (``freshness.demotion_rule``: by whom, since when), not
        # only the relation's, which holds without the supersession read
        assert demoted
        assert re.fullmatch(
            r"superseded by f-\w+ on \d{4}-\d{2}-\d{2}", demoted[0].adjustments[0].reason
        )
    finally:
        library.close()


def test_rank_sees_a_relation_written_after_a_search(tmp_path) -> None:
    """The documents with relations are kept per data version too: an errata synced
    after a search corrects the old policy in the next one."""
    folder = tmp_path / "notes"
    folder.mkdir()
    policy = (
        "---\ntitle: Audit log retention policy\ndate: 2026-01-10\n---\n"
        "# Audit log retention policy\n\nAudit logs are kept for 90 days in the archive bucket.\n"
    )
    (folder / "retention.md").write_text(policy, encoding="utf-8")
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    question = "how many days are audit logs kept in the archive bucket"
    try:
        library.add_folder(folder)
        library.sync()
        assert library.search(question, mode="keyword").hits[0].relations == ()
        errata = (
            "---\ndate: 2026-02-03\n---\n# Errata for the audit log retention policy\n\n"
            "Effective 3 February: audit logs are kept for 30 days in the archive bucket, "
            "not 90 days.\n"
        )
        (folder / "errata.md").write_text(errata, encoding="utf-8")
        library.sync()
        old = [h for h in library.search(question, mode="keyword").hits if h.path == "retention.md"]
        assert old and old[0].relations[0].startswith("corrected by")
    finally:
        library.close()
