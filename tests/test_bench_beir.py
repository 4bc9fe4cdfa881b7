"""The BEIR loader, on tiny sets written to tmp_path, and the shipped golden set's invariants."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kb_mcp.bench.beir import GOLDEN_SET, BeirDoc, BeirQuery, BeirSet, load_beir
from kb_mcp.errors import InvalidInput, NotFound

GOLDEN_CLASSES = (
    "fact",
    "multi_hop",
    "time_bound",
    "correction",
    "contradiction",
    "retraction",
    "corroboration",
    "hypothetical",
    "abstention",
    "citation",
    "cjk",
    "code",
)

HEADER = "query-id\tcorpus-id\tscore\n"


def write_set(
    root: Path,
    corpus: list[object] | str,
    queries: list[object] | str,
    qrels: dict[str, str],
) -> Path:
    """Write a BEIR folder; lists become JSON lines, strings are written verbatim."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        if not isinstance(content, str):
            content = "".join(json.dumps(record) + "\n" for record in content)
        (root / name).write_text(content, encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    for split, rows in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(rows, encoding="utf-8")
    return root


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_set(
        tmp_path / "tiny",
        corpus=[
            {"_id": "d1", "title": "Backups", "text": "At 01:30.", "metadata": {"date": "2023"}},
            {"_id": "d2", "text": "No title here."},
        ],
        queries=[
            {"_id": "q1", "text": "when do backups run", "metadata": {"class": "fact"}},
            {"_id": "q2", "text": "top-level class", "class": "code"},
            {"_id": "q3", "text": "judged only in train"},
            {"_id": "q4", "text": "none", "metadata": {"class": "abstention", "expect": "none"}},
        ],
        qrels={
            "test": HEADER + "q1\td1\t2\nq1\td2\t0\nq2\td2\t1\n",
            "train": HEADER + "q3\td1\t1\n",
        },
    )


def test_load_beir_reads_docs_queries_and_qrels(tiny: Path) -> None:
    loaded = load_beir(tiny, "test")
    assert loaded == BeirSet(
        name="tiny",
        docs=(
            BeirDoc("d1", "Backups", "At 01:30.", {"date": "2023"}),
            BeirDoc("d2", "", "No title here.", {}),
        ),
        queries=(
            BeirQuery("q1", "when do backups run", "fact", {"class": "fact"}),
            BeirQuery("q2", "top-level class", "code", {}),
            BeirQuery("q4", "none", "abstention", {"class": "abstention", "expect": "none"}),
        ),
        qrels={"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1}, "q4": {}},
    )


def test_load_beir_keeps_only_queries_judged_in_the_split(tiny: Path) -> None:
    assert [query.id for query in load_beir(tiny, "train").queries] == ["q3", "q4"]


def test_load_beir_keeps_expect_none_queries_with_empty_qrels(tiny: Path) -> None:
    loaded = load_beir(tiny, "train")
    abstention = loaded.queries[-1]
    assert abstention.expects_none
    assert loaded.qrels[abstention.id] == {}
    assert not loaded.queries[0].expects_none


def test_load_beir_accepts_qrels_without_header_and_blank_lines(tmp_path: Path) -> None:
    root = write_set(
        tmp_path / "s",
        corpus='{"_id": "d1", "text": "x"}\n\n',
        queries='\n{"_id": "q1", "text": "y"}\n',
        qrels={"test": "q1\td1\t1\n\n"},
    )
    assert load_beir(root, "test").qrels == {"q1": {"d1": 1}}


def test_load_beir_values_are_read_only(tiny: Path) -> None:
    loaded = load_beir(tiny, "test")
    with pytest.raises(TypeError):
        loaded.qrels["q1"]["d3"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        loaded.docs[0].metadata["date"] = "2000"  # type: ignore[index]


def test_load_beir_missing_folder_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="not a folder"):
        load_beir(tmp_path / "absent", "test")


def test_load_beir_missing_corpus_raises_not_found(tiny: Path) -> None:
    (tiny / "corpus.jsonl").unlink()
    with pytest.raises(NotFound, match=r"has no corpus\.jsonl") as caught:
        load_beir(tiny, "test")
    assert caught.value.hint is not None


def test_load_beir_unknown_split_lists_splits_found(tiny: Path) -> None:
    with pytest.raises(NotFound, match=r"no split 'dev' .*splits found: test, train"):
        load_beir(tiny, "dev")


def test_load_beir_without_any_qrels_says_so(tmp_path: Path) -> None:
    root = write_set(tmp_path / "s", corpus=[], queries=[], qrels={})
    with pytest.raises(NotFound, match=r"splits found: none"):
        load_beir(root, "test")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"_id": "d2", "text": ', "line 2: Expecting value"),
        ('["d2", "text"]', "line 2: expected a JSON object, got list"),
        ('{"text": "no id"}', "line 2: missing '_id'"),
        ('{"_id": 7, "text": "x"}', "line 2: '_id' must be a string, got int"),
        ('{"_id": "d2", "text": "x", "metadata": []}', "line 2: 'metadata' must be an object"),
        ('{"_id": "d1", "text": "again"}', "line 2: id 'd1' already used on line 1"),
    ],
)
def test_load_beir_malformed_corpus_line_names_file_and_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    root = write_set(
        tmp_path / "s",
        corpus='{"_id": "d1", "text": "ok"}\n' + line + "\n",
        queries=[],
        qrels={"test": HEADER},
    )
    with pytest.raises(InvalidInput) as caught:
        load_beir(root, "test")
    assert f"corpus.jsonl: {problem}" in caught.value.message


