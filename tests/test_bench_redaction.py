"""``kb-mcp bench redaction`` (issue 20): the rules over real-looking text, rule by rule,
with every line the generic rule changed shown for a person to judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kb_mcp.bench.redaction import GENERIC, run

PROSE = "# Guide\n\nThe cache key is derived from the request path.\n" * 50
CODE = 'def f(api_key):\n    return api_key\n\nSALT = "x"\n' * 50


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "pkg").mkdir(parents=True)
    (folder / "guide.md").write_text(PROSE)
    (folder / "pkg" / "mod.py").write_text(CODE)
    (folder / "pkg" / "notes.txt").write_text(
        "hmacSalt := Gs9Zq4Lm7Wx2Kp5Rn8Yv\npassword=hunter2\n"
    )
    (folder / "pkg" / "image.png").write_bytes(b"\x89PNG password=hunter2")
    return folder


def test_bench_redaction_counts_lines_by_rule_and_lists_the_generic_ones(tmp_path: Path) -> None:
    """issue 20: the generic rule's line is listed with its file; the assignment counted."""
    report = run([_folder(tmp_path)], megabytes=10)
    assert report.files == 3  # the PNG is not one of the suffixes read
    assert report.lines_by_rule == {"values.ASSIGNMENT": 1, GENERIC: 1}
    [(path, line)] = report.generic_samples
    assert path.endswith("notes.txt") and line == "hmacSalt := [REDACTED:secret]"
    assert report.per_mb(GENERIC) > 0


def test_bench_redaction_command_prints_the_table_and_writes_json(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 20: the command reproduces the figure in docs/security.md."""
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "-m", "kb_mcp", "bench", "redaction", str(_folder(tmp_path)),
         "--mb", "1", "--json", str(out)],
        env=child_env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "generic.redact_generated_values" in done.stdout
    assert "hmacSalt := [REDACTED:secret]" in done.stdout
    assert json.loads(out.read_text())["lines_by_rule"][GENERIC] == 1
