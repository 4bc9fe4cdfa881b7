"""``python -m kb_mcp.bench.reader_stages`` (issue 22): the reader path's CPU per stage, and
per-file digests of each stage's output to compare a change's before and after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kb_mcp.bench import reader_stages


def _folder(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        "import os\n\n\ndef load(path):\n    return os.environ[path]\n", encoding="utf-8"
    )
    (root / "notes.md").write_text(
        "# Deploy\n\nDB_PASSWORD=hunter2secret\n\nThe heron nests by the estuary.\n",
        encoding="utf-8",
    )
    (root / "page.html").write_text(
        "<html><head><title>Guide</title></head><body><h1>Guide</h1><p>Text.</p></body></html>",
        encoding="utf-8",
    )
    return root


def test_reader_stages_times_each_stage_and_digests_each_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "corpus")

    seconds, digests = reader_stages.measure(folder)

    assert list(seconds) == ["convert", "redact", "chunk", "index"]
    assert all(spent >= 0 for spent in seconds.values())
    assert sorted(digests) == ["notes.md", "page.html", "src/app.py"]
    assert all(sorted(d) == ["chunk", "convert", "index", "redact"] for d in digests.values())
    assert reader_stages.measure(folder)[1] == digests  # the same inputs, the same outputs


def test_reader_stages_digests_change_when_a_stage_output_changes(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "corpus")
    before = reader_stages.measure(folder)[1]

    (folder / "notes.md").write_text(
        "# Deploy\n\nDB_PASSWORD=other9secret\n\nThe heron nests by the estuary.\n",
        encoding="utf-8",
    )
    after = reader_stages.measure(folder)[1]

    # the secret differs, its redaction does not: only the converted text changed
    assert after["notes.md"]["convert"] != before["notes.md"]["convert"]
    assert after["notes.md"]["redact"] == before["notes.md"]["redact"]
    assert after["src/app.py"] == before["src/app.py"]


def test_reader_stages_command_prints_the_figures_and_writes_the_digests(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "corpus")
    out = tmp_path / "digests.json"

    run = subprocess.run(
        [sys.executable, "-m", "kb_mcp.bench.reader_stages", str(folder), "--digests", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )

    assert run.stdout.startswith("3 files; CPU convert ")
    assert sorted(json.loads(out.read_text(encoding="utf-8"))) == [
        "notes.md",
        "page.html",
        "src/app.py",
    ]
