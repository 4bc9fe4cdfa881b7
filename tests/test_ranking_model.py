"""The learned ranking: what its features read, how its weights are refused or used, and
what the feedback leg brings (issue 21).

The features are pure functions of the legs' evidence and the question's index tokens;
the model is two logistic heads read from ``kb_mcp/search/ranker.json``; the feedback leg
finds the document only a first result names. Quality figures live in the bench
(``kb-mcp bench retrieval``, ``kb-mcp bench train-ranker``), not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.bench.beir import GOLDEN_SET, load_beir
from kb_mcp.bench.retrieval import ingest
from kb_mcp.errors import Unavailable
from kb_mcp.library import Library
from kb_mcp.search import model as model_mod
from kb_mcp.search.features import NAMES, Evidence, Question, coverage, feature_rows, proximity
from kb_mcp.settings import Settings


def question(*units: str, df: dict[str, int] | None = None, passages: int = 1000) -> Question:
    return Question([[u] for u in units], df or {}, passages)


def evidence(key: str, text: str, date: str | None = None, **kw) -> Evidence:
    tokens = text.lower().split()
    return Evidence(
        key=key,
        fused=kw.pop("fused", 1.0),
        ranks=kw.pop("ranks", {"keyword": 1}),
        scores=kw.pop("scores", {"keyword": 5.0}),
        present=frozenset(tokens),
        sequence=tokens,
        head=frozenset(kw.pop("head", "").split()),
        date=date,
        **kw,
    )


def row(rows: list[list[float]], i: int) -> dict[str, float]:
    return dict(zip(NAMES, rows[i], strict=True))


def test_coverage_weighs_each_unit_by_its_rarity() -> None:
    q = question("pool", "the", df={"pool": 3, "the": 900})
    assert coverage(q, frozenset({"pool"})) > 0.9
    assert coverage(q, frozenset({"the"})) < 0.1
    assert coverage(q, frozenset()) == 0.0


def test_proximity_rewards_the_question_words_stated_together() -> None:
    q = question("ledger", "pool", "size")
    together = "the ledger pool size is 40".split()
    scattered = ["ledger", *["x"] * 30, "pool", *["x"] * 30, "size"]
    assert proximity(q, together) == pytest.approx(1.0)
    assert proximity(q, scattered) == pytest.approx(1 / 3)
    assert proximity(q, []) == 0.0


def test_feature_rows_read_leg_ranks_and_shares_of_the_best_score() -> None:
    q = question("ledger", "pool")
    rows = feature_rows(
        [
            evidence("a", "ledger pool", ranks={"keyword": 1}, scores={"keyword": 8.0}),
            evidence("b", "ledger", ranks={"keyword": 2, "vector": 1}, scores={"keyword": 4.0}),
        ],
        q,
    )
    first, second = row(rows, 0), row(rows, 1)
    assert (first["keyword_inverse_rank"], second["keyword_inverse_rank"]) == (1.0, 0.5)
    assert (first["keyword_share_of_best"], second["keyword_share_of_best"]) == (1.0, 0.5)
    assert first["vector_inverse_rank"] == 0.0 and second["vector_inverse_rank"] == 1.0
    assert first["coverage_gap"] == 0.0 and second["coverage_gap"] < 0


def test_versions_of_one_fact_mark_the_older_outdated_and_the_one_valid_then() -> None:
    """Two candidates holding the same question words are versions of one fact: the
    older is outdated; for a question naming a period, the newest within it is valid."""
    v2023 = evidence("v2023", "daily cap 5", date="2023-01-01")
    v2025 = evidence("v2025", "daily cap 7", date="2025-01-01")
    other = evidence("other", "cap on parking", date="2026-01-01")
    now = feature_rows([v2023, v2025, other], question("daily", "cap"))
    assert [row(now, i)["outdated"] for i in range(3)] == [1.0, 0.0, 0.0]
    then = question("daily", "cap")
    then = Question(then.units, then.df, then.passages, as_of="2024-06-30")
    past = feature_rows([v2023, v2025, other], then)
    assert [row(past, i)["outdated"] for i in range(3)] == [0.0, 0.0, 0.0]
    assert [row(past, i)["valid_then"] for i in range(3)] == [1.0, 0.0, 0.0]
    assert [row(past, i)["after_as_of"] for i in range(3)] == [0.0, 1.0, 1.0]


def test_shipped_weights_are_for_these_features() -> None:
    shipped = model_mod.shipped()
    assert set(shipped.models) == {"keyword", "hybrid"}
    data = json.loads(model_mod.WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert data["features"] == list(NAMES)
    for heads in shipped.models.values():
        assert len(heads.order.weights) == len(NAMES)
        assert len(heads.answers.weights) == len(model_mod.ANSWER_NAMES)
        assert 0.0 <= heads.threshold < 1.0


def test_weights_written_for_other_features_are_refused_not_misread() -> None:
    data = json.loads(model_mod.WEIGHTS_FILE.read_text(encoding="utf-8"))
    data["features"] = data["features"][:-1]
    with pytest.raises(Unavailable, match="trained for other features"):
        model_mod.parse(data)


def test_confidence_is_the_answers_head_on_the_first_by_the_order_head() -> None:
    n = len(NAMES)
    first = NAMES.index("coverage")
    order = model_mod.LinearModel(
        tuple(1.0 if i == first else 0.0 for i in range(n)), 0.0, (0.0,) * n, (1.0,) * n
    )
    answers = model_mod.LinearModel(
        (1.0,) + (0.0,) * (n + 1), -0.5, (0.0,) * (n + 2), (1.0,) * (n + 2)
    )
    heads = model_mod.LegSetModel(order, answers, 0.5)
    rows = [[0.0] * n, [0.0] * n]
    rows[1][first] = 2.0
    logits, confidence = heads.confidence(rows)
    assert logits == [0.0, 2.0]
    assert confidence == pytest.approx(model_mod.sigmoid(2.0 - 0.5))


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Library, object]]:
    beir = load_beir(GOLDEN_SET, "test")
    home: Path = tmp_path_factory.mktemp("golden") / "home"
    lib = Library(Settings(home=home, max_files_per_source=len(beir.docs) + 1, embedder="none"))
    ingest(lib, beir, None)
    yield lib, beir
    lib.close()


def test_an_absent_answer_is_empty_with_the_models_reason(golden) -> None:
    """Abstention is the model's probability that the first answers, under the shipped
    threshold; the reason says so. The golden set's absent-answer questions are asked of a
    library large enough for the model to be trusted."""
    library, beir = golden
    assert library.fts.chunk_count() >= model_mod.shipped().abstains_from
    absent = [q for q in beir.queries if q.query_class == "abstention"]
    results = [library.lookup.search(q.text, mode="keyword") for q in absent]
    empty = [r for r in results if not r.hits]
    assert empty, "no absent-answer question was answered empty"
    assert all(r.reason and "estimated probability" in r.reason for r in empty)


def test_a_small_library_is_never_emptied_by_the_model(tmp_path: Path) -> None:
    """Below the size of the libraries it learned from the model orders but never
    abstains: its absolute features (IDF shares) mean little over a few passages."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "pm.md").write_text(
        "# Postmortem: harbour ferry gates outage\n\nIncident commander: Ana Lima.\n"
        "Eleven ticket gates at the harbour were down for two hours.\n",
        encoding="utf-8",
    )
    with Library(Settings(home=tmp_path / "home", embedder="none")) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        assert lib.fts.chunk_count() < model_mod.shipped().abstains_from
        hits = lib.lookup.search(
            "who led the response to the ferry gate outage", mode="keyword"
        ).hits
        assert hits and hits[0].title.startswith("Postmortem")


