"""The ``onnx`` reranker (issue 21): a cross-encoder folder the user names, read as one.

Every model here is a real ONNX file run by onnxruntime, built by ``rerank_models.py``
so that a passage's score is the number of times it says ``kiwi``: a loader that pairs,
masks, batches or truncates wrongly gets other numbers. The library tests use real
``kb.db`` files in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rerank_models import cross_encoder

from kb_mcp.errors import InvalidInput
from kb_mcp.library import Library
from kb_mcp.rerank.base import Passage
from kb_mcp.rerank.factory import build_reranker
from kb_mcp.rerank.onnx import OnnxReranker
from kb_mcp.settings import Settings

QUESTION = "which kiwi grows"  # a kiwi the model must not count: it is the question's

# Mixed lengths, so batches of two are padded, and a pad counted (weight 5) would lift the
# short passages above the ones that say kiwi.
PASSAGES = [
    Passage("a", "notes", "plum"),
    Passage("b", "notes", "kiwi kiwi fig tree grows plum plum plum"),
    Passage("c", "notes", "fig kiwi"),
    Passage("d", "notes", "fig tree grows plum plum fig tree grows plum plum fig"),
    Passage("e", "notes", "kiwi"),
]
KIWIS = [0.0, 2.0, 1.0, 0.0, 1.0]


def test_scores_count_only_the_passage_segment_under_the_mask_in_input_order(
    tmp_path: Path,
) -> None:
    """Pairs encoded as (question, passage) with segment ids, padding masked out, and
    the scores of length-sorted batches put back in the order of the passages."""
    reranker = OnnxReranker(str(cross_encoder(tmp_path / "model")), batch_size=2)
    assert reranker.scores(QUESTION, PASSAGES) == KIWIS
    assert OnnxReranker(str(tmp_path / "model"), batch_size=8).scores(QUESTION, PASSAGES) == KIWIS
    assert reranker.availability().ok


def test_two_classes_score_by_the_positive_one(tmp_path: Path) -> None:
    reranker = OnnxReranker(str(cross_encoder(tmp_path / "model", classes=2)), batch_size=3)
    assert reranker.scores(QUESTION, PASSAGES) == [2 * k for k in KIWIS]  # logit1 - logit0


def test_a_model_without_segment_ids_is_fed_none(tmp_path: Path) -> None:
    """Without ``token_type_ids`` the tiny model counts the question's kiwi too: +1 each."""
    reranker = OnnxReranker(str(cross_encoder(tmp_path / "model", segments=False)))
    assert reranker.scores(QUESTION, PASSAGES) == [k + 1 for k in KIWIS]


def test_pairs_are_cut_to_max_tokens(tmp_path: Path) -> None:
    """A kiwi past the cut is not read; the one inside it is."""
    reranker = OnnxReranker(str(cross_encoder(tmp_path / "model")), max_tokens=12)
    far = Passage("far", "notes", "plum " * 20 + "kiwi")
    near = Passage("near", "notes", "kiwi " + "plum " * 20)
    assert reranker.scores(QUESTION, [far, near]) == [0.0, 1.0]


def test_a_folder_without_the_files_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"has no model\.onnx and no tokenizer\.json"):
        OnnxReranker(str(tmp_path))
    cross_encoder(tmp_path / "half", tokenizer=False)
    half = Settings(home=tmp_path, reranker="onnx", reranker_model=str(tmp_path / "half"))
    with pytest.raises(InvalidInput, match=r"has no tokenizer\.json") as raised:
        build_reranker(half)
    assert raised.value.code == "invalid_input"
    with pytest.raises(InvalidInput, match="reranker_model is empty"):
        build_reranker(Settings(home=tmp_path, reranker="onnx"))


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ({"extra_input": "pixel_values"}, "it takes attention_mask, input_ids, pixel_values"),
        ({"classes": 3}, "its output logits has shape"),
    ],
)
def test_a_model_that_is_not_a_cross_encoder_is_refused(
    tmp_path: Path, shape: dict, said: str
) -> None:
    """Refused at load with what it is, and remembered: availability says so after."""
    reranker = OnnxReranker(str(cross_encoder(tmp_path / "model", **shape)))
    with pytest.raises(InvalidInput, match=said):
        reranker.scores(QUESTION, PASSAGES)
    assert not reranker.availability().ok and said in (reranker.availability().reason or "")
    with pytest.raises(InvalidInput, match=said):
        reranker.scores(QUESTION, PASSAGES)


