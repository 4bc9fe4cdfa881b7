"""Vectors never hold the user up (issue 22 item 3), through the real CLI.

Trigger: a real 4,062-file folder was keyword-searchable after 110 s, and ``kb-mcp add``
then embedded for 27 more minutes before it returned; nothing said search already
worked, ``list`` advertised hybrid at 5 % coverage, and a default search answered
``mode: keyword`` with no reason. Now ``add`` / ``sync`` return once keyword search
works and say what is left and about how long it takes; ``kb-mcp embed`` builds the rest
with progress, and Ctrl-C stops it cleanly for the next run to resume.

Real subprocesses on a real ``kb.db``, embedding through the loopback server that speaks
Ollama's ``/api/embed`` (``tests/ollama_server.py``). Its gate holds a batch of passages
at a point the test chooses, so nothing here depends on how fast the machine is: a
command that waited for every vector would wait at the gate until its timeout.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ollama_server import OllamaServer, closed_port, serve_ollama

from kb_mcp.cli.progress import eta_text, rate_text
from kb_mcp.embed.ollama import PROBE_TEXT

CLI_TIMEOUT_S = 60
MODEL = r"ollama:qwen3-embedding:0\.6b \(8 dims\)"
HOW = "a running `kb-mcp serve` builds them in the background, or run `kb-mcp embed`"


@pytest.fixture
def server(home: Path) -> Iterator[OllamaServer]:
    """The embedding server, and ``home`` configured to embed with it."""
    with serve_ollama() as running:
        home.mkdir()
        (home / "config.toml").write_text(
            f'embedder = "ollama"\nollama_host = "{running.url}"\n', encoding="utf-8"
        )
        yield running
        running.release()  # a command still waiting at the gate ends with the test


@pytest.fixture
def env(child_env: dict[str, str]) -> dict[str, str]:
    """The tests' environment without ``KB_MCP_EMBEDDER=none``: config.toml decides."""
    return {k: v for k, v in child_env.items() if k != "KB_MCP_EMBEDDER"}


