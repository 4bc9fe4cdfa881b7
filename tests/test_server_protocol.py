"""The JSON-RPC layer as a hostile or buggy client meets it: raw bytes on the server's stdin.

fastmcp's Client only sends well-formed JSON, so these tests drive ``kb-mcp serve`` as a
raw subprocess with pipes (``tests/raw_server.py``): write a line, read the reply with a
timeout. Every malformed line must be answered with the JSON-RPC 2.0 error the spec names
(or, for a notification, logged on stderr), and the server must answer the next good
request (issue 7 item 17).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_server import INITIALIZE, REPLY_TIMEOUT_S, STARTUP_TIMEOUT_S, RawServer, tool_call

from kb_mcp.home import DB_FILE
from kb_mcp.library import Library
from kb_mcp.server.stdio import MAX_LINE_BYTES
from kb_mcp.settings import Settings
from kb_mcp.store.summary import library_summary


def rejections(server: RawServer) -> list[str]:
    return [line for line in server.stderr_lines() if "rejected a " in line]


@pytest.fixture(scope="module")
def raw_server(
    tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str]
) -> Iterator[RawServer]:
    """One initialized server shared by the malformed-line cases (each leaves it working)."""
    root = tmp_path_factory.mktemp("raw-server")
    server = RawServer(root / "home", root / "stderr.log", child_env)
    server.handshake()
    yield server
    server.close()


def assert_still_answers(server: RawServer) -> None:
    reply = server.call(tool_call(9999, "list"))
    assert reply["id"] == 9999 and "result" in reply, reply


DEEP = b"[" * 100_000 + b"]" * 100_000
MALFORMED = {
    "truncated json": (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/li', -32700, None),
    "missing jsonrpc": (b'{"id": 2, "method": "tools/list"}', -32600, 2),
    "jsonrpc 1.0": (b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}', -32600, 3),
    "batch array": (b'[{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]', -32600, None),
    "deep nesting": (DEEP, -32700, None),
    "deep params": (
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search", '
        b'"arguments": {"query": ' + DEEP + b"}}}",
        -32700,
        None,
    ),
    "20 MB malformed": (
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "' + b"a" * 20_000_000,
        -32700,
        None,
    ),
    "scalar": (b"42", -32600, None),
    "id is a boolean": (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', -32600, None),
    "params not an object": (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 5}',
        -32600,
        7,
    ),
    "no method": (b'{"jsonrpc": "2.0", "id": 8}', -32600, 8),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_protocol_malformed_line_gets_the_json_rpc_error_and_a_stderr_line(
    raw_server: RawServer, case: str
) -> None:
    """Issue 7 item 17: each of these got no reply at all; the client waited for its timeout."""
    raw, code, request_id = MALFORMED[case]
    logged = len(rejections(raw_server))
    raw_server.send(raw + b"\n")
    reply = raw_server.reply()
    assert reply["jsonrpc"] == "2.0"
    assert (reply["id"], reply["error"]["code"]) == (request_id, code), reply
    message = reply["error"]["message"]
    assert message.startswith("parse error:" if code == -32700 else "invalid request:")
    assert len(message) < 300 and "aaaa" not in message
    assert_still_answers(raw_server)
    assert len(rejections(raw_server)) == logged + 1


def test_protocol_bad_notification_is_logged_not_answered(raw_server: RawServer) -> None:
    """Issue 7 item 17: JSON-RPC forbids answering a notification; stderr says why it died."""
    logged = len(rejections(raw_server))
    raw_server.send(b'{"jsonrpc": "1.0", "method": "notifications/cancelled"}\n')
    assert raw_server.no_reply()
    assert_still_answers(raw_server)
    (line,) = rejections(raw_server)[logged:]
    assert "notification, not answered" in line and '"jsonrpc" is "1.0"' in line


SURROGATE_CALLS = {
    "search": {"query": "zebra\ud800fish"},
    "grep": {"pattern": "zebra\ud800fish"},
    "read": {"doc": "a-\ud800"},
    "list": {"source": "agent\ud800"},
    "add_document": {"title": "T\ud800", "content": "zebra\ud800fish", "source_uri": "t://\ud800"},
}


@pytest.mark.parametrize("tool", SURROGATE_CALLS)
def test_protocol_lone_surrogate_in_any_tool_argument_runs_with_it_replaced(
    raw_server: RawServer, tool: str
) -> None:
    """Issue 7 item 17: ``"\\ud800"`` failed pydantic's JSON parse, and nothing was answered.

    ``json.dumps`` writes the lone surrogate as the escape ``\\ud800``, as a client would.
    """
    reply = raw_server.call(tool_call(50, tool, **SURROGATE_CALLS[tool]))
    assert reply["id"] == 50 and "result" in reply, reply
    text = reply["result"]["content"][0]["text"]
    assert "\ufffd" in text or "0 result(s)" in text, text
    assert_still_answers(raw_server)


def test_protocol_over_long_line_is_answered_with_its_id_and_skipped(raw_server: RawServer) -> None:
    """Issue 7 item 17: a line past the cap is answered once it crosses it, not buffered whole."""
    head = b'{"jsonrpc": "2.0", "id": 77, "method": "tools/call", '
    head += b'"params": {"name": "add_document", '
    body = b'"arguments": {"content": "' + b"x" * (MAX_LINE_BYTES + 1024) + b'"}}}\n'
    writer = threading.Thread(target=raw_server.send, args=(head + body,))
    writer.start()
    reply = raw_server.reply()
    writer.join(timeout=REPLY_TIMEOUT_S)
    assert (reply["id"], reply["error"]["code"]) == (77, -32600)
    assert "32 MiB limit" in reply["error"]["message"]
    assert_still_answers(raw_server)


def test_protocol_request_before_initialize_gets_a_clear_error(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Issue 7 item 17: the SDK's bare "Invalid request parameters" said nothing useful."""
    server = RawServer(tmp_path / "home", tmp_path / "stderr.log", child_env)
    try:
        reply = server.call({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert reply["id"] == 1
        assert "not initialized" in reply["error"]["message"]
        assert "send initialize" in reply["error"]["message"]
        server.handshake()
        assert "tools" in server.call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]
    finally:
        server.close()


AWS_KEY_ID = "AKIA" + "2345672345672345"


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": AWS_KEY_ID, "id": 41, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 42, "method": AWS_KEY_ID},
        tool_call(43, AWS_KEY_ID),
    ],
    ids=["jsonrpc field", "unknown method", "unknown tool"],
)
def test_protocol_errors_never_echo_a_secret_from_the_request(
    raw_server: RawServer, message: dict[str, Any]
) -> None:
    """Outside run after issue 7: a key id sent as the ``jsonrpc`` value came back in the
    -32600 message and the stderr log line; an unknown tool or method name was echoed."""
    reply = raw_server.call(message)
    assert reply["id"] == message["id"]
    assert AWS_KEY_ID not in json.dumps(reply)
    assert AWS_KEY_ID not in raw_server.log.read_text(encoding="utf-8", errors="replace")
    assert_still_answers(raw_server)


