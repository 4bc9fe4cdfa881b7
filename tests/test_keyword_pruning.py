"""Keyword-leg pruning (issue 10, keyword search): ranking only the passages of a query's
essential (rarer) phrases must not change what the full OR query answers.

A real folder synced into a real ``kb.db``: "cache" is in every passage, "latency" in
every other one, "zeppelin" in a handful, and one passage is plainly about zeppelins.
The library is far below ``PRUNE_MIN_CHUNKS``, so the tests lower it explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.search.keyword import BOUND_MARGIN, PrunePlan, keyword_leg, prune_plan
from kb_mcp.search.query import or_expression, parse_query
from kb_mcp.settings import Settings

FILES = 30
SECTIONS = 6
ZEPPELIN_PASSAGES = (3, 40, 77, 121)  # passage numbers that mention the rare word
NEVER = 10**9  # a prune threshold no test library reaches: the full OR query


def _section(n: int) -> str:
    words = ["cache", "warm", "entries", f"shard{n % 13}", "eviction"]
    if n % 2:
        words += ["latency", "budget"]
    if n in ZEPPELIN_PASSAGES:
        words += ["zeppelin"]
    if n == ZEPPELIN_PASSAGES[0]:
        words += ["zeppelin", "zeppelin", "airship", "zeppelin"]
    return f"## Section {n}\n\n" + " ".join(words) + ".\n"


def _split(units: tuple[str, ...], essential: tuple[str, ...]) -> tuple[str, str]:
    """The essential phrases' OR and the other phrases' OR, as ``best_per_document`` takes."""
    rest = [u for u in units if u not in essential]
    return or_expression(list(essential)) or "", or_expression(rest) or ""


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    base = tmp_path_factory.mktemp("pruning")
    folder = base / "notes"
    folder.mkdir()
    for f in range(FILES):
        sections = [_section(f * SECTIONS + s) for s in range(SECTIONS)]
        (folder / f"note-{f:02d}.md").write_text(f"# Note {f}\n\n" + "\n".join(sections))
    library = Library(Settings(home=base / "home", embedder="none"))
    library.folders.add_folder(folder)
    library.folders.sync()
    library.fts.ensure_current()
    yield library
    library.close()


def test_keyword_pruning_plans_common_words_out_and_keeps_rare_ones(crowded: Library) -> None:
    """issue 10: the common words leave the essential set, the rare one stays."""
    plan = prune_plan(crowded.fts, parse_query("zeppelin cache latency"), min_chunks=0)
    assert plan is not None
    assert plan.first == ("zeppelin",)
    assert {u for u, _ in plan.common} == {"cache", "latency"}
    assert plan.bound_without(plan.first) > 0


def test_keyword_pruning_never_changes_the_first_result_of_an_unambiguous_query(
    crowded: Library,
) -> None:
    """issue 10 'Done when': the pruned leg answers as the full OR query does."""
    query = parse_query("zeppelin cache latency")
    plan = prune_plan(crowded.fts, query, min_chunks=0)
    assert plan is not None
    pruned = crowded.fts.best_per_document(
        query.match_expression() or "", 3, None, *_split(plan.units, plan.first)
    )
    # the bound is proved, so the leg keeps this ranking
    assert pruned[0][1] > plan.bound_without(plan.first)
    full = keyword_leg(crowded.fts, query, 3, prune_min_chunks=NEVER)
    leg = keyword_leg(crowded.fts, query, 3, prune_min_chunks=0)
    assert [h.chunk_id for h in leg] == [h.chunk_id for h in full]
    assert [h.chunk_id for h in leg] == [cid for cid, _ in pruned]
    assert [h.score for h in leg] == pytest.approx([h.score for h in full], abs=1e-9)
    top = crowded.lookup.search("zeppelin cache latency", top_k=1, mode="keyword").hits[0]
    assert "airship" in top.text


def test_keyword_pruning_scores_are_the_full_queries_bm25(crowded: Library) -> None:
    """issue 10: each essential passage is scored by bm25 over the whole query."""
    query = parse_query("zeppelin latency cache")
    plan = prune_plan(crowded.fts, query, min_chunks=0)
    assert plan is not None
    expression = query.match_expression() or ""
    split = _split(plan.units, plan.first)
    pruned = dict(crowded.fts.best_per_document(expression, 50, None, *split))
    full = dict(crowded.fts.best_per_document(expression, 50))
    assert len(pruned) == len(ZEPPELIN_PASSAGES)  # one passage per document here
    for chunk_id, score in pruned.items():
        assert score == pytest.approx(full[chunk_id], abs=1e-9)


def test_keyword_pruning_falls_back_when_the_rare_words_find_too_few_documents(
    crowded: Library,
) -> None:
    """issue 10: asked for more documents than the rare word reaches, the full OR runs."""
    query = parse_query("zeppelin cache")
    full = keyword_leg(crowded.fts, query, 20, prune_min_chunks=NEVER)
    leg = keyword_leg(crowded.fts, query, 20, prune_min_chunks=0)
    assert len(leg) == 20
    assert [h.chunk_id for h in leg] == [h.chunk_id for h in full]


def test_keyword_pruning_leaves_cjk_bigram_queries_and_small_libraries_alone(
    crowded: Library,
) -> None:
    """issue 10: a CJK bigram's df is unknown, and a small library has nothing to win."""
    assert prune_plan(crowded.fts, parse_query("缓存延迟 cache"), min_chunks=0) is None
    assert prune_plan(crowded.fts, parse_query("zeppelin cache")) is None


