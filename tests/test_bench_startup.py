"""``kb-mcp bench startup`` measures what issue 10 asks for, on a real server over stdio."""

from __future__ import annotations

import json
from pathlib import Path

from kb_mcp.bench.startup import build_corpus, run_startup_bench, startup_table


def eval_data(root: Path) -> Path:
    """A tiny BEIR-layout pair of sets: scifact-like notes and cosqa-like code."""
    for name, docs in {
        "scifact": [{"_id": f"s{i}", "title": f"Note {i}", "text": f"cells {i}"} for i in range(6)],
        "cosqa": [
            {"_id": f"c{i}", "title": "", "text": f"def f{i}():\n    return {i}"} for i in range(3)
        ],
    }.items():
        (root / name).mkdir(parents=True)
        lines = "\n".join(json.dumps(d) for d in docs)
        (root / name / "corpus.jsonl").write_text(lines + "\n", encoding="utf-8")
    return root


def test_bench_startup_corpus_mixes_notes_and_code_then_tops_up(tmp_path: Path) -> None:
    written = build_corpus(tmp_path / "files", eval_data(tmp_path / "eval"), 8)
    names = sorted(p.name for p in (tmp_path / "files").rglob("*.*"))
    assert written == 8
    assert sum(n.endswith(".py") for n in names) == 3 and sum(n.endswith(".md") for n in names) == 5


def test_bench_startup_reports_every_figure(tmp_path: Path) -> None:
    """Issue 10: start-up, re-sync and freshness figures come from one command."""
    figures = run_startup_bench(tmp_path / "home", eval_data(tmp_path / "eval"), 9, runs=1)
    assert figures.files == 9
    assert 0 < figures.initialize_s <= figures.first_search_s
    for value in (figures.resync_s, figures.edit_s, figures.add_s, figures.delete_s):
        assert value is not None and value >= 0
    assert "first search result" in startup_table(figures)
