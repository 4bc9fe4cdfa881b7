"""The stdio transport: FastMCP's own, fed through a guarded stdin and a protected stdout.

The JSON-RPC stream must be the only thing on the wire. ``protect_stdout`` runs as the
first lines of ``kb-mcp serve`` (this module imports only the standard library, so it
runs before any import can write): it snapshots fd 1 (``os.dup``) and points fd 1 at
stderr. From then on a stray ``print``, a logging handler bound to stdout, or a C
extension writing straight to fd 1 lands on stderr, and JSON-RPC goes out only through
the snapshot (``Wire``). fd 0 is snapshotted the same way and pointed at /dev/null, so a
child process never reads the client's requests.

The session itself is FastMCP's public ``run_stdio_async``. Its transport, the SDK's
``stdio_server()``, reads ``sys.stdin.buffer`` and writes ``sys.stdout.buffer`` where
they stand when those are not fds 0 and 1 (it claims the fds only when they are), so
for the session ``sys.stdin`` and ``sys.stdout`` are ``ProtocolSide`` objects: their
text side is the harmless stream (``print`` still reaches stderr), their ``buffer`` the
protocol's. The reader is ours, not the SDK's: the SDK drops every line it cannot
validate without a reply, so a client waits for its own timeout, and it reads a line of
any length into memory. ``RequestReader`` bounds each line (``MAX_LINE_BYTES``), checks
it (``jsonrpc.read_message``) and passes it on, or answers it at once with the JSON-RPC
error it earns, plus one line on stderr (the only trace of a bad notification, which
must not be answered). Both writers (the SDK's and the reader's) go through one
``Wire``, a whole line at a time, every error reply redacted.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import select
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from fastmcp import FastMCP

log = logging.getLogger("kb_mcp.server")

# One JSON-RPC message per line. 32 MiB holds any document an agent should hand over in
# one add_document call (a 20 MB text, JSON-escaped) while bounding what a runaway or
# hostile client can make the server hold; a longer line is answered as soon as it
# crosses the limit and the rest of it is skipped, never buffered.
MAX_LINE_BYTES = 32 * 1024 * 1024
READ_CHUNK_BYTES = 1024 * 1024
HEAD_BYTES = 64 * 1024  # kept of an over-long line, to find its "id"
POLL_S = 1.0  # how often a reader waiting for stdin looks whether the wire broke
_GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL


def protect_stdout() -> int:
    """Snapshot fd 1 for the protocol, point fd 1 at stderr; return the snapshot fd."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    return wire


def protect_stdin() -> int:
    """Snapshot fd 0 (close-on-exec) for the protocol, point fd 0 at /dev/null."""
    snapshot = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return snapshot


class Wire(io.RawIOBase):
    """The protocol's stdout: whole lines, one writer at a time, error replies redacted.

    The SDK's transport writes a message in pieces and then flushes; a line goes out
    once it is complete. A failed write (the client closed its end) sets ``broken``,
    which ends the reader too, and raises, which ends the SDK's session.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.broken = threading.Event()
        self._lock = threading.Lock()
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with self._lock:
            self._pending += data
            end = self._pending.rfind(b"\n")
            if end < 0:
                return len(data)
            lines = bytes(self._pending[: end + 1])
            del self._pending[: end + 1]
            self._send(b"".join(_redacted(line) for line in lines.splitlines(keepends=True)))
        return len(data)

    def send_line(self, message: dict[str, Any]) -> None:
        """One message of our own (an answer to a rejected line), between two of the SDK's."""
        with self._lock:
            self._send(_redacted(json.dumps(message, separators=(",", ":")).encode() + b"\n"))

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:
            self.broken.set()
            raise BrokenPipeError("the client closed the protocol's stdout") from None


