"""The second golden set (issue 9, "a second golden set, honestly made"): its invariants,
and the bench rules it brought (``stale``, per-split abstention, frontmatter, macro).

The set's figures are not floors yet: it was written to be tuned on (``dev``) and
reported on (``test``) by issue 9's work, so this module pins what makes the set
honest, not how well the engine does on it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from kb_mcp.bench import metrics
from kb_mcp.bench.beir import GOLDEN2_SET, BeirSet, load_beir
from kb_mcp.bench.retrieval import (
    current_above_stale,
    doc_file_name,
    macro_score,
    run_retrieval_bench,
    write_corpus,
)
from kb_mcp.cli.bench import dataset_path
from kb_mcp.settings import Settings

CLASSES = {
    "fact",
    "multi_hop",
    "time_bound",
    "correction",
    "retraction",
    "supersession",
    "abstention",
    "citation",
}
SPLITS = ("dev", "test")
MIN_PER_CLASS = 8
DOC_KEYS = {"date", "path", "supersedes", "frontmatter", "note"}
"""Informative metadata only: ``retracted`` / ``speculative`` would make the bench act."""
QUERY_KEYS = {"class", "as_of", "evidence", "expect", "split", "stale", "corrects", "note"}


@pytest.fixture(scope="module")
def sets() -> dict[str, BeirSet]:
    return {split: load_beir(GOLDEN2_SET, split) for split in SPLITS}


def _touched(beir: BeirSet) -> set[str]:
    """Every doc a split's queries name: judged, stale or corrected."""
    named = {doc for rels in beir.qrels.values() for doc in rels}
    for query in beir.queries:
        named.update(query.metadata.get("stale", ()))
        named.update(query.metadata.get("corrects", ()))
    return named


def test_golden2_ids_are_unique_across_both_files() -> None:
    for name in ("corpus.jsonl", "queries.jsonl"):
        lines = (GOLDEN2_SET / name).read_text(encoding="utf-8").splitlines()
        ids = [json.loads(line)["_id"] for line in lines if line.strip()]
        assert len(ids) == len(set(ids)), name


def test_golden2_corpus_size_and_metadata_keys(sets: dict[str, BeirSet]) -> None:
    docs = sets["dev"].docs
    assert 110 <= len(docs) <= 200  # 142 written first, 26 more for issue 9 relations
    assert {key for doc in docs for key in doc.metadata} <= DOC_KEYS
    assert {key for q in sets["dev"].queries for key in q.metadata} <= QUERY_KEYS