def test_keyword_pruning_next_round_leaves_out_what_the_best_score_allows() -> None:
    """issue 10: a failed bound widens the essential set by MaxScore's rule (the most
    common phrases whose bounds add up to less than the best score stay out), and the
    widened set's bound is below that score, so the next round proves its first result."""
    plan = PrunePlan(("r", "a", "b", "c"), (("a", 1.0), ("b", 2.0), ("c", 4.0)), ("r",))
    assert plan.bound_without(("r",)) == pytest.approx(7.0 * BOUND_MARGIN)
    wider = plan.essential_for(3.5, ("r",))
    assert wider == ("r", "c")
    assert plan.bound_without(wider) < 3.5
    # a best score above every bound but too few documents: one more phrase comes in
    assert plan.essential_for(100.0, ("r",)) == ("r", "c")
    assert plan.essential_for(100.0, ("r", "c")) == ("r", "b", "c")
    # nothing may stay out: the caller runs the full OR instead
    assert plan.essential_for(0.5, ("r",)) is None
    assert plan.essential_for(100.0, ("r", "b", "c")) is None


def test_index_statistics_cache_sees_new_chunks(tmp_path: Path) -> None:
    """issue 10: df and the chunk count are cached, and a sync invalidates them."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nzeppelin cache\n")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        library.fts.ensure_current()
        assert library.fts.doc_frequencies(["zeppelin"]) == {"zeppelin": 1}
        before = library.fts.chunk_count()
        (folder / "b.md").write_text("# B\n\nzeppelin airship\n")
        library.folders.sync()
        assert library.fts.doc_frequencies(["zeppelin", "airship"]) == {
            "zeppelin": 2,
            "airship": 1,
        }
        assert library.fts.chunk_count() == before + 1


def test_index_statistics_cache_sees_commits_of_another_connection(tmp_path: Path) -> None:
    """issue 10: a search thread whose cached df and chunk count came from an empty
    library sees the chunks another connection (the server's sync thread, another
    process) commits afterwards; the cache once kept answering 'nothing stored'."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Lighthouses\n\nlighthouses guide ships\n")
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as reader:
        assert reader.lookup.search("lighthouses", mode="keyword").hits == ()
        assert reader.lookup.search("lighthouses", mode="keyword").hits == ()  # cached now
        with Library(Settings(home=home, embedder="none")) as writer:
            writer.folders.add_folder(folder)
            writer.folders.sync()
        found = reader.lookup.search("lighthouses", mode="keyword").hits
    assert [hit.path for hit in found] == ["a.md"]
