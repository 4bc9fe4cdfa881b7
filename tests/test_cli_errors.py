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


def test_cli_output_closed_early_is_not_an_error(tmp_path: Path, child_env: dict[str, str]) -> None:
    """`kb-mcp read doc | head -1` printed "internal error (BrokenPipeError …)", exit 70."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "big.md").write_text("# Big\n" + "a line of text\n" * 20_000)
    home = tmp_path / "home"
    assert _kb(child_env, "--home", str(home), "add", str(folder), "--yes").returncode == 0
    reader = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "--home", str(home), "read", "big.md"],
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.readline().startswith(b"# Big")
    reader.stdout.close()
    assert reader.wait(timeout=60) == 0
    assert b"internal error" not in reader.stderr.read()


def test_cli_error_hint_naming_a_file_is_redacted(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """The CLI printed a "did you mean" hint with a token-named file in clear (MCP redacted
    it). A near miss (the wrong suffix) still gets the hint, redacted; the stored path is
    redacted too (issue 20 item 3), so nothing in clear is there to show."""
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / f"{token}.txt").write_text("hello\n")
    home = tmp_path / "home"
    assert _kb(child_env, "--home", str(home), "add", str(folder), "--yes").returncode == 0
    done = _kb(child_env, "--home", str(home), "read", token + ".md")
    assert done.returncode != 0
    assert "did you mean" in done.stderr
    assert token not in done.stderr
    assert "[REDACTED:github_token]" in done.stderr