def test_feedback_leg_finds_the_document_only_a_first_result_names(tmp_path: Path) -> None:
    """A question names a component; its page names the team that owns it; only the
    team's page holds the answer and shares no word with the question."""
    folder = tmp_path / "wiki"
    folder.mkdir()
    (folder / "tidegate.md").write_text(
        "# tidegate\n\ntidegate relays sluice telemetry. It is owned by the Quokka crew.\n",
        encoding="utf-8",
    )
    (folder / "quokka.md").write_text(
        "# Quokka crew\n\nThe Quokka crew meets on Thursdays and answers in #quokka-help.\n",
        encoding="utf-8",
    )
    for i in range(30):  # other pages, so the library has statistics
        (folder / f"page{i}.md").write_text(
            f"# Page {i}\n\nNotes about chart {i} and the harbour lights.\n", encoding="utf-8"
        )
    with Library(Settings(home=tmp_path / "home", embedder="none")) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        result = lib.lookup.search("where to raise tidegate problems", mode="keyword")
        by_title = {h.title: h for h in result.hits}
        assert "Quokka crew" in by_title
        assert "feedback" in by_title["Quokka crew"].legs
        only_keyword = lib.lookup.search(
            "where to raise tidegate problems", mode="keyword", legs=["keyword"]
        )
        assert "Quokka crew" not in {h.title for h in only_keyword.hits}


def test_results_past_the_models_head_follow_in_fused_order_below_it(tmp_path: Path) -> None:
    """The model orders the fused first 40; a search asking for more still gets every
    matching document, below them, with scores that keep the order."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(70):
        (folder / f"n{i:02}.md").write_text(
            f"# Note {i}\n\nThe lighthouse keeper logs {'fog ' * (i % 5 + 1)}at dawn.\n",
            encoding="utf-8",
        )
    with Library(Settings(home=tmp_path / "home", embedder="none")) as lib:
        lib.folders.add_folder(folder)
        lib.folders.sync()
        hits = lib.lookup.search("lighthouse fog", top_k=70, mode="keyword").hits
        assert len(hits) == 70
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
