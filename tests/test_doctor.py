"""kb-mcp doctor: every check is reported, a failing one sets the exit code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from kb_mcp.library import Library
from kb_mcp.settings import Settings


def doctor(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", "doctor", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_doctor_passes_on_a_healthy_library_and_lists_every_setting(tmp_path: Path) -> None:
    with Library(Settings(home=tmp_path / "home")) as library:
        library.writing.add_document("Note", "the kestrel hovers", "n://1", by_agent=False)
    result = doctor(tmp_path / "home")
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names[:3] == ["home", "database", "keyword index"]
    assert all(c["ok"] for c in report["checks"])
    assert {"allow_agent_writes", "search_top_k", "folders"} <= set(report["settings"])


def test_doctor_fails_when_a_source_folder_is_gone(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nthe heron\n")
    with Library(Settings(home=tmp_path / "home")) as library:
        library.folders.add_folder(notes, "notes")
        library.folders.sync()
    shutil.rmtree(notes)
    result = doctor(tmp_path / "home")
    assert result.returncode == 1
    [check] = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "source notes"]
    assert not check["ok"] and "missing" in check["detail"]


def test_doctor_shows_the_reranker_and_fails_one_chosen_that_cannot_run(tmp_path: Path) -> None:
    """issue 21: the reranker check, in the JSON too: none by default; an onnx folder
    without a model fails the check (and the exit code) with what is missing."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env["KB_MCP_EMBEDDER"] = "none"
    (tmp_path / "empty").mkdir()

    def reranker_check(**extra: str) -> tuple[int, dict]:
        done = subprocess.run(
            [sys.executable, "-m", "kb_mcp", "doctor", "--json", "--home", str(tmp_path / "h")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, **extra},
        )
        checks = json.loads(done.stdout)["checks"]
        return done.returncode, next(c for c in checks if c["name"] == "reranker")

    code, check = reranker_check()
    assert code == 0 and check["ok"]
    assert check["detail"] == "none (from the default): results in the ranking model's order"
    code, check = reranker_check(
        KB_MCP_RERANKER="onnx", KB_MCP_RERANKER_MODEL=str(tmp_path / "empty")
    )
    assert code == 1 and not check["ok"]
    assert check["detail"].startswith("onnx (from $KB_MCP_RERANKER): NOT available (the reranker")
    assert "has no model.onnx and no tokenizer.json" in check["detail"]