def notes(folder: Path, count: int, start: int = 0) -> Path:
    """``count`` one-passage notes."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nthe heron number {i} waits.\n")
    return folder


def command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)]


def kb(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(home, *args),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def listed(home: Path, env: dict[str, str]) -> dict:
    done = kb(home, env, "list", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def passages_sent(server: OllamaServer) -> list[str]:
    """Every passage text the server was asked to embed (the clients' probes left out)."""
    texts = []
    for body in server.embed_requests:
        given = body["input"]
        texts += [t for t in ([given] if isinstance(given, str) else given) if t != PROBE_TEXT]
    return texts


def test_add_returns_once_keyword_search_works_and_says_what_is_left(
    server: OllamaServer, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """No rate recorded yet: ``add`` times two small batches (the second), says so,
    and returns without embedding the rest; search and ``list`` say where things are."""
    folder = notes(tmp_path / "notes", 50)
    server.hold_after(2)  # the measurement's two batches; any batch after them waits
    done = kb(home, env, "add", str(folder), "--yes")
    assert done.returncode == 0, done.stderr
    assert "50 added" in done.stdout
    assert re.search(
        rf"^keyword search works now; 34 passages left to embed with {MODEL} "
        rf"\(about \d+ s left at [\d.,]+/s, measured just now on 8 passages\): {re.escape(HOW)}$",
        done.stdout,
        re.M,
    ), done.stdout
    assert not server.held.is_set() and len(passages_sent(server)) == 16

    found = kb(home, env, "search", "heron number 7")
    assert found.returncode == 0, found.stderr
    assert "(mode: keyword, fell back to keyword)" in found.stdout
    assert (
        "note: vectors for 16 of 50 passages so far (32 %): keyword only until 95 % have one"
        in found.stdout
    )
    library = listed(home, env)
    assert library["modes"] == ["keyword", "grep"]  # not hybrid: it would run keyword
    assert re.fullmatch(
        rf"{MODEL}: vectors for 16 of 50 passages \(32 %\), waiting: `kb-mcp embed` builds "
        r"them, a running `kb-mcp serve` in the background; vector and hybrid search from 95 %",
        library["health"]["vectors"],
    )
    assert not server.held.is_set()


def recorded_rate(home: Path) -> float:
    """passages / second of the rate the library recorded (read from ``kb.db``)."""
    with sqlite3.connect(home / "kb.db") as conn:
        [(value,)] = conn.execute("SELECT value FROM meta WHERE key LIKE 'embed_rate:%'")
    rate = json.loads(value)
    return rate["passages"] / rate["seconds"]


def test_add_estimates_from_the_library_s_own_last_run_and_embeds_nothing(
    server: OllamaServer, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``--wait`` embeds before returning, as before, and records the rate; the next
    ``add`` estimates from it and sends no passage to the model."""
    first = kb(home, env, "add", str(notes(tmp_path / "a", 50)), "--yes", "--wait")
    assert first.returncode == 0, first.stderr
    assert re.search(rf"^vectors: 50 passages embedded with {MODEL} in ", first.stdout, re.M)
    per_second = recorded_rate(home)
    sent = len(passages_sent(server))
    server.hold_after(0)  # any batch of passages now waits at the gate
    done = kb(home, env, "add", str(notes(tmp_path / "b", 5, start=50)), "--yes")
    assert done.returncode == 0, done.stderr
    estimate = f"{eta_text(5 / per_second)} at {rate_text(per_second)}"
    assert (
        f"keyword search works now; 5 passages left to embed with ollama:qwen3-embedding:0.6b "
        f"(8 dims) ({estimate}, this library's last embedding run): {HOW}"
    ) in done.stdout.splitlines()
    assert len(passages_sent(server)) == sent and not server.held.is_set()


def read_until(stream, text: str) -> list[str]:
    """Lines of ``stream`` up to and including the first that holds ``text``."""
    lines = []
    for line in stream:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never came; got {lines}")


def test_embed_stops_cleanly_on_ctrl_c_and_the_next_run_resumes(
    server: OllamaServer, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    added = kb(home, env, "add", str(notes(tmp_path / "notes", 100)), "--yes", "--embedder", "none")
    assert added.returncode == 0, added.stderr
    server.hold_after(2)  # batches 1 and 2 (64 passages) are stored; batch 3 waits
    process = subprocess.Popen(
        command(home, "embed"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.held.wait(CLI_TIMEOUT_S), "the third batch never reached the server"
        during = listed(home, env)["health"]["vectors"]
        assert during.endswith(
            "vectors for 64 of 100 passages (64 %), being built now; "
            "vector and hybrid search from 95 %"
        )
        process.send_signal(signal.SIGINT)  # Ctrl-C while batch 3 is in flight
        read_until(process.stderr, "stopping after the batch in progress")
        server.release()
        stdout, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert re.search(r"^kb-mcp: stopped embedding passages at 96 of 100 after ", stderr, re.M)
    assert re.search(
        rf"^vectors: 96 passages embedded with {MODEL} in [\d.]+ s; stopped with 4 left: "
        r"`kb-mcp embed` resumes",
        stdout,
        re.M,
    ), stdout
    stopped = listed(home, env)
    [notes_source] = stopped["sources"]
    assert (notes_source["embedded"], notes_source["embed_pending"]) == (96, 4)
    doctor = json.loads(kb(home, env, "doctor", "--json").stdout)
    [vectors] = [c for c in doctor["checks"] if c["name"] == "vectors"]
    assert vectors["detail"] == stopped["health"]["vectors"]
    assert "vectors for 96 of 100 passages (96 %), waiting: `kb-mcp embed`" in vectors["detail"]

    again = kb(home, env, "embed")
    assert again.returncode == 0, again.stderr
    assert re.search(
        rf"^vectors: 4 passages embedded with {MODEL} in [\d.]+ s; 0 pending", again.stdout, re.M
    )
    after = listed(home, env)
    assert after["modes"] == ["keyword", "vector", "hybrid", "grep"]
    assert re.fullmatch(rf"{MODEL}: all 100 passages have vectors", after["health"]["vectors"])
    sent = passages_sent(server)
    assert len(sent) == len(set(sent)) == 100  # each passage embedded once, none lost

    nothing = kb(home, env, "embed")
    assert nothing.returncode == 0, nothing.stderr
    assert "nothing to embed: all 100 passages have vectors" in nothing.stdout


@pytest.mark.anyio
async def test_server_search_and_list_say_keyword_only_while_it_builds_the_vectors(
    server: OllamaServer,
    home: Path,
    env: dict[str, str],
    tmp_path: Path,
    mcp_client,
) -> None:
    """Over MCP: while the server's background run builds the vectors (held at the
    gate after its first batch), a default search says it ran keyword and why, and
    ``list`` gives the coverage and advertises no vector mode."""
    import anyio

    added = kb(home, env, "add", str(notes(tmp_path / "notes", 100)), "--yes", "--embedder", "none")
    assert added.returncode == 0, added.stderr
    server.hold_after(1)  # the server's first batch is stored, its second waits
    async with mcp_client(env=env) as client:
        assert await anyio.to_thread.run_sync(server.held.wait, CLI_TIMEOUT_S)
        found = (await client.call_tool("search", {"query": "heron number 7"})).structured_content
        listed = (await client.call_tool("list", {})).structured_content
        server.release()
    assert (found["mode"], found["fallback"]) == ("keyword", "keyword")
    assert found["reason"].startswith(
        "vectors for 32 of 100 passages so far (32 %): keyword only until 95 % have one"
    )
    assert found["results"]
    assert listed["modes"] == ["keyword", "grep"]
    assert listed["health"]["vectors"].endswith(
        "vectors for 32 of 100 passages (32 %), being built now; vector and hybrid search from 95 %"
    )


def test_embed_without_an_embedder_or_with_one_that_fails_says_so(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    folder = notes(tmp_path / "notes", 3)
    assert kb(home, env, "add", str(folder), "--yes", "--embedder", "none").returncode == 0
    none = kb(home, env, "embed", "--embedder", "none")
    assert none.returncode == 0, none.stderr
    assert none.stdout == (
        "no embedder configured (--embedder none): keyword search only, nothing to embed\n"
    )
    (home / "config.toml").write_text(
        f'embedder = "ollama"\nollama_host = "http://127.0.0.1:{closed_port()}"\n'
    )
    down = kb(home, env, "embed")
    assert down.returncode == 1
    assert re.search(
        r"^vectors: 0 passages embedded, 3 pending: .+ `kb-mcp embed`", down.stderr, re.M
    )


def test_sync_wait_stopped_by_ctrl_c_keeps_the_vectors_done_and_exits_130(
    server: OllamaServer, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``--wait`` embeds as before, and Ctrl-C stops it the same clean way."""
    added = kb(home, env, "add", str(notes(tmp_path / "notes", 100)), "--yes", "--embedder", "none")
    assert added.returncode == 0, added.stderr
    server.hold_after(1)  # batch 1 is stored, batch 2 waits
    process = subprocess.Popen(
        command(home, "sync", "--wait"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.held.wait(CLI_TIMEOUT_S), "the second batch never reached the server"
        process.send_signal(signal.SIGINT)
        read_until(process.stderr, "stopping after the batch in progress")
        server.release()
        stdout, _ = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "stopped with 36 left: `kb-mcp embed` resumes" in stdout
    [source] = listed(home, env)["sources"]
    assert (source["embedded"], source["embed_pending"]) == (64, 36)
