"""The stdio transport: a protected stdout, and a reader that answers every bad line.

The JSON-RPC stream must be the only thing on the wire. ``protect_stdout`` (in
``server/prelude.py``, which imports nothing heavy) runs as the first lines of
``kb-mcp serve``: it snapshots fd 1 (``os.dup``) and points fd 1 at
stderr. From then on a stray ``print``, a logging handler bound to stdout, or a C
extension writing straight to fd 1 lands on stderr, and JSON-RPC goes out only through
the snapshot (``Wire``). fd 0 is snapshotted the same way and pointed at /dev/null, so a
child process never reads the client's requests.

The reader is ours, not the MCP SDK's: the SDK drops every line it cannot validate
without a reply, so a client waits for its own timeout. Here each line is bounded
(``MAX_LINE_BYTES``), checked by ``jsonrpc.read_message``, and either forwarded to the
server as a ``SessionMessage`` or answered at once with the JSON-RPC error it earns, plus
one line on stderr (the only trace of a bad notification, which must not be answered).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, ErrorData, JSONRPCError, JSONRPCMessage
from pydantic_core import PydanticSerializationError

from kb_mcp import render
from kb_mcp.redact import redact_output
from kb_mcp.server.jsonrpc import Rejected, id_in_head, read_message
from kb_mcp.server.prelude import EarlyStart, protect_stdin

log = logging.getLogger("kb_mcp.server")

# One JSON-RPC message per line. 32 MiB holds any document an agent should hand over in
# one add_document call (a 20 MB text, JSON-escaped) while bounding what a runaway or
# hostile client can make the server hold; a longer line is answered as soon as it
# crosses the limit and the rest of it is skipped, never buffered.
MAX_LINE_BYTES = 32 * 1024 * 1024
READ_CHUNK_BYTES = 1024 * 1024
HEAD_BYTES = 64 * 1024  # kept of an over-long line, to find its "id"
PARSE_IN_THREAD_BYTES = 256 * 1024  # parsing a bigger line would stall the event loop


class Wire:
    """The protocol's stdout: whole lines, one writer at a time."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", closefd=False)
        self._lock = anyio.Lock()

    async def send(self, message: JSONRPCMessage) -> None:
        data = encode_message(message)
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()


def encode_message(message: JSONRPCMessage) -> bytes:
    """One message as a UTF-8 JSON line.

    A lone surrogate in an outgoing string cannot be UTF-8; pydantic then refuses the
    whole message and the SDK would lose the reply. It is replaced instead.
    """
    if _is_error(message):
        return _encode_redacted(message)
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        log.warning("reply held text that is not valid Unicode; sent with it replaced")
        data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", errors="replace")


def _is_error(message: JSONRPCMessage) -> bool:
    root = getattr(message, "root", message)  # a union in mcp_types, a RootModel before
    if isinstance(root, JSONRPCError):
        return True
    result = getattr(root, "result", None)
    return isinstance(result, dict) and result.get("isError") is True


