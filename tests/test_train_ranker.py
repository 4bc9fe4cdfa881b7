"""``kb-mcp bench train-ranker`` fits the ranking model from real searches and writes
weights the engine reads (issue 21)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kb_mcp.search import model as model_mod
from kb_mcp.search.features import NAMES


def train_ranker(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``kb-mcp bench train-ranker`` with its libraries under ``tmp_path``, keyword only."""
    command = [sys.executable, "-m", "kb_mcp", "bench", "train-ranker"]
    command += ["--homes", str(tmp_path / "homes"), "--embedder", "none", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_train_ranker_fits_weights_that_order_better_than_the_fused_ranking(
    tmp_path: Path,
) -> None:
    output = tmp_path / "ranker.json"
    examples = tmp_path / "examples"
    run = train_ranker(
        tmp_path, "--sets", "golden", "--output", str(output), "--examples", str(examples)
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(output.read_text(encoding="utf-8"))
    ranker = model_mod.parse(data)  # the engine can read what the trainer wrote
    assert data["features"] == list(NAMES)
    assert data["trained_on"] == ["golden"]
    assert ranker.abstains_from > 0
    summary = json.loads(run.stdout[: run.stdout.rindex("}") + 1])
    fused = summary["keyword"]["fused"]["golden"]["ndcg@10"]
    fitted = summary["keyword"]["model"]["golden"]["ndcg@10"]
    assert fitted > fused
    assert summary["keyword"]["model"]["golden"]["false_empty"] <= 0.02
    # The collected rows are kept per set: a second run reads them instead of searching.
    assert (examples / "golden-test.pkl").exists()


def test_train_ranker_names_a_missing_public_set(tmp_path: Path) -> None:
    run = train_ranker(
        tmp_path,
        "--sets",
        "scifact",
        "--eval-data",
        str(tmp_path / "nowhere"),
        "--output",
        str(tmp_path / "ranker.json"),
        timeout=120,
    )
    assert run.returncode != 0
    assert "training set scifact not found" in run.stderr
    assert not (tmp_path / "ranker.json").exists()


def test_train_ranker_leave_one_out_scores_each_set_by_a_model_fitted_without_it(
    tmp_path: Path,
) -> None:
    output = tmp_path / "ranker.json"
    run = train_ranker(
        tmp_path, "--sets", "golden,golden2", "--output", str(output), "--leave-one-out"
    )
    assert run.returncode == 0, run.stderr
    held = json.loads(run.stdout)["leave_one_set_out"]["keyword"]
    assert set(held) == {"golden", "golden2"}
    for scores in held.values():
        assert 0 < scores["ndcg@10"] <= 1 and 0 < scores["fused_ndcg@10"] <= 1
    assert not output.exists()  # measuring writes no weights
