"""How the ``kb-mcp`` command fails: one clear line on stderr and an exit code, never a
traceback unless ``--debug`` asks for it (issue 7 item 9: ``kb-mcp sync`` printed one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kb_mcp.cli.main import INTERNAL_ERROR_EXIT, internal_error_line


def _kb(child_env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args],
        env=child_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_home_that_is_a_file_is_bad_input_with_a_hint(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("hello")
    done = _kb(child_env, "--home", str(not_a_folder), "list")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"cannot use {not_a_folder} as the library folder" in done.stderr
    assert "hint: pass --home DIR" in done.stderr
    assert not_a_folder.read_text() == "hello"


def test_internal_error_line_is_one_redacted_line() -> None:
    secret = "AKIAIOSFODNN7EXAMPLE1"[:20]
    line = internal_error_line(RuntimeError(f"boom\nkey {secret} in\n" + "x" * 1000))
    assert "\n" not in line
    assert secret not in line
    assert line.startswith("kb-mcp: internal error (RuntimeError: boom key ")
    assert "--debug" in line
    assert len(line) < 450
    assert INTERNAL_ERROR_EXIT == 70
