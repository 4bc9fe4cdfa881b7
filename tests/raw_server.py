"""``kb-mcp serve`` as a raw subprocess over pipes, for tests that play a hostile client.

fastmcp's Client only sends well-formed JSON, waits for every reply and reads every byte,
so the protocol, fuzzing, concurrency and resource tests drive the server here instead:
raw bytes in, JSON lines back with a timeout. Every line the server writes on stdout is
kept (``stdout_lines``) and checked to be a JSON-RPC 2.0 message (``stray_output``), so a
test can assert that nothing but the protocol ever reached the wire. Replies to requests
sent with ``request`` are routed by id, so several threads can share one server the way
an agent with parallel tool calls does; other lines go to the ``reply`` queue in order.
Once the server's stdout ends (it exited, or was killed), a request waiting for its reply
and every later one gets ``CLOSED`` at once instead of waiting out its timeout, so a test
that kills a server under its clients sees which calls never got an answer.

Moved here from ``tests/test_server_protocol.py`` (issue 11) so the adversarial suite
reuses one client instead of growing a second.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Bounds a failure only (each wait ends at the reply): generous for a loaded machine.
REPLY_TIMEOUT_S = 60
# Start-up (imports, opening the library) before the initialize reply: seconds normally,
# but over 20 s was seen on the shared 2-core machine under load 15 with `nice -n 10`.
STARTUP_TIMEOUT_S = 120
PROTOCOL_VERSION = "2025-06-18"
CLOSED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32000, "message": "the server closed its output before replying"},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    },
}


def tool_call(request_id: int | str, tool: str, **arguments: Any) -> dict[str, Any]:
    """A ``tools/call`` request message."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


class RawServer:
    """``kb-mcp serve --allow-agent-writes`` over pipes on ``home``; stderr goes to ``log``.

    ``entry`` replaces ``-m kb_mcp`` (a wrapper script that ends by calling
    ``kb_mcp.cli.main.main``). ``preexec_fn`` runs in the child before ``exec`` (e.g.
    ``resource.setrlimit`` to cap the server's memory, so a regression fails the test
    instead of eating the machine).
    """

    def __init__(
        self,
        home: Path,
        log: Path,
        env: dict[str, str],
        *,
        extra_args: tuple[str, ...] = (),
        entry: tuple[str, ...] = ("-m", "kb_mcp"),
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                *entry,
                "serve",
                "--home",
                str(home),
                "--allow-agent-writes",
                *list(extra_args),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            env=env,
            preexec_fn=preexec_fn,
        )
        self.stdout_lines: list[bytes] = []
        self._replies: queue.Queue[bytes] = queue.Queue()
        self._waiters: dict[str, queue.Queue[bytes]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count()
        self._ended = False
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.stdout_lines.append(line)
                waiter = self._waiters.pop(_reply_key(line), None)
            (waiter or self._replies).put(line)
        with self._lock:
            self._ended = True
            waiters, self._waiters = list(self._waiters.values()), {}
        for waiter in waiters:
            waiter.put(json.dumps(CLOSED).encode())

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        with self._send_lock:
            self.process.stdin.write(raw)
            self.process.stdin.flush()

    def reply(self, timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """The next unrouted line the server writes, as JSON; fails the test after the timeout."""
        try:
            line = self._replies.get(timeout=timeout_s)
        except queue.Empty:
            pytest.fail(f"no reply within {timeout_s} s")
        return json.loads(line)

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and read the next unrouted line (single-threaded use)."""
        self.send((json.dumps(message) + "\n").encode())
        return self.reply()

    def request(
        self, method: str, params: dict[str, Any], timeout_s: float = REPLY_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send a request under a fresh id and wait for its reply; safe from many threads."""
        request_id = f"r{next(self._ids)}"
        waiter: queue.Queue[bytes] = queue.Queue()
        with self._lock:
            if self._ended:
                return CLOSED
            self._waiters[json.dumps(request_id)] = waiter
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            self.send((json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            return CLOSED
        try:
            return json.loads(waiter.get(timeout=timeout_s))
        except queue.Empty:
            pytest.fail(f"no reply to {method} within {timeout_s} s")

    def tool(self, name: str, timeout_s: float = REPLY_TIMEOUT_S, **arguments: Any) -> dict:
        """``tools/call`` through ``request``: the JSON-RPC reply."""
        return self.request("tools/call", {"name": name, "arguments": arguments}, timeout_s)

    def no_reply(self, wait_s: float = 1.0) -> bool:
        try:
            self._replies.get(timeout=wait_s)
        except queue.Empty:
            return True
        return False

    def handshake(self) -> None:
        self.send((json.dumps(INITIALIZE) + "\n").encode())
        assert "result" in self.reply(STARTUP_TIMEOUT_S)
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    def stderr_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()

    def stray_output(self) -> list[bytes]:
        """Lines on stdout that are not a JSON-RPC 2.0 message (there must be none)."""
        with self._lock:
            lines = list(self.stdout_lines)
        return [line for line in lines if not _is_json_rpc(line)]

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout_s: float = 60) -> int:
        """Close stdin (the end of the session) and wait; kill after ``timeout_s``. The
        server joins each background thread for up to 5 s as it ends, and a sync under
        way on a loaded machine took over 10 s to stop (``CLOSE_S`` of the concurrency
        run): the bound is for a hang, not a measure of how fast it ends."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def _reply_key(line: bytes) -> str:
    try:
        message = json.loads(line)
    except ValueError:
        return ""
    return json.dumps(message.get("id")) if isinstance(message, dict) else ""


def _is_json_rpc(line: bytes) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("jsonrpc") == "2.0"


def proc_status(pid: int) -> dict[str, int]:
    """RSS (kB), thread count and open fds of a live process, from ``/proc``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            fields[key] = int(value.split()[0])
    return {
        "rss_kb": fields["VmRSS"],
        "threads": fields["Threads"],
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }
