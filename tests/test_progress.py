"""Progress of the CLI's long phases (issue 22): rate and ETA on a terminal, plain lines
at most every few seconds when stderr is not one, a summary with the elapsed time.

Trigger: a real 4,062-file ``kb-mcp add`` printed nothing for 29 minutes when stderr was
not a terminal, and on a terminal its bar counted with no rate or ETA. The reporter's
clock is a plain function the tests set, so no test depends on the machine's speed; the
commands themselves run as real subprocesses on real folders, with stderr to a pipe (an
agent's shell) and to a pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ollama_server import serve_ollama

from kb_mcp.cli.progress import (
    EMBEDDING_PASSAGES,
    READING_FILES,
    PhaseProgress,
    duration_text,
    eta_text,
    rate_text,
)

CLI_TIMEOUT_S = 60


class SetClock:
    """A clock that says whatever time the test set last."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain(clock: SetClock, phase=EMBEDDING_PASSAGES) -> tuple[PhaseProgress, io.StringIO]:
    """A reporter writing plain lines (stderr not a terminal) to a buffer."""
    out = io.StringIO()
    return PhaseProgress(phase, stream=out, clock=clock, terminal=False, every=10), out


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


# --- the reporter, with a set clock ------------------------------------------------------


def test_plain_line_names_the_phase_and_gives_rate_and_time_left() -> None:
    clock = SetClock()
    progress, out = plain(clock)
    clock.now = 2.0
    progress(32, 30_760, "ollama:model")  # the first batch: no rate yet
    clock.now = 12.0
    progress(218, 30_760, "ollama:model")  # 186 more in 10 s: 18.6/s
    assert lines(out) == [
        "kb-mcp: embedding 32 / 30,760 passages",
        "kb-mcp: embedding 218 / 30,760 passages (18.6/s, about 27 min left)",
    ]


def test_plain_lines_come_at_most_every_interval_plus_a_summary_at_the_end() -> None:
    clock = SetClock()
    progress, out = plain(clock, READING_FILES)
    with progress:
        for second in range(36):  # a file a second for 35 s, reported at each
            clock.now = float(second)
            progress(second + 1, 100, f"notes/{second}.md")
    shown = lines(out)
    assert [line.split(" (")[0] for line in shown[:-1]] == [
        "kb-mcp: reading 1 / 100 files",  # at 0 s: the phase started
        "kb-mcp: reading 11 / 100 files",  # at 10 s
        "kb-mcp: reading 21 / 100 files",  # at 20 s
        "kb-mcp: reading 31 / 100 files",  # at 30 s
    ]
    assert shown[1] == "kb-mcp: reading 11 / 100 files (1.0/s, about 1 min left)"  # 89 s
    assert shown[-1] == "kb-mcp: done reading files: 36 of 100 in 35 s (1.0/s)"


def test_rate_is_that_of_the_recent_past_not_the_whole_run() -> None:
    """A re-sync counts unchanged files by the thousand, then reads changed ones slowly:
    the time left must follow the slow part."""
    clock = SetClock()
    progress, out = plain(clock, READING_FILES)
    progress(9_000, 10_000)  # at 0 s: 9,000 unchanged files counted at once
    for second in range(1, 61):  # then one changed file a second
        clock.now = float(second)
        progress(9_000 + second, 10_000)
    assert lines(out)[-1] == "kb-mcp: reading 9,060 / 10,000 files (1.0/s, about 16 min left)"


def test_a_phase_that_stalls_says_so_instead_of_an_estimate() -> None:
    clock = SetClock()
    progress, out = plain(clock, READING_FILES)
    progress(5, 100)
    clock.now = 40.0
    progress(5, 100)  # a slow file: nothing done for 40 s
    assert lines(out)[-1] == "kb-mcp: reading 5 / 100 files (0.0/s, none in the last 30 s)"


def test_summary_when_stopped_says_where_and_after_how_long() -> None:
    clock = SetClock()
    progress, out = plain(clock)
    with pytest.raises(KeyboardInterrupt), progress:
        progress(64, 1_000)
        clock.now = 75.0
        raise KeyboardInterrupt
    assert lines(out)[-1] == "kb-mcp: stopped embedding passages at 64 of 1,000 after 1 min 15 s"


def test_a_phase_that_never_reported_prints_nothing() -> None:
    """No embedder, or nothing pending: no line at all."""
    clock = SetClock()
    progress, out = plain(clock)
    with progress:
        clock.now = 3.0
    assert out.getvalue() == ""


def test_several_folders_in_one_sync_are_summed_in_the_summary() -> None:
    clock = SetClock()
    progress, out = plain(clock, READING_FILES)
    with progress:
        progress(40, 40)
        clock.now = 4.0
        progress(1, 10)  # the next folder starts from zero
        progress(10, 10)
    assert lines(out)[-1] == "kb-mcp: done reading files: 50 in 4.0 s (12.5/s)"