# --- issue 11: a client that goes away or stops reading ---------------------------------------


def big_library(root: Path) -> Path:
    """A home holding one document of ~200 KB, so each ``read`` reply is large."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    home = root / "home"
    body = "\n\n".join(f"## Part {i}\n\n" + "restore steps here. " * 60 for i in range(160))
    with Library(Settings(home=home, embedder="none")) as library:
        library.writing.add_document("Big", f"# Big\n\n{body}\n", "t://big", by_agent=False)
    return home


def test_protocol_client_closing_stdin_mid_call_ends_the_server_cleanly(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 11 (protocol): EOF while calls are in flight is the end of the session: the
    server exits 0 in bounded time, having written only JSON-RPC."""
    server = RawServer(big_library(tmp_path), tmp_path / "stderr.log", child_env)
    server.handshake()
    for n in range(20):
        server.send(
            (json.dumps(tool_call(n, "grep", pattern="(a+)+$", regex=True)) + "\n").encode()
        )
    server.send((json.dumps(tool_call(99, "read", doc="t://big")) + "\n").encode())
    assert server.close(timeout_s=REPLY_TIMEOUT_S) == 0
    assert server.stray_output() == []


def test_protocol_client_that_stops_reading_gets_every_reply_when_it_reads_again(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 11 (protocol): replies back up in a full pipe; nothing is lost or garbled, and
    the server exits once the client reads again and ends the session."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "serve", "--home", str(big_library(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == "init"
    calls = 12  # ~12 x 200 KB of replies against a 64 KB pipe
    for n in range(calls):
        process.stdin.write((json.dumps(tool_call(n, "read", doc="t://big")) + "\n").encode())
    process.stdin.flush()
    time.sleep(1.5)  # the server is now blocked writing
    assert process.poll() is None
    replies = []
    reader = threading.Thread(
        target=lambda: replies.extend(json.loads(process.stdout.readline()) for _ in range(calls))
    )
    reader.start()
    reader.join(timeout=REPLY_TIMEOUT_S * 3)
    process.stdin.close()
    assert process.wait(timeout=REPLY_TIMEOUT_S) == 0
    assert sorted(r["id"] for r in replies) == list(range(calls))
    assert all("result" in r for r in replies)


def test_protocol_client_that_closes_its_end_of_stdout_ends_the_server(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 11 (protocol): a client gone without closing stdin (its read end closed, the
    pipe broken): the server's next write fails and it exits in bounded time, no hang."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "serve", "--home", str(big_library(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.log").open("wb"),
        env=child_env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == "init"
    process.stdout.close()
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    process.stdin.write((json.dumps(tool_call(1, "read", doc="t://big")) + "\n").encode())
    process.stdin.flush()
    try:
        process.wait(timeout=REPLY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the server hung {REPLY_TIMEOUT_S} s after its client's stdout closed")
    finally:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    assert process.returncode == 0
    log = (tmp_path / "stderr.log").read_text()
    assert "internal error" not in log and "closed the protocol's stdout" in log


def test_cli_parser_and_stdout_protection_import_no_mcp_stack_or_library() -> None:
    """``kb-mcp serve`` protects fd 1 before any import can write to it, so what runs
    first imports neither FastMCP, the SDK nor the library (``bench questions`` once
    pulled the library into every command)."""
    code = (
        "import sys\n"
        "from kb_mcp.cli.main import build_parser\n"
        "from kb_mcp.server.stdio import protect_stdout\n"
        "build_parser()\n"
        "heavy = [m for m in ('fastmcp', 'mcp', 'mcp_types', 'pydantic', 'kb_mcp.library')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def indexed_documents(home: Path) -> int:
    summary = library_summary(home / DB_FILE)
    return summary.documents if summary is not None else 0


# ``kb-mcp serve`` that says on stderr when its background work starts.
MARKED_SERVER = """
import sys
from kb_mcp.cli.main import main
from kb_mcp.server import background

_start = background.BackgroundWork.start


def start(self, *args, **kwargs):
    print("BACKGROUND WORK STARTED", file=sys.stderr, flush=True)
    return _start(self, *args, **kwargs)


background.BackgroundWork.start = start
sys.exit(main(sys.argv[1:]))
"""


def test_background_work_starts_once_the_client_has_the_initialize_answer(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """Issue 23: the folder sync (and the other background work) starts once the client
    has ``initialize``'s answer, as its ``notifications/initialized`` says, so nothing
    the server does in the background can hold that answer back."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\nzebrafinch migration\n", encoding="utf-8")
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder, name="notes")
    wrapper = tmp_path / "marked_server.py"
    wrapper.write_text(MARKED_SERVER, encoding="utf-8")
    log = tmp_path / "stderr.log"
    server = RawServer(home, log, child_env, entry=(str(wrapper),))
    try:
        server.send((json.dumps(INITIALIZE) + "\n").encode())
        assert "result" in server.reply(STARTUP_TIMEOUT_S)
        assert "BACKGROUND WORK STARTED" not in log.read_text(encoding="utf-8")
        assert indexed_documents(home) == 0
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while indexed_documents(home) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert indexed_documents(home) == 1
        assert log.read_text(encoding="utf-8").count("BACKGROUND WORK STARTED") == 1
    finally:
        server.close()
