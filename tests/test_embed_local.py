"""The ``local`` embedder with the real model (all-MiniLM-L6-v2 int8 from its PyPI package).

Guards: paraphrases rank above unrelated text, the answer's order is the input's, rows of
unit length, a batch (padded, length-sorted) gives what one-by-one calls give, empty and
huge texts, the cut at 128 word-pieces, Chinese text that the model cannot read still
gets vectors, one session shared by threads, lazy import (kb_mcp never loads onnxruntime
by itself), no file written under HOME (onnxruntime telemetry), and a missing runtime
reported as unavailable with a reason, never raised as ImportError (issue 8, Embedders).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kb_mcp.embed.base import Embedder
from kb_mcp.embed.local import DEFAULT_MODEL, DIMS, MAX_CHARS, LocalEmbedder, sorted_batches
from kb_mcp.errors import InvalidInput

MIXED = [
    "rolling back a deployment",
    "",
    "Configuring the logging format: set the handler's formatter to include the time, "
    "the level and the module name, then restart the service so the change applies. " * 3,
    "how do I undo the last release",
    "Indexes speed up lookups.",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    """One loaded model for the module (loading costs about a second)."""
    return LocalEmbedder()


def cosines(embedder: LocalEmbedder, query: str, passages: list[str]) -> np.ndarray:
    return embedder.embed(passages) @ embedder.embed([query], "query")[0]


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_local_embedder_implements_the_port(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    signature = embedder.signature
    assert (signature.provider, signature.model, signature.dims) == ("local", DEFAULT_MODEL, 384)
    assert (signature.max_chars, signature.prefixes) == (MAX_CHARS, "none")
    assert embedder.availability().ok


def test_local_paraphrase_ranks_above_unrelated_text(embedder: LocalEmbedder) -> None:
    scores = cosines(
        embedder,
        "how do I undo the last release",
        ["configuring the logging format", "rolling back a deployment"],
    )
    assert scores[1] > scores[0]


def test_local_neighbours_rank_first_for_each_question(embedder: LocalEmbedder) -> None:
    passages = [
        "rolling back a deployment to the previous version",
        "configuring the logging format and log levels",
        "creating an index on a database table to speed up queries",
        "the retry policy for failed HTTP requests, with exponential backoff",
    ]
    questions = [
        "revert the release that just went out",
        "change what the log lines look like",
        "my SQL lookups are slow",
        "what happens when a request to the server fails",
    ]
    matrix = embedder.embed(questions, "query") @ embedder.embed(passages).T
    assert list(matrix.argmax(axis=1)) == [0, 1, 2, 3]


def test_local_embed_returns_unit_float32_rows_in_input_order(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(MIXED)
    assert vectors.shape == (len(MIXED), DIMS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    order = [3, 0, 4, 2, 1]
    shuffled = embedder.embed([MIXED[i] for i in order])
    np.testing.assert_allclose(shuffled, vectors[order], atol=1e-5)


def test_local_batches_equal_one_by_one_calls() -> None:
    small_batches = LocalEmbedder(batch_size=2)  # three runs, each padded differently
    together = small_batches.embed(MIXED)
    alone = np.stack([small_batches.embed([text])[0] for text in MIXED])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_local_query_and_passage_are_the_same_computation(embedder: LocalEmbedder) -> None:
    np.testing.assert_array_equal(
        embedder.embed(MIXED[:2], "query"), embedder.embed(MIXED[:2], "passage")
    )


def test_local_empty_input_and_empty_text(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]).shape == (0, DIMS)
    vectors = embedder.embed(["", "   "])
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_local_long_text_is_cut_at_128_word_pieces(embedder: LocalEmbedder) -> None:
    head = "The deployment pipeline builds, tests and ships each commit to staging. " * 12
    first, second = embedder.embed(
        [head + "Rollbacks are manual. " * 5_000, head + "Nothing about logging here. " * 5_000]
    )
    # Both heads fill the 128 pieces, so what follows them is never read.
    np.testing.assert_allclose(first, second, atol=1e-6)
    short = embedder.embed(["Rollbacks are manual.", "Nothing about logging here."])
    assert short[0] @ short[1] < 0.99


def test_local_chinese_text_gets_vectors(embedder: LocalEmbedder) -> None:
    """all-MiniLM-L6-v2 cannot read Chinese (English WordPiece vocabulary): only no crash."""
    texts = ["如何回滚上一次发布", "配置日志格式", "数据库索引可以加快查询速度。" * 50]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, DIMS)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_local_one_session_serves_many_threads(embedder: LocalEmbedder) -> None:
    """Threads racing the first call load one session, then share it."""
    expected = embedder.embed(MIXED)
    fresh = LocalEmbedder()
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: fresh.embed(MIXED), range(4)))
    for answer in answers:
        np.testing.assert_allclose(answer, expected, atol=1e-6)


def test_local_refuses_bad_arguments(embedder: LocalEmbedder) -> None:
    with pytest.raises(InvalidInput, match="unknown local embedding model"):
        LocalEmbedder("bge-small-en-v1.5")
    with pytest.raises(InvalidInput, match="at least 1"):
        LocalEmbedder(threads=0)
    with pytest.raises(InvalidInput, match="kind"):
        embedder.embed(["x"], "document")  # type: ignore[arg-type]


def test_sorted_batches_group_by_length_and_cover_every_index() -> None:
    batches = sorted_batches([5, 1, 9, 1, 3], 2)
    assert batches == [[1, 3], [4, 0], [2]]


def test_local_import_loads_no_runtime_and_writes_nothing_under_home(tmp_path: Path) -> None:
    """Importing kb_mcp loads no onnxruntime; embedding leaves HOME as it was."""
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import sys, kb_mcp, kb_mcp.embed.local as local\n"
        "assert 'onnxruntime' not in sys.modules and 'tokenizers' not in sys.modules\n"
        "print(local.LocalEmbedder().embed(['hello']).shape)\n"
    )
    done = run_python(code, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384)"
    assert list(home.iterdir()) == []


def test_local_without_onnxruntime_is_unavailable_with_a_reason() -> None:
    """A missing runtime is a reason from availability() and EmbedderUnavailable from embed."""
    code = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None  # what a missing package looks like to import\n"
        "from kb_mcp.embed.base import EmbedderUnavailable\n"
        "from kb_mcp.embed.local import LocalEmbedder\n"
        "embedder = LocalEmbedder()\n"
        "print(embedder.availability())\n"
        "try:\n"
        "    embedder.embed(['x'])\n"
        "except EmbedderUnavailable as error:\n"
        "    print('unavailable:', error.render())\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert "ok=False" in done.stdout and "onnxruntime" in done.stdout
    assert "unavailable: the local embedder cannot run" in done.stdout
    assert "hint:" in done.stdout


def test_local_search_while_the_model_loads_in_background_answers_from_keywords(
    tmp_path: Path,
) -> None:
    """Issue 10 start-up: while the server loads the model (``load_in_background``), a
    hybrid search falls back to keyword and says why, instead of waiting past its
    deadline; once loaded, hybrid runs."""
    from kb_mcp.library import MODEL_LOADING, Library
    from kb_mcp.settings import Settings

    settings = Settings(home=tmp_path / "home", embedder="local")
    with Library(settings) as library:
        library.writing.add_document(
            "Restore", "# Restore\n\nRestore a backup with kb.\n", "t://r", by_agent=False
        )
        library.vectors.embed_pending()
    with Library(settings) as library:
        embedder = library.vectors.state().embedder
        assert isinstance(embedder, LocalEmbedder) and not embedder.loading()
        embedder.load_in_background()
        during = library.lookup.search("restore a backup", 5, "hybrid")
        assert (during.mode, during.fallback, during.reason) == (
            "keyword",
            "keyword",
            MODEL_LOADING,
        )
        assert during.hits  # keyword results, not an empty answer
        for _ in range(600):
            if not embedder.loading():
                break
            threading.Event().wait(0.05)
        after = library.lookup.search("restore a backup", 5, "hybrid")
        assert after.fallback is None and after.hits
