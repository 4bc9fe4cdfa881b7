"""A regex grep cannot take the machine's memory, over MCP and the CLI (issue 20 item 1).

An outside run sent ``a{4294967294}`` to ``grep``: the backtracking engine expanded the
counted repeat while compiling, and ``kb-mcp serve`` grew to 23 GB until the kernel
killed it (``a{3000000}`` alone cost 842 MB). Matching could do the same after compiling:
``(?:(?=(a))…a)*$`` copies every capture at every character (a 1,000-character line cost
362 MB). Here the server (and the CLI) run with their address space capped by
``RLIMIT_AS``: a regression answers ``[internal]`` or dies, failing the test, instead of
eating the machine. Every pattern of the class answers in time with a result or
``[invalid_input]`` naming the reason; the server stays up and still answers.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_server import STARTUP_TIMEOUT_S, RawServer

from kb_mcp.library import Library
from kb_mcp.settings import Settings

# The server's address space: its own peak was 165 MB (fast path) and under 600 MB with
# the full MCP stack and its threads' stacks; the compile of ``a{3000000}`` alone needed
# 842 MB resident, ``(?:x{65535}){65535}`` and the lookahead captures several GB.
MEMORY_CAP_BYTES = 1 << 30
CALL_BOUND_S = 30.0  # generous for a loaded 2-core machine; the grep limit is 3 s
LONG_LINE = "a" * 200_000  # what match-time memory grows with


def capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


# Each costs a backtracking engine gigabytes, at compile time or at match time.
HOSTILE = [
    "a{4294967294}",
    "a{3000000}",
    "(a{1000}){1000}",
    "(?:x{65535}){65535}",
    r"[\s\S]{65535}",
    r"\p{L}{1000}",
    "(?:" + "|".join(f"w{n}" for n in range(150)) + "){1000}",
    "(?:" + "(?=(a))" * 140 + "a)*$",
    "(a)*$",
    "(?:(a)|b)*$",
    "(a|aa)+$",
]
# Patterns the engine refuses: the answer says why, never ``[internal]`` (exit 70).
REFUSED = ["(?V1)a", "a{4294967294}", "a{3000000}", "(a{1000}){1000}", r"(a)\1", "(?<=a)b"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("bounds") / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        text = f"# Long\n\n{LONG_LINE}\nwithin reach\n"
        library.writing.add_document("Long", text, "t://long", by_agent=False)
    return home


@pytest.fixture(scope="module")
def server(home: Path, child_env: dict[str, str]) -> Iterator[RawServer]:
    running = RawServer(home, home.parent / "stderr.log", child_env, preexec_fn=capped)
    running.handshake()
    running.request("tools/list", {}, STARTUP_TIMEOUT_S)
    yield running
    running.close()


def grep_answer(server: RawServer, pattern: str) -> str:
    reply = server.tool("grep", timeout_s=CALL_BOUND_S, pattern=pattern, regex=True)
    result = reply["result"]
    return result["content"][0]["text"] if result["content"] else ""


@pytest.mark.parametrize("pattern", HOSTILE)
def test_grep_hostile_regex_answers_under_a_memory_cap(server: RawServer, pattern: str) -> None:
    answer = grep_answer(server, pattern)
    assert not answer.startswith("[internal]"), answer
    assert server.alive()
    assert "within reach" in grep_answer(server, "within reach")


@pytest.mark.parametrize("pattern", REFUSED)
def test_grep_refused_regex_is_invalid_input_with_the_reason(
    server: RawServer, pattern: str
) -> None:
    answer = grep_answer(server, pattern)
    assert answer.startswith(f"[invalid_input] invalid regular expression {pattern!r}: "), answer


@pytest.mark.parametrize("pattern", ["a{4294967294}", "(?V1)a", "(?:x{65535}){65535}"])
def test_grep_cli_refuses_a_hostile_regex_under_a_memory_cap(
    home: Path, child_env: dict[str, str], pattern: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kb_mcp", "grep", pattern, "--regex", "--home", str(home)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=capped,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"kb-mcp: invalid regular expression {pattern!r}: ")
