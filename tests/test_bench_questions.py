"""``kb-mcp bench questions``: a folder corpus, questions with gold files, file-level scores.

A tiny corpus of two project folders goes through the real CLI (register, sync, search);
the scores are checked exactly. The shipped real-corpus set is checked for shape only:
its corpus (1,295 files of public projects) is not in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kb_mcp.bench.questions import (
    REAL_CORPUS_SET,
    Answer,
    Question,
    load_questions,
    score_answers,
)
from kb_mcp.errors import InvalidInput, NotFound


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tiny_corpus(root: Path) -> Path:
    _write(
        root / "alpha" / "docs" / "retries.md",
        "# Retrying connections\n\nThe transport retries a failed connection attempt.\n",
    )
    _write(
        root / "alpha" / "tests" / "test_retries.py",
        "def test_transport_retries_a_failed_connection():\n    assert retries == 3\n",
    )
    _write(
        root / "beta" / "README.md",
        "# Beta\n\nBeta renders spreadsheets as HTML tables for the browser.\n",
    )
    for n in range(12):  # unrelated pages, so bm25's idf weighs the query's words
        _write(root / "beta" / "docs" / f"page-{n}.md", f"# Page {n}\n\nColours and shapes.\n")
    return root


def _question_set(path: Path) -> Path:
    rows = [
        {
            "id": "q1",
            "question": "how does the transport retry a failed connection",
            "gold": ["alpha/docs/retries.md"],
            "class": "doc",
            "split": "tune",
        },
        {
            "id": "q2",
            "question": "render a spreadsheet as an html table",
            "gold": ["beta/README.md"],
            "class": "doc",
            "split": "test",
        },
        {
            "id": "q3",
            "question": "quantum chromodynamics lattice gauge",
            "gold": [],
            "class": "abstention",
            "split": "test",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_bench_questions_cli_scores_a_folder_corpus_and_writes_the_json(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    corpus = _tiny_corpus(tmp_path / "corpus")
    questions = _question_set(tmp_path / "questions.jsonl")
    out = tmp_path / "report.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "kb_mcp",
            "bench",
            "questions",
            "--set",
            str(questions),
            "--corpus",
            str(corpus),
            "--mode",
            "keyword",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "hit@1" in run.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["metrics"] == {
        "hit@1": 1.0,
        "hit@3": 1.0,
        "mrr@10": 1.0,
        "n": 2,
        "abstained": 1.0,
        "false_empty": 0.0,
        "absent_queries": 1,
    }
    by_id = {q["id"]: q for q in report["questions"]}
    assert by_id["q1"]["gold_rank"] == 1
    top = [t["path"] for t in by_id["q1"]["top"]]
    assert top[0] == "alpha/docs/retries.md"
    assert "alpha/tests/test_retries.py" in top
    assert by_id["q3"]["top"] == []
    assert by_id["q3"]["reason"]


def _answer(gold: tuple[str, ...], ranked: tuple[str, ...]) -> Answer:
    question = Question("q", "text", gold, "doc" if gold else "abstention", "test")
    return Answer(question, ranked, (), None, 1.0)


def test_score_answers_counts_file_level_hits_and_empty_answers() -> None:
    answers = [
        _answer(("a.md",), ("a.md", "b.md")),  # rank 1
        _answer(("a.md", "c.md"), ("b.md", "x.py", "c.md")),  # rank 3
        _answer(("a.md",), ("b.md",) * 1 + tuple(f"f{i}" for i in range(12))),  # missed
        _answer(("a.md",), ()),  # false empty
        _answer((), ()),  # abstained
        _answer((), ("noise.md",)),  # noise counts as failure
    ]
    scores = score_answers(answers)
    assert scores.n == 4
    assert scores.hit1 == pytest.approx(1 / 4)
    assert scores.hit3 == pytest.approx(2 / 4)
    assert scores.mrr10 == pytest.approx((1 + 1 / 3) / 4)
    assert scores.false_empty == pytest.approx(1 / 4)
    assert scores.abstained == pytest.approx(1 / 2)
    assert scores.n_absent == 2


def test_load_questions_filters_by_split(tmp_path: Path) -> None:
    path = _question_set(tmp_path / "q.jsonl")
    assert [q.id for q in load_questions(path, "tune")] == ["q1"]
    assert [q.id for q in load_questions(path, "test")] == ["q2", "q3"]
    assert len(load_questions(path)) == 3


def test_load_questions_names_the_line_that_is_not_a_question(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "q1", "question": "x", "gold": "a.md", "class": "doc"}\n')
    with pytest.raises(InvalidInput, match=r"q\.jsonl:1: not a question \(gold must be"):
        load_questions(path)


def test_load_questions_refuses_an_unknown_split_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown split 'dev'"):
        load_questions(REAL_CORPUS_SET, "dev")
    with pytest.raises(NotFound):
        load_questions(tmp_path / "absent.jsonl")


def test_real_corpus_set_has_its_documented_shape() -> None:
    """bench/realcorpus/README.md: 60 questions, these classes, a 30 / 30 split."""
    questions = load_questions(REAL_CORPUS_SET)
    assert len({q.id for q in questions}) == len(questions) == 60
    assert Counter(q.question_class for q in questions) == {
        "doc": 42,
        "code": 4,
        "test": 4,
        "changelog": 4,
        "abstention": 6,
    }
    assert Counter(q.split for q in questions) == {"tune": 30, "test": 30}
    for q in questions:
        assert (q.question_class == "abstention") == (not q.gold)
        assert all(not g.startswith("/") and ".." not in g for g in q.gold)