def test_a_wait_for_another_sync_is_shown_once() -> None:
    clock = SetClock()
    progress, out = plain(clock, READING_FILES)
    for second in range(3):
        clock.now = float(second)
        progress(0, 0, "waiting for another sync of notes (pid 42)")
    assert lines(out) == ["kb-mcp: waiting for another sync of notes (pid 42)"]


def test_terminal_line_is_redrawn_in_place_with_rate_and_ends_with_the_summary() -> None:
    clock = SetClock()
    out = io.StringIO()
    with PhaseProgress(READING_FILES, stream=out, clock=clock, terminal=True) as progress:
        for step in range(1, 5):
            clock.now = float(step)
            progress(step * 10, 100, "a\x1b[31m.md")
    text = out.getvalue()
    assert text.count("\r") >= 4 and text.endswith("\n") and text.count("\n") == 1
    assert "\rkb-mcp: reading 40 / 100 files (10.0/s, about 5 s left)" in text
    assert "\x1b[31m" not in text and "a\\x1b[31m.md" in text  # a file name cannot drive it
    assert text.rstrip("\n").endswith(
        "\r\x1b[Kkb-mcp: done reading files: 40 of 100 in 4.0 s (10.0/s)"
    )


@pytest.mark.parametrize(
    ("per_second", "text"),
    [(18.63, "18.6/s"), (1204.2, "1,204/s"), (0.05, "3.0/min"), (0.0, "0.0/s")],
)
def test_rate_text(per_second: float, text: str) -> None:
    assert rate_text(per_second) == text


@pytest.mark.parametrize(
    ("seconds", "elapsed", "left"),
    [
        (0.42, "0.4 s", "about 5 s left"),
        (42, "42 s", "about 40 s left"),
        (1653, "27 min 33 s", "about 28 min left"),
        (7_800, "2 h 10 min", "about 2 h 10 min left"),
    ],
)
def test_duration_and_eta_text(seconds: float, elapsed: str, left: str) -> None:
    assert (duration_text(seconds), eta_text(seconds)) == (elapsed, left)


# --- the commands, as an agent's shell and a terminal run them -------------------------


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(6):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nthe heron number {i} waits.\n")
    return folder


def kb_command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)]


def test_add_with_stderr_to_a_pipe_prints_each_phase_and_its_summary(
    notes: Path, home: Path, child_env: dict[str, str]
) -> None:
    env = {k: v for k, v in child_env.items() if k != "KB_MCP_EMBEDDER"}
    with serve_ollama() as server:
        home.mkdir()
        (home / "config.toml").write_text(f'embedder = "ollama"\nollama_host = "{server.url}"\n')
        done = subprocess.run(
            kb_command(home, "add", str(notes), "--yes", "--wait"),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("kb-mcp: ")]
    assert progress[0].startswith("kb-mcp: reading ")
    assert re.match(r"kb-mcp: reading \d / 6 files$", progress[0])
    assert re.search(r"^kb-mcp: done reading files: 6 in [\d.]+ s", done.stderr, re.M)
    assert re.search(r"^kb-mcp: embedding 6 / 6 passages", done.stderr, re.M)
    assert re.search(r"^kb-mcp: done embedding passages: 6 in [\d.]+ s", done.stderr, re.M)
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # plain lines only
    assert "kb-mcp: " not in done.stdout  # stdout stays for the results
    assert "6 added" in done.stdout


def test_reindex_rebuild_reports_reading_files(
    notes: Path, home: Path, child_env: dict[str, str]
) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            kb_command(home, *args),
            env=child_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )

    assert run("add", str(notes), "--yes").returncode == 0
    done = run("reindex", "--rebuild", "--json")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^kb-mcp: done reading files: 6 in [\d.]+ s", done.stderr, re.M)
    assert "kb-mcp: " not in done.stdout


def test_sync_on_a_terminal_redraws_one_line_then_prints_the_summary(
    notes: Path, home: Path, child_env: dict[str, str]
) -> None:
    """stderr is a pseudo-terminal, as when a person runs the command."""
    add = subprocess.run(
        kb_command(home, "add", str(notes), "--yes", "--no-wait"),
        env=child_env,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert add.returncode == 0
    (notes / "n0.md").write_text("# Note 0\n\nthe heron number 0 flies away.\n")
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            kb_command(home, "sync"),
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        stdout, _ = process.communicate(timeout=CLI_TIMEOUT_S)
        screen = _read_all(leader)
    finally:
        os.close(leader)
    assert process.returncode == 0
    assert "\rkb-mcp: reading " in screen and "/ 6 files" in screen
    assert re.search(r"\r\x1b\[Kkb-mcp: done reading files: 6 in [\d.]+ s", screen)
    assert b"kb-mcp: " not in stdout


def _read_all(leader: int) -> str:
    """What the process wrote to the terminal, once it has exited."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the other end is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode().replace("\r\n", "\n")