def _redacted(line: bytes) -> bytes:
    """An error reply with every string redacted, whoever wrote it.

    Our tools redact their own errors, but the SDK and FastMCP write some too, quoting
    the request: "Unknown tool: 'AKIA…'", an unknown method in ``data`` (outside run
    after issue 7). Errors are small, so redacting them all costs nothing.
    """
    if b'"error"' not in line and b'"isError":true' not in line:
        return line
    message = json.loads(line)
    result = message.get("result")
    if "error" not in message and not (isinstance(result, dict) and result.get("isError")):
        return line
    from kb_mcp import render

    text = json.dumps(render.to_data(message), ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", errors="replace")


class RequestReader(io.RawIOBase):
    """The client's lines, bounded and checked; what the SDK reads as ``sys.stdin.buffer``.

    A good line is passed on (repaired where ``read_message`` repairs); a bad one is
    answered on the wire (or, a notification, logged) and never reaches the SDK. End of
    input, or a wire the client has closed, is end of file.
    """

    def __init__(self, fd: int, wire: Wire, max_bytes: int = MAX_LINE_BYTES) -> None:
        super().__init__()
        self._fd = fd
        self._wire = wire
        self._max_bytes = max_bytes
        self._ready = bytearray()  # whole lines for the SDK
        self._line = bytearray()  # the line being read
        self._skipping = False  # the rest of an over-long line, already answered
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._ready and not self._eof:
            self._take(self._read_chunk())
        size = min(len(buffer), len(self._ready))
        buffer[:size] = self._ready[:size]
        del self._ready[:size]
        return size

    def _read_chunk(self) -> bytes:
        """The next bytes of stdin; ``b""`` at its end or once the wire is gone (a
        client that closed its end of stdout but kept stdin open left the server hung
        after its session had ended: issue 11)."""
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wire.fd, 0)  # reports only its errors: the reader is gone
        while not self._wire.broken.is_set():
            events = dict(poller.poll(POLL_S * 1000))
            if events.get(self._wire.fd, 0) & _GONE:
                log.warning("the client closed the protocol's stdout; ending the session")
                return b""
            if self._fd in events:
                return os.read(self._fd, READ_CHUNK_BYTES)
        return b""

    def _take(self, chunk: bytes) -> None:
        if not chunk:
            self._eof = True
            if self._line and not self._skipping:
                self._accept(bytes(self._line))
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            else:
                self._line += chunk[start:end]
                self._accept(bytes(self._line))
            self._line.clear()
            start = end + 1
        if not self._skipping:
            self._line += chunk[start:]
            if len(self._line) > self._max_bytes:
                self._over_long(self._line)
                self._line = bytearray()
                self._skipping = True  # its end is still to come

    def _accept(self, line: bytes) -> None:
        from kb_mcp.server.jsonrpc import Rejected, read_message

        if len(line) > self._max_bytes:
            self._over_long(line)
            return
        found = read_message(line)
        if isinstance(found, Rejected):
            self._reject(found, len(line))
        elif found is not None:
            self._ready += found + b"\n"

    def _over_long(self, line: bytes | bytearray) -> None:
        from kb_mcp.server.jsonrpc import Rejected, id_in_head

        rejected = Rejected(
            -32600,
            f"invalid request: message is over the {self._max_bytes // 2**20} MiB limit of one "
            "line; send less per call (split a large document into several add_document calls)",
            id_in_head(bytes(line[:HEAD_BYTES])),
        )
        self._reject(rejected, len(line))

    def _reject(self, rejected: Any, size: int) -> None:
        from kb_mcp.redact import redact_output

        answered = "answered" if rejected.answer else "a notification, not answered"
        log.warning(
            "rejected a %d-byte message (%s, error %d): %s",
            size,
            answered,
            rejected.code,
            redact_output(rejected.message).text,
        )
        if rejected.answer:
            error = {"code": rejected.code, "message": rejected.message}
            self._wire.send_line({"jsonrpc": "2.0", "id": rejected.id, "error": error})


class ProtocolSide(io.TextIOBase):
    """A stand-in for ``sys.stdin`` / ``sys.stdout`` while serving: text goes to and
    comes from ``text`` (stderr, /dev/null), ``buffer`` is the protocol's stream."""

    def __init__(self, text: TextIO, protocol: io.RawIOBase) -> None:
        super().__init__()
        self._text = text
        self._protocol = protocol

    @property
    def buffer(self) -> io.RawIOBase:  # type: ignore[override]
        return self._protocol

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._text.encoding

    def readable(self) -> bool:
        return self._text.readable()

    def writable(self) -> bool:
        return self._text.writable()

    def read(self, size: int | None = -1) -> str:
        return self._text.read(size)

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self._text.readline(size)

    def write(self, text: str) -> int:
        return self._text.write(text)

    def flush(self) -> None:
        self._text.flush()

    def fileno(self) -> int:
        return self._text.fileno()


async def serve_stdio(mcp: FastMCP, wire_fd: int, stdin_fd: int) -> None:
    """Run ``mcp`` over the stdin snapshot and the protected stdout snapshot."""
    wire = Wire(wire_fd)
    saved = sys.stdin, sys.stdout
    sys.stdin = ProtocolSide(sys.stdin, RequestReader(stdin_fd, wire))
    sys.stdout = ProtocolSide(sys.stdout, wire)
    try:
        await mcp.run_stdio_async(show_banner=False)
    except* BrokenPipeError:
        # The client closed its end of stdout: nobody can read a reply, the session is over
        # (a normal end, like EOF on stdin; issue 11 found it reported as an internal error).
        log.warning("the client closed the protocol's stdout; ending the session")
    finally:
        sys.stdin, sys.stdout = saved
