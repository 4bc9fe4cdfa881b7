"""``bench/embed_perf.py``: the vector figures of ``kb-mcp bench perf`` (issue 8, "Speed").

The bench's numbers are only as good as its set-up: real text repeated with variation,
queries answered from vectors embedded beforehand (never a hidden model call), stand-in
vectors that are deterministic unit vectors, and ``kb-mcp add`` timed as a user runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kb_mcp.bench import corpus, embed_perf
from kb_mcp.errors import InvalidInput
from tests.hash_embedder import HashEmbedder

ABSTRACTS = [
    ("Cache eviction", "Caches evict old entries. The LRU policy is common. Sizes vary."),
    ("Vector search", "Nearest neighbours are found by cosine. Codes speed it up. Rescore."),
    ("Sleep and memory", "Sleep consolidates memory. Deprivation harms recall. Naps help."),
    ("", "An untitled abstract about kidney function. It filters blood. Water matters."),
]


def _write_set(folder: Path, records: list[dict], queries: list[str]) -> None:
    folder.mkdir(parents=True)
    lines = [json.dumps(r) for r in records]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    query_lines = [json.dumps({"_id": str(i), "text": q}) for i, q in enumerate(queries)]
    (folder / "queries.jsonl").write_text("\n".join(query_lines) + "\n", encoding="utf-8")


@pytest.fixture
def eval_data(tmp_path: Path) -> Path:
    """A tiny eval-data folder in BEIR layout: two prose sets and a code set."""
    root = tmp_path / "eval-data"
    docs = [{"_id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(ABSTRACTS)]
    queries = ["how does lru eviction work", "what does sleep do to memory", "cosine codes"]
    _write_set(root / "scifact", docs[:2], queries)
    _write_set(root / "nfcorpus-testsplit-preproc", docs[2:], queries[:1])
    code = [{"_id": "c0", "title": "", "text": "def add(a, b):\n    return a + b"}]
    _write_set(root / "cosqa", code, ["add two numbers"])
    return root


def test_variant_copies_are_real_text_and_all_differ(eval_data: Path) -> None:
    """Copy 0 is the abstract itself; later copies reuse its sentences but never repeat."""
    docs = embed_perf.prose(eval_data)
    assert [d.title for d in docs][:2] == ["Cache eviction", "Vector search"]
    assert corpus.variant(docs, 1) == docs[1]
    texts = [corpus.variant(docs, n).text for n in range(40)]
    assert len(set(texts)) == 40
    copy = corpus.variant(docs, len(docs))  # abstract 0, copy 1
    assert set(corpus.sentences(docs[0].text)) <= set(corpus.sentences(copy.text))


def test_write_mixed_folder_writes_prose_then_code(eval_data: Path, tmp_path: Path) -> None:
    """Abstracts become Markdown files with their title as heading, then code as .py."""
    folder = tmp_path / "folder"
    written = embed_perf.write_mixed_folder(folder, eval_data, 5)
    files = sorted(folder.rglob("*.*"))
    assert sum(p.stat().st_size for p in files) == written
    assert [p.suffix for p in files].count(".py") == 1
    assert (folder / "part000" / "doc-0.md").read_text().startswith("# Cache eviction\n")
    with pytest.raises(InvalidInput, match="at most 5 real files"):
        embed_perf.write_mixed_folder(tmp_path / "more", eval_data, 6)


def test_missing_eval_data_says_which_file(tmp_path: Path) -> None:
    """A wrong --eval-data names the file it looked for and the flag to fix it."""
    with pytest.raises(InvalidInput, match="no scifact corpus at") as caught:
        embed_perf.prose(tmp_path)
    assert "--eval-data" in (caught.value.hint or "")


def test_standin_vectors_are_deterministic_unit_vectors() -> None:
    """The same text gives the same vector, other texts other ones, all of unit length."""
    first = corpus.standin_vectors(["a", "b", "a"], 384)
    assert first.shape == (3, 384) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first[0], first[2]) and not np.allclose(first[0], first[1])
    assert np.array_equal(corpus.standin_vectors(["b"], 384)[0], first[1])


def test_bench_embedder_refuses_a_query_not_embedded_beforehand() -> None:
    """A timed search must never call the model: an unknown query is an error."""
    real = HashEmbedder(dims=32)
    cache = {"known": real.embed(["known"], kind="query")[0]}
    bench = embed_perf.BenchEmbedder(real.signature, cache)
    assert np.array_equal(bench.embed(["known"], kind="query")[0], cache["known"])
    assert bench.embed(["p1", "p2"]).shape == (2, 32)
    with pytest.raises(InvalidInput, match="not embedded beforehand"):
        bench.embed(["other"], kind="query")


def test_run_embed_perf_times_hybrid_search_on_model_and_derived_vectors(
    eval_data: Path,
) -> None:
    """One small run end to end: every library row is hybrid (no fallback), the small
    library is timed with the model's vectors and the stand-in's, and the table says
    that the query embedding is excluded and what the machine load was."""
    real = HashEmbedder(dims=32)
    report = embed_perf.run_embed_perf(
        eval_data, real, searches=3, bulk_chunks=30, real_chunks=4, rate_chunks=4, add_files=0
    )
    assert [row.vectors for row in report.searches] == ["model", "derived", "derived"]
    assert report.searches[0].chunks == report.searches[1].chunks
    assert report.searches[2].chunks >= round(30 / embed_perf.BULK_CHUNKS_PER_FILE)
    assert report.passages >= 3 and report.passages_per_s > 0
    assert report.add is None and report.searched == 3
    table = embed_perf.embed_perf_table(report)
    assert "EXCLUDES the query embedding" in table and "load average" in table


def test_run_add_times_the_cli_to_full_coverage(eval_data: Path, tmp_path: Path) -> None:
    """``kb-mcp add`` runs as a child process; its chunks and own peak RSS are reported."""
    folder = tmp_path / "folder"
    embed_perf.write_mixed_folder(folder, eval_data, 5)
    row = embed_perf.run_add(folder, tmp_path / "home", embedder="none", embed_model=None)
    assert row.files == 5 and row.chunks >= 5
    assert row.wall_s > 0 and row.peak_rss_mb > 10
    with pytest.raises(InvalidInput, match="kb-mcp add failed"):
        embed_perf.run_add(
            tmp_path / "absent", tmp_path / "home2", embedder="none", embed_model=None
        )