def test_golden2_every_query_is_in_exactly_one_split(sets: dict[str, BeirSet]) -> None:
    lines = (GOLDEN2_SET / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    seen = Counter(q.id for beir in sets.values() for q in beir.queries)
    assert len(seen) == len(lines)
    assert set(seen.values()) == {1}


@pytest.mark.parametrize("split", SPLITS)
def test_golden2_each_class_has_enough_queries_per_split(
    sets: dict[str, BeirSet], split: str
) -> None:
    counts = Counter(query.query_class for query in sets[split].queries)
    assert set(counts) == CLASSES
    assert min(counts.values()) >= MIN_PER_CLASS, counts


@pytest.mark.parametrize("split", SPLITS)
def test_golden2_named_docs_exist(sets: dict[str, BeirSet], split: str) -> None:
    beir = sets[split]
    ids = {doc.id for doc in beir.docs}
    assert _touched(beir) - ids == set()
    superseded = {old for doc in beir.docs for old in doc.metadata.get("supersedes", ())}
    assert superseded - ids == set()


def test_golden2_dev_and_test_touch_different_documents(sets: dict[str, BeirSet]) -> None:
    """Tuning on dev must not tune on test's documents (the issue's honesty rule)."""
    assert _touched(sets["dev"]) & _touched(sets["test"]) == set()


@pytest.mark.parametrize("split", SPLITS)
def test_golden2_only_abstentions_lack_relevant_docs(sets: dict[str, BeirSet], split: str) -> None:
    beir = sets[split]
    for query in beir.queries:
        relevant = [d for d, grade in beir.qrels[query.id].items() if grade > 0]
        is_abstention = query.query_class == "abstention"
        assert is_abstention == (not relevant) == query.expects_none, query.id
        if is_abstention:
            assert query.metadata.get("split") == split, query.id


def test_golden2_abstention_words_all_occur_in_the_library(sets: dict[str, BeirSet]) -> None:
    """An absent answer is only hard when the question's words are all there."""
    beir = sets["dev"]
    library_words = set(
        re.findall(r"[a-z0-9]+", " ".join(d.title + d.text for d in beir.docs).lower())
    )
    for split in SPLITS:
        for query in sets[split].queries:
            if query.expects_none:
                words = re.findall(r"[a-z0-9]+", re.sub(r"'s\b", "", query.text.lower()))
                assert set(words) <= library_words, (query.id, set(words) - library_words)


@pytest.mark.parametrize("split", SPLITS)
def test_golden2_evidence_is_one_line_of_exactly_one_judged_doc(
    sets: dict[str, BeirSet], split: str
) -> None:
    beir = sets[split]
    for query in (q for q in beir.queries if q.query_class == "citation"):
        evidence = query.metadata["evidence"]
        holders = [doc for doc in beir.docs if evidence in doc.text]
        assert len(holders) == 1, (query.id, [doc.id for doc in holders])
        assert any(evidence in line for line in holders[0].text.splitlines()), query.id
        assert beir.qrels[query.id].get(holders[0].id, 0) > 0, query.id


@pytest.mark.parametrize("split", SPLITS)
def test_golden2_stale_docs_are_never_judged_and_every_stale_query_has_one(
    sets: dict[str, BeirSet], split: str
) -> None:
    beir = sets[split]
    for query in beir.queries:
        stale = set(query.metadata.get("stale", ()))
        corrected = set(query.metadata.get("corrects", ()))
        assert (stale | corrected) & set(beir.qrels[query.id]) == set(), query.id
        if query.query_class in {"retraction", "supersession"}:
            assert stale, query.id
        if query.query_class == "correction":
            assert corrected, query.id
        if query.query_class == "time_bound":
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", query.metadata["as_of"]), query.id


def test_golden2_is_reached_by_name_from_the_cli() -> None:
    assert dataset_path("golden2") == GOLDEN2_SET
    assert dataset_path("some/folder") == Path("some/folder")


# --- the rules golden2 brought to the bench -----------------------------------------------


@pytest.mark.parametrize(
    ("ranked", "expected"),
    [
        (["new", "old"], 1.0),
        (["old", "new"], 0.0),
        (["other", "new"], 1.0),  # the stale doc not retrieved counts as below
        (["old", "other"], 0.0),  # the current doc not retrieved at all
        (["old", "support", "new"], 0.0),  # a grade-1 doc above the stale one is not enough
    ],
)
def test_current_above_stale_needs_a_top_grade_doc_first(
    ranked: list[str], expected: float
) -> None:
    rels = {"new": 2, "support": 1}
    assert current_above_stale(ranked, rels, ["old"]) == expected


def test_current_above_stale_accepts_any_of_several_top_grade_docs() -> None:
    rels = {"notice": 2, "current": 2}
    assert current_above_stale(["current", "old", "notice"], rels, ["old"]) == 1.0


def test_macro_score_uses_the_rule_where_a_class_has_one() -> None:
    per_class = {"a": {"ndcg@10": 0.5, "rule": 1.0}, "b": {"ndcg@10": 0.2}}
    assert macro_score(per_class) == pytest.approx(0.6)
    assert macro_score({}) is None


def test_write_corpus_renders_frontmatter_metadata_as_given(tmp_path: Path) -> None:
    """`status: withdrawn` and `replaces:` reach the file a real team would have written."""
    beir = load_beir(GOLDEN2_SET, "dev")
    write_corpus(beir, tmp_path)
    doc = next(d for d in beir.docs if d.id == "ios15-drop")
    _, block, body = (tmp_path / doc_file_name(doc)).read_text(encoding="utf-8").split("---\n", 2)
    meta = yaml.safe_load(block)
    assert meta["status"] == "withdrawn"
    assert meta["title"] == doc.title
    assert body == doc.text


def test_load_beir_keeps_an_abstention_query_only_in_its_named_split(tmp_path: Path) -> None:
    root = tmp_path / "s"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    queries = [
        {"_id": "a", "text": "q", "metadata": {"expect": "none", "split": "dev"}},
        {"_id": "b", "text": "q", "metadata": {"expect": "none"}},
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    for split in SPLITS:
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n")
    assert [q.id for q in load_beir(root, "dev").queries] == ["a", "b"]
    assert [q.id for q in load_beir(root, "test").queries] == ["b"]


@pytest.fixture(scope="module")
def dev_report(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("golden2") / "home"
    settings = Settings(home=home, embedder="none")
    return run_retrieval_bench(GOLDEN2_SET, "dev", mode="keyword", settings=settings)


def test_golden2_dev_run_scores_every_class_and_a_macro(dev_report) -> None:
    assert set(dev_report.per_class) == CLASSES
    for name in ("retraction", "supersession", "citation", "abstention"):
        assert "rule" in dev_report.per_class[name], name
    heads = [row.get("rule", row["ndcg@10"]) for row in dev_report.per_class.values()]
    assert dev_report.macro == pytest.approx(metrics.mean(heads), abs=1e-4)
    assert dev_report.to_json()["macro"] == dev_report.macro
