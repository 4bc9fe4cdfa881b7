"""The retrieval bench on a PostgreSQL library (issue 24): the same command on either store.

``kb-mcp bench retrieval --store URL`` builds its library on the server through the
library's own write path (a folder source, synced) and asks every question through the
engine the MCP tool uses; ``--runs`` keeps each question's answer, so two libraries built
from the same folder can be compared question by question (``bench/store_compare.py``).
The issue's target for keyword mode is the same top 10 on both stores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kb_mcp.bench import perf
from kb_mcp.bench.beir import GOLDEN_SET
from kb_mcp.bench.retrieval import run_retrieval_bench
from kb_mcp.bench.store_compare import agreement, read_runs
from kb_mcp.settings import Settings, Store


def _beir(folder: Path, docs: list[tuple[str, str]], queries: list[str]) -> Path:
    """A BEIR-layout set: documents d0, d1 …, questions q0, q1 …, each answered by d<i>."""
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": f"d{i}", "title": title, "text": text} for i, (title, text) in enumerate(docs)
    ]
    asked = [{"_id": f"q{i}", "text": text} for i, text in enumerate(queries)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in asked) + "\n")
    qrels = "".join(f"q{i}\td{i}\t1\n" for i in range(len(queries)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def _tiny_beir(folder: Path) -> Path:
    docs = [
        ("Signing keys", "Rotate the signing key every 90 days."),
        ("Deploy freeze", "No deploys on Fridays after 15:00."),
        ("Key storage", "Signing keys live in the vault only."),
    ]
    return _beir(folder, docs, ["rotate the signing key", "deploys"])


def _bench_cli(dataset: Path, home: Path, runs: Path, *store: str) -> str:
    command = [sys.executable, "-m", "kb_mcp", "bench", "retrieval", *store, "--home", str(home)]
    flags = ["--dataset", str(dataset), "--mode", "keyword", "--embedder", "none"]
    run = subprocess.run(
        [*command, *flags, "--runs", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_bench_cli_runs_on_a_postgresql_store_and_answers_as_on_sqlite(
    tmp_path: Path, postgres_url: str
) -> None:
    dataset = _tiny_beir(tmp_path / "tiny")
    on_sqlite = _bench_cli(dataset, tmp_path / "sqlite", tmp_path / "sqlite.runs")
    on_postgres = _bench_cli(
        dataset, tmp_path / "postgres", tmp_path / "postgres.runs", "--store", postgres_url
    )
    assert not (tmp_path / "postgres" / "kb.db").exists()  # the library is on the server
    assert "tiny (test, mode keyword): 3 docs, 2 queries" in on_postgres
    assert on_sqlite.splitlines()[2] == on_postgres.splitlines()[2]  # the "all" metrics row
    sqlite, postgres = read_runs(tmp_path / "sqlite.runs"), read_runs(tmp_path / "postgres.runs")
    assert [a.ranked[0] for a in postgres.values()] == ["d0", "d1"]
    same = agreement(sqlite, postgres)
    assert (same.questions, same.different, same.max_score_difference) == (2, [], 0.0)


def test_the_golden_set_in_keyword_mode_ranks_alike_on_both_stores(
    tmp_path: Path, postgres_url: str
) -> None:
    """Every golden question's top 10 documents and scores, through the whole engine."""
    reports = [
        run_retrieval_bench(
            GOLDEN_SET,
            "test",
            mode="keyword",
            home=tmp_path / name,
            settings=Settings(home=tmp_path / name, embedder="none", store=store),
        )
        for name, store in (("sqlite", Store()), ("postgres", Store(postgres_url)))
    ]
    sqlite, postgres = ({r.query_id: r for r in report.runs} for report in reports)
    assert list(sqlite) == list(postgres)
    for question, want in sqlite.items():
        got = postgres[question]
        assert got.ranked[:10] == want.ranked[:10], question
        assert got.scores[:10] == want.scores[:10], question
    assert reports[0].metrics == reports[1].metrics


def test_the_perf_bench_builds_and_times_its_library_on_the_store_of_kb_mcp_store(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kb-mcp --store URL bench perf --hybrid``: the size's library on the server (the
    folder synced, stand-in vectors stored by the queue), timed in keyword and hybrid."""
    data = tmp_path / "eval-data"
    _beir(data / "scifact", [("Statins", "Statins lower cholesterol.")], ["statins cholesterol"])
    _beir(data / "nfcorpus-testsplit-preproc", [("", "green tea polyphenols")], ["green tea"])
    _beir(
        data / "cmrc2018-ctx",
        [("战国无双", "《战国无双3》于2010年发售。")],
        ["战国无双3何时发售？"],
    )
    monkeypatch.setenv("KB_MCP_STORE", postgres_url)
    workdir = tmp_path / "kept"
    [(report, _)] = perf.run_perf_bench(
        [12], data=data, startup=False, workdir=workdir, hybrid=True
    )
    assert not (workdir / "12" / "home" / "kb.db").exists()  # the library is on the server
    assert report.perf is not None and report.perf.chunks == 12 and report.perf.db_mb > 0
    ran = [(r.queries, r.engine) for r in report.searches]
    assert ran == [
        ("scifact", "keyword"),
        ("nfcorpus", "keyword"),
        ("cmrc2018", "keyword"),
        ("scifact", "hybrid"),
        ("nfcorpus", "hybrid"),
    ]