def test_load_beir_non_utf8_line_names_its_line(tmp_path: Path) -> None:
    root = write_set(tmp_path / "s", corpus=[], queries=[], qrels={"test": HEADER})
    bad_byte = b'{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "\xff"}\n'
    (root / "queries.jsonl").write_bytes(bad_byte)
    with pytest.raises(InvalidInput, match=r"queries\.jsonl: line 2: not UTF-8"):
        load_beir(root, "test")


def test_load_beir_non_string_class_is_rejected(tmp_path: Path) -> None:
    root = write_set(
        tmp_path / "s",
        corpus=[],
        queries=[{"_id": "q1", "text": "a", "metadata": {"class": 3}}],
        qrels={"test": HEADER + "q1\td1\t1\n"},
    )
    with pytest.raises(InvalidInput, match=r"line 1: 'class' must be a string"):
        load_beir(root, "test")


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ("q1\td1\n", "line 2: expected 3 tab-separated fields, got 2"),
        ("q1\td1\thigh\n", "line 2: score 'high' is not an integer"),
        ("\td1\t1\n", "line 2: empty query id or corpus id"),
        ("q1\td1\t1\nq1\td1\t2\n", "line 3: doc 'd1' is judged twice for query 'q1'"),
    ],
)
def test_load_beir_malformed_qrels_row_names_file_and_line(
    tmp_path: Path, rows: str, problem: str
) -> None:
    root = write_set(tmp_path / "s", corpus=[], queries=[], qrels={"test": HEADER + rows})
    with pytest.raises(InvalidInput) as caught:
        load_beir(root, "test")
    assert f"test.tsv: {problem}" in caught.value.message


# --- the shipped golden set -------------------------------------------------------------


@pytest.fixture(scope="module")
def golden() -> BeirSet:
    return load_beir(GOLDEN_SET, "test")


def test_golden_set_loads_every_query_including_abstentions(golden: BeirSet) -> None:
    lines = (GOLDEN_SET / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(golden.queries) == len(lines)
    assert 60 <= len(golden.docs) <= 90


def test_golden_set_covers_each_class_at_least_six_times(golden: BeirSet) -> None:
    counts = Counter(query.query_class for query in golden.queries)
    assert set(counts) == set(GOLDEN_CLASSES)
    assert min(counts.values()) >= 6


def test_golden_set_qrels_reference_existing_docs(golden: BeirSet) -> None:
    doc_ids = {doc.id for doc in golden.docs}
    dangling = {(q, d) for q, rels in golden.qrels.items() for d in rels if d not in doc_ids}
    assert dangling == set()


def test_golden_set_only_abstentions_lack_relevant_docs(golden: BeirSet) -> None:
    for query in golden.queries:
        relevant = [d for d, grade in golden.qrels[query.id].items() if grade > 0]
        assert (query.query_class == "abstention") == (not relevant), query.id
        assert query.expects_none == (query.query_class == "abstention"), query.id


def test_golden_set_evidence_occurs_in_exactly_one_judged_doc(golden: BeirSet) -> None:
    citations = [query for query in golden.queries if query.query_class == "citation"]
    for query in citations:
        evidence = query.metadata["evidence"]
        holders = [doc.id for doc in golden.docs if evidence in doc.text]
        assert len(holders) == 1, (query.id, holders)
        assert golden.qrels[query.id].get(holders[0], 0) > 0, query.id


def test_golden_set_never_judges_retracted_or_speculative_docs(golden: BeirSet) -> None:
    flags = ("retracted", "speculative")
    flagged = {doc.id for doc in golden.docs if any(doc.metadata.get(f) for f in flags)}
    judged = {d for rels in golden.qrels.values() for d, grade in rels.items() if grade > 0}
    assert flagged, "the golden set must contain retracted and speculative docs"
    assert flagged & judged == set()


def test_golden_set_time_bound_answers_predate_as_of(golden: BeirSet) -> None:
    dates = {doc.id: doc.metadata["date"] for doc in golden.docs}
    for query in golden.queries:
        if query.query_class == "time_bound":
            as_of = query.metadata["as_of"]
            assert all(dates[d] <= as_of for d in golden.qrels[query.id]), query.id


def test_golden_set_supersedes_names_older_docs(golden: BeirSet) -> None:
    dates = {doc.id: doc.metadata["date"] for doc in golden.docs}
    for doc in golden.docs:
        for older in doc.metadata.get("supersedes", []):
            assert dates[older] < dates[doc.id], (doc.id, older)