def _encode_redacted(message: JSONRPCMessage) -> bytes:
    """An error reply with every string redacted, whoever wrote it.

    Our tools redact their own errors, but the SDK and FastMCP write some too, quoting
    the request: "Unknown tool: 'AKIA…'", an unknown method in ``data`` (outside run
    after issue 7). Errors are small, so redacting them all costs nothing.
    """
    data = render.to_data(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class OverLong:
    """A line past ``MAX_LINE_BYTES``: its first bytes and its size when it crossed it."""

    head: bytes
    size: int


async def read_lines(
    fd: int, max_bytes: int = MAX_LINE_BYTES, pending: bytes = b""
) -> AsyncIterator[bytes | OverLong]:
    """The lines of ``pending`` then of ``fd`` (without their newline); an over-long one
    once, as ``OverLong``. ``pending`` is what the prelude read before the server ran."""
    buffer = bytearray()
    skipping = False
    while True:
        if pending:
            chunk, pending = pending, b""
        else:
            chunk = await _read_chunk(fd)
        if not chunk:
            if buffer and not skipping:
                yield bytes(buffer)
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if skipping:
                skipping = False
            else:
                buffer += chunk[start:end]
                yield bytes(buffer) if len(buffer) <= max_bytes else _over_long(buffer)
            buffer.clear()
            start = end + 1
        if not skipping:
            buffer += chunk[start:]
            if len(buffer) > max_bytes:
                yield _over_long(buffer)
                buffer.clear()
                skipping = True


async def _read_chunk(fd: int) -> bytes:
    """The next bytes of ``fd``, waiting in the event loop, not in a thread.

    Why: a worker thread blocked in ``os.read`` cannot be cancelled, and the interpreter
    waits for it at exit; a client that closed its end of stdout but kept stdin open left
    the server hung after its session had ended (issue 11). A pipe, socket or tty is
    polled by the loop instead; a regular file (which epoll refuses) never blocks for
    long, so it is read in a thread as before.
    """
    try:
        await anyio.wait_readable(fd)
    except OSError:
        return await anyio.to_thread.run_sync(os.read, fd, READ_CHUNK_BYTES, abandon_on_cancel=True)
    return os.read(fd, READ_CHUNK_BYTES)


def _over_long(buffer: bytearray) -> OverLong:
    return OverLong(bytes(buffer[:HEAD_BYTES]), len(buffer))


async def pump_requests(
    fd: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    wire: Wire,
    pending: bytes = b"",
) -> None:
    """Forward good messages to the server; answer (or log) each bad one; close at EOF."""
    async with to_server:
        async for line in read_lines(fd, pending=pending):
            if isinstance(line, OverLong):
                found: JSONRPCMessage | Rejected | None = _too_long(line)
                size = line.size
            elif len(line) > PARSE_IN_THREAD_BYTES:
                found, size = await anyio.to_thread.run_sync(read_message, line), len(line)
            else:
                found, size = read_message(line), len(line)
            if found is None:
                continue
            if isinstance(found, Rejected):
                await _reject(wire, found, size)
            else:
                await to_server.send(SessionMessage(found))


def _too_long(line: OverLong) -> Rejected:
    return Rejected(
        INVALID_REQUEST,
        f"invalid request: message is over the {MAX_LINE_BYTES // 2**20} MiB limit of one "
        "line; send less per call (split a large document into several add_document calls)",
        id_in_head(line.head),
    )


async def _reject(wire: Wire, rejected: Rejected, size: int) -> None:
    answered = "answered" if rejected.answer else "a notification, not answered"
    log.warning(
        "rejected a %d-byte message (%s, error %d): %s",
        size,
        answered,
        rejected.code,
        redact_output(rejected.message).text,
    )
    if rejected.answer:
        error = ErrorData(code=rejected.code, message=rejected.message)
        await wire.send(JSONRPCError(jsonrpc="2.0", id=rejected.id, error=error))


async def pump_responses(
    from_server: MemoryObjectReceiveStream[SessionMessage],
    wire: Wire,
    early: EarlyStart | None = None,
) -> None:
    """Everything the server sends, onto the wire, until the server closes its stream.

    When the prelude already answered ``initialize`` (``early``), the server's own reply
    to that request is the one message not sent: the client has it.
    """
    drop = early is not None and early.answered
    async with from_server:
        async for session_message in from_server:
            if drop and _is_reply_to(session_message.message, early.answered_id):
                drop = False
                continue
            await wire.send(session_message.message)


def _is_reply_to(message: JSONRPCMessage, request_id: str | int | None) -> bool:
    root = getattr(message, "root", message)
    return hasattr(root, "result") and getattr(root, "id", None) == request_id


class LifecycleMiddleware:
    """Says plainly when a request comes before ``initialize``.

    The SDK answers such a request with a bare "Invalid request parameters" (its pinned
    compatibility code, -32602, kept here) and drops a notification in silence.
    """

    def __init__(self) -> None:
        self.initialized = False

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            if self.initialized or ctx.method == "initialize" or exc.code != INVALID_PARAMS:
                raise
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"the session is not initialized: send initialize (then "
                f"notifications/initialized) before {ctx.method}",
            ) from exc
        if ctx.method == "initialize":
            self.initialized = True
        elif not self.initialized and ctx.request_id is None:
            log.warning("dropped notification %s: it came before initialize", ctx.method)
        return result


async def serve_stdio(
    mcp: object, wire_fd: int, stdin_fd: int | None = None, early: EarlyStart | None = None
) -> None:
    """Run a FastMCP server over the stdin snapshot and the protected stdout snapshot.

    FastMCP's ``run_stdio_async`` would claim whatever fd 1 is now (stderr) and read
    stdin through the SDK's silent reader, so the transport is built here. This uses two
    FastMCP internals (``_lifespan_manager``, ``_mcp_server``); ``pyproject.toml`` pins
    FastMCP's major version and ``tests/test_server_stdio.py`` covers the path.
    """
    stdin_fd = protect_stdin() if stdin_fd is None else stdin_fd
    wire = Wire(wire_fd)
    low_level = mcp._mcp_server  # type: ignore[attr-defined]
    low_level.middleware.append(LifecycleMiddleware())
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with mcp._lifespan_manager(), anyio.create_task_group() as responses:  # type: ignore[attr-defined]
            # The server closes server_out when it ends; the pump then drains and returns.
            responses.start_soon(pump_responses, from_server, wire, early)
            pending = early.pending if early is not None else b""
            async with anyio.create_task_group() as requests:
                requests.start_soon(pump_requests, stdin_fd, to_server, wire, pending)
                await low_level.run(
                    server_in, server_out, low_level.create_initialization_options()
                )
                requests.cancel_scope.cancel()
    except* BrokenPipeError:
        # The client closed its end of stdout: nobody can read a reply, the session is over
        # (a normal end, like EOF on stdin; issue 11 found it reported as an internal error).
        log.warning("the client closed the protocol's stdout; ending the session")