FRUIT = {
    # The keyword leg ranks these by how often they say "fruit": kiwi's page last.
    "orchard.md": ("Orchard", "fruit fruit fruit from the plum and fig tree; fruit fruit"),
    "garden.md": ("Garden", "fruit fruit and a fig tree; fruit"),
    "kiwi.md": ("Kiwi", "kiwi kiwi kiwi: a fruit"),
}


def _fruit_library(home: Path, **settings: str) -> Library:
    library = Library(Settings(home=home, embedder="none", **settings))
    for name, (title, text) in FRUIT.items():
        library.writing.add_document(
            title, f"# {title}\n\n{text}\n", f"file:///{name}", by_agent=False
        )
    return library


def test_a_search_shows_the_rerankers_order_and_says_who_moved_each_hit(
    tmp_path: Path,
) -> None:
    model = cross_encoder(tmp_path / "model")
    with _fruit_library(tmp_path / "plain") as plain:
        fused = plain.lookup.search("fruit")
    assert [hit.title for hit in fused.hits][-1] == "Kiwi"
    with _fruit_library(tmp_path / "home", reranker="onnx", reranker_model=str(model)) as library:
        result = library.lookup.search("fruit")
        doctor = {check.name: check for check in library.health.report().checks}
    assert [hit.title for hit in result.hits] == ["Kiwi", *[h.title for h in fused.hits[:-1]]]
    assert result.reason is None
    kiwi = result.hits[0]
    # Its title, its heading and the three in its text: five kiwis.
    assert kiwi.adjustments[-1].reason == "reranked by onnx model (score 5): #3 → #1"
    assert kiwi.adjustments[-1].factor > 1
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)  # the order is still the scores'
    assert doctor["reranker"].ok and "onnx model" in doctor["reranker"].detail


def test_a_broken_reranker_leaves_the_fused_order_with_the_reason(tmp_path: Path) -> None:
    """An empty folder: the search answers in the fused order and says why; doctor fails
    the check with the same words."""
    (tmp_path / "empty").mkdir()
    with _fruit_library(tmp_path / "plain") as plain:
        fused = plain.lookup.search("fruit")
    settings = {"reranker": "onnx", "reranker_model": str(tmp_path / "empty")}
    with _fruit_library(tmp_path / "home", **settings) as library:
        result = library.lookup.search("fruit")
        doctor = {check.name: check for check in library.health.report().checks}
    assert [hit.doc for hit in result.hits] == [hit.doc for hit in fused.hits]
    assert result.reason is not None and result.reason.startswith("reranker skipped: the ")
    assert "has no model.onnx and no tokenizer.json" in result.reason
    assert not doctor["reranker"].ok
    assert "has no model.onnx" in doctor["reranker"].detail


def test_a_model_refused_at_load_leaves_the_fused_order_with_the_reason(tmp_path: Path) -> None:
    """The model is read before the search's deadline starts; one that is not a
    cross-encoder fails there, and the search still answers, saying why."""
    model = cross_encoder(tmp_path / "model", extra_input="pixel_values")
    with _fruit_library(tmp_path / "plain") as plain:
        fused = plain.lookup.search("fruit")
    with _fruit_library(tmp_path / "home", reranker="onnx", reranker_model=str(model)) as library:
        result = library.lookup.search("fruit")
    assert [hit.doc for hit in result.hits] == [hit.doc for hit in fused.hits]
    assert result.reason is not None
    assert result.reason.startswith(f"reranker skipped: {model / 'model.onnx'} is not a cross")


def test_kb_mcp_search_takes_the_reranker_flags(tmp_path: Path) -> None:
    """``--reranker onnx --reranker-model FOLDER`` on the command line, over a library
    built without them."""
    model = cross_encoder(tmp_path / "model")
    _fruit_library(tmp_path / "home").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    command = [sys.executable, "-m", "kb_mcp", "search", "fruit", "--json"]
    command += ["--home", str(tmp_path / "home"), "--embedder", "none"]
    command += ["--reranker", "onnx", "--reranker-model", str(model)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert results[0]["title"] == "Kiwi"
    assert results[0]["adjustments"][-1]["reason"].startswith("reranked by onnx model")
