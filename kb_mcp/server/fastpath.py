"""The prelude's fast path: ``tools/list`` and ``tools/call`` answered before FastMCP is ready.

Measured on a 10k-file library (issue 10, ``kb-mcp bench startup``): the first search
result came 2.8-3.7 s of CPU after spawn, 1.7-2.3 s of it importing FastMCP and the MCP
SDK, which a search does not need. So after the prelude has answered ``initialize``
(``server/prelude.py``), ``FastPath`` keeps reading stdin itself, in the main thread,
and answers the two methods a first search needs through the same tool bodies FastMCP
calls (``server/calls.py``):

- ``tools/list``: the snapshot of FastMCP's own answer (``server/snapshot.py``), byte for
  byte; the test compares the two.
- ``tools/call`` of one of the five tools whose arguments are plainly valid against that
  snapshot's schema (``valid_arguments``: types, lengths, bounds, enums; nothing the
  check does not know). Each runs in its own thread, at most ``MAX_CALLS`` at a time.
- ``notifications/cancelled`` of a call it runs: the reply is dropped, as the SDK drops
  the reply of a cancelled request.

Everything else (prompts, resources, ping, unknown notifications, a malformed or unusual
line, a call whose arguments FastMCP must judge, anything before
``notifications/initialized``) is kept, in order, for FastMCP, which answers it exactly
as before: it gets the handshake and these lines replayed (``EarlyStart.pending``).

End of stdin ends the session: the fast path's calls in flight finish and answer, lines
kept for FastMCP are dropped unanswered (FastMCP drops its own calls in flight at end of
input), and FastMCP is never started for them.

Handover is at a message boundary and never concurrent: once FastMCP is ready, the fast
path starts no new call, waits for its calls in flight (still
reading, so a cancellation reaches them), and only then returns; from there FastMCP is
the only writer. FastMCP's import starts when the first call has been answered, when a
line waits for it, or ``STACK_DELAY_S`` after ``initialize``, whichever comes first:
both are Python-bound and share one GIL, so importing it beside the first search made
that search wait (measured: see docs/architecture.md, "initialize and the first search
before the MCP stack"). The background threads (folder sync, watcher, embedding) start
at the same moment, not with FastMCP's lifespan: a file saved in the first seconds
reached search 15 s later when they waited for FastMCP on the loaded 2 cores, 5 s
with them started here; the watcher first, and the first full sync without the
start delay once a call has been answered (``background.BackgroundSync``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb_mcp.server.prelude import EarlyStart, StackLoader, write_all
from kb_mcp.server.snapshot import valid_arguments

if TYPE_CHECKING:
    from kb_mcp.server.calls import LibraryHolder

log = logging.getLogger("kb_mcp.server")

POLL_S = 0.05  # how often the read loop looks whether FastMCP is ready or a call ended
# FastMCP's import starts at the latest this long after the library is warm and no call
# runs (if no answered call and no line for FastMCP came first): a client that never
# calls a tool still gets the full server, and its background sync, soon.
STACK_DELAY_S = 1.0
MAX_CALLS = 8  # calls the fast path runs at once; more go to FastMCP
FAST_LINE_BYTES = 256 * 1024  # a longer line (a big add_document) goes to FastMCP
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # jsonrpc.read_message repairs those


class FastPath:
    """The session between the prelude's ``initialize`` answer and FastMCP (module doc)."""

    def __init__(
        self,
        holder: LibraryHolder,
        tools: dict[str, Any],
        stdin_fd: int,
        wire_fd: int,
        stack: StackLoader,
        early: EarlyStart,
        warmed: threading.Event | None = None,
    ) -> None:
        self._holder = holder
        self._warmed = warmed or threading.Event()
        self._tools = tools  # the tools/list result
        self._schemas = {tool["name"]: tool["inputSchema"] for tool in tools["tools"]}
        self._stdin = stdin_fd
        self._wire = wire_fd
        self._stack = stack
        self._early = early
        self._lock = threading.Lock()  # the wire, and the two sets below
        self._running: dict[str | int, threading.Thread] = {}
        self._cancelled: set[str | int] = set()
        self._for_fastmcp = bytearray()
        self._deferred = False  # a line that is not the handshake waits for FastMCP
        self._initialized = False
        self._answered = 0
        self._broken = False  # the client closed its end of stdout
        self._quiet_since: float | None = None  # since the library is warm and no call runs
        # With FastMCP's import; its argument: whether the first call has been answered
        # (or none came in ``STACK_DELAY_S`` of quiet), so background work may begin now.
        self.on_stack_start: Callable[[bool], None] | None = None

    def run(self) -> EarlyStart | None:
        """Serve until FastMCP takes over; what it must replay (``None``: nothing, the
        session ended with stdin or stdout closed)."""
        buffer = bytearray(self._early.pending)
        line_end = buffer.find(b"\n")
        self._for_fastmcp += buffer[: line_end + 1]  # the initialize line, for the handshake
        del buffer[: line_end + 1]
        eof = False
        while not self._broken:
            buffer, over_long = self._take_lines(buffer)
            self._maybe_start_stack()
            if over_long or (self._draining() and self._idle()):
                break
            if not self._readable():
                continue
            chunk = os.read(self._stdin, 65536)
            if not chunk:
                eof = True
                break
            buffer += chunk
        self._wait_for_calls()
        if self._broken or eof:
            # The session is over: FastMCP too answers nothing once stdin has ended (its
            # calls in flight are dropped), so the lines kept for it are dropped as well.
            return None
        pending = bytes(self._for_fastmcp + buffer)
        return EarlyStart(pending, answered=True, answered_id=self._early.answered_id)

    # -- reading -----------------------------------------------------------------

    def _readable(self) -> bool:
        try:
            ready, _, _ = select.select([self._stdin], [], [], POLL_S)
        except (OSError, ValueError):
            return True  # let os.read report it
        return bool(ready)

    def _take_lines(self, buffer: bytearray) -> tuple[bytearray, bool]:
        """Handle every whole line in ``buffer``; the rest, and whether it is over-long
        (then reading stops here and FastMCP's reader takes the line as it comes)."""
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[: end + 1])
            del buffer[: end + 1]
            if not self._handle(line.rstrip(b"\r\n")):
                self._keep(line)
        if len(buffer) > FAST_LINE_BYTES:
            self._deferred = True
            return buffer, True
        return buffer, False

    def _keep(self, line: bytes) -> None:
        """A line for FastMCP, in order; anything but the handshake's notification makes
        the fast path hand over as soon as it can."""
        self._for_fastmcp += line
        if not _is_initialized_notification(line):
            self._deferred = True

    def _handle(self, line: bytes) -> bool:
        """Answer ``line`` here when the fast path can; False leaves it to FastMCP."""
        message = _plain_message(line)
        if message is None:
            return False
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/initialized":
                self._initialized = True
                return False  # FastMCP's session needs it too
            return method == "notifications/cancelled" and self._cancel(message.get("params"))
        if not self._initialized or self._draining() or method not in ("tools/list", "tools/call"):
            return False
        request_id = message["id"]
        with self._lock:
            if request_id in self._running or len(self._running) >= MAX_CALLS:
                return False
        if method == "tools/list":
            if message.get("params") not in (None, {}):
                return False  # a cursor, or metadata: FastMCP's
            self._send({"jsonrpc": "2.0", "id": request_id, "result": self._tools})
            return True
        return self._start_call(request_id, message.get("params"))

    def _cancel(self, params: Any) -> bool:
        """A cancellation of one of our calls: its reply will not be sent."""
        if not isinstance(params, dict):
            return False
        request_id = params.get("requestId")
        with self._lock:
            if request_id not in self._running:
                return False
            self._cancelled.add(request_id)
        return True

    # -- calls -------------------------------------------------------------------

    def _start_call(self, request_id: str | int, params: Any) -> bool:
        found = self._call_of(params)
        if found is None:
            return False
        tool, arguments = found
        thread = threading.Thread(
            target=self._call, args=(request_id, tool, arguments), name=f"kb-mcp-call-{tool}"
        )
        with self._lock:
            self._running[request_id] = thread
        thread.start()
        return True

    def _call_of(self, params: Any) -> tuple[str, dict[str, Any]] | None:
        """``(tool, arguments)`` when ``params`` is a call the fast path may run."""
        if not isinstance(params, dict) or not set(params) <= {"name", "arguments", "_meta"}:
            return None
        meta = params.get("_meta", {})
        if not isinstance(meta, dict) or "progressToken" in meta:
            return None
        tool, arguments = params.get("name"), params.get("arguments", {})
        schema = self._schemas.get(tool) if isinstance(tool, str) else None
        if schema is None or not isinstance(arguments, dict):
            return None
        if not valid_arguments(arguments, schema):
            return None
        defaults = {
            name: spec["default"]
            for name, spec in schema["properties"].items()
            if "default" in spec and name not in arguments
        }
        return tool, {**defaults, **arguments}

    def _call(self, request_id: str | int, tool: str, arguments: dict[str, Any]) -> None:
        from kb_mcp.server import calls

        try:
            output = calls.audited(self._holder, tool, arguments)
            result: dict[str, Any] = {
                "content": [{"text": output.text, "type": "text"}],
                "isError": False,
                "structuredContent": output.data,
            }
        except calls.ToolFailed as exc:
            result = {"content": [{"text": str(exc), "type": "text"}], "isError": True}
        except BaseException:  # never let a thread die without a reply
            log.exception("fast-path call of %s failed", tool)
            result = {"content": [{"text": calls.INTERNAL_ERROR, "type": "text"}], "isError": True}
        with self._lock:
            del self._running[request_id]
            if request_id in self._cancelled:
                self._cancelled.discard(request_id)
                return
            self._answered += 1
            self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _wait_for_calls(self) -> None:
        """Every call in flight finished (its reply written, or dropped if cancelled)."""
        while True:
            with self._lock:
                threads = list(self._running.values())
            if not threads:
                return
            threads[0].join()

    def _idle(self) -> bool:
        with self._lock:
            return not self._running

    def _draining(self) -> bool:
        """No new call starts here: FastMCP is ready. (A line waiting for FastMCP does
        not stop the fast path: a client that lists prompts and resources at start, as
        agents do, would otherwise wait for FastMCP's import for its first search.)"""
        return self._stack.done()

    def _maybe_start_stack(self) -> None:
        """Start FastMCP's import when a line waits for it, once the first call has been
        answered, or after ``STACK_DELAY_S`` of quiet once the library is warm."""
        if self._stack.started():
            return
        if not self._warmed.is_set() or not self._idle():
            self._quiet_since = None
            if not self._deferred:
                return
        now = time.monotonic()
        self._quiet_since = self._quiet_since or now
        if self._deferred or self._answered or now - self._quiet_since >= STACK_DELAY_S:
            if self.on_stack_start is not None:
                self.on_stack_start(bool(self._answered) or not self._deferred)
            self._stack.start()

    # -- writing -----------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._write(message)

    def _write(self, message: dict[str, Any]) -> None:
        """One reply line (the lock held); an error reply redacted as ``stdio`` does."""
        from kb_mcp.server.snapshot import encode

        if message["result"].get("isError") is True:
            from kb_mcp import render

            message = render.to_data(message)
        try:
            write_all(self._wire, encode(message) + b"\n")
        except OSError:
            log.warning("the client closed the protocol's stdout; ending the session")
            self._broken = True


def _plain_message(line: bytes) -> dict[str, Any] | None:
    """``line`` as a JSON-RPC 2.0 object the fast path may look at, else None (it goes to
    FastMCP, whose reader has the error messages and the repairs)."""
    if len(line) > FAST_LINE_BYTES or _ESCAPED_SURROGATE.search(line):
        return None
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if not set(message) <= {"jsonrpc", "id", "method", "params"}:
        return None
    if not isinstance(message.get("method"), str):
        return None
    if "id" in message and (
        isinstance(message["id"], bool) or not isinstance(message["id"], str | int)
    ):
        return None
    return message


def _is_initialized_notification(line: bytes) -> bool:
    message = _plain_message(line.rstrip(b"\r\n"))
    return (
        message is not None
        and "id" not in message
        and (message["method"] == "notifications/initialized")
    )


def serve_early(
    holder: LibraryHolder,
    stdin_fd: int,
    wire_fd: int,
    stack: StackLoader,
    early: EarlyStart,
    work: list[Any],
) -> EarlyStart | None:
    """Warm the library in the background and run the fast path (``FastPath.run``).

    The server's background threads (``background.BackgroundWork``) start with
    FastMCP's import; ``work`` receives them, for FastMCP's lifespan and the final stop.
    """
    from kb_mcp.server import snapshot

    warmed = threading.Event()
    holder.on_open = load_model
    threading.Thread(target=warm, args=(holder, warmed), name="kb-mcp-warm", daemon=True).start()
    tools = snapshot.load(holder.settings)
    path = FastPath(holder, tools, stdin_fd, wire_fd, stack, early, warmed)
    path.on_stack_start = lambda settled: _start_background(holder, work, settled)
    return path.run()


def _start_background(holder: LibraryHolder, work: list[Any], settled: bool) -> None:
    """The background threads; the first full sync at once when the first call has been
    answered (``settled``), else after ``background.START_DELAY_S``: a line waiting for
    FastMCP may start them while the first search still runs."""
    from kb_mcp.server.background import START_DELAY_S, BackgroundWork

    settings = holder.settings
    background = BackgroundWork(holder.get, settings.sync_interval_s, settings.watch)
    work.append(background)
    background.start(sync_delay_s=0.0 if settled else START_DELAY_S)


def load_model(library: Any) -> None:
    """Start loading the embedding model in the background when searches can use it; a
    search meanwhile answers from keywords and says why (``Library.MODEL_LOADING``).

    Measured (issue 10, a 300-file library with local vectors, load 13 on 2 cores): a
    first hybrid search that waited for the model ran past the 2 s search deadline and
    failed; with the keyword fallback it answered in 0.9-1.0 s of CPU, and hybrid search
    followed within about a second.
    """
    if library.settings.embedder == "none":
        return
    state = library.vectors.state()
    start = getattr(state.embedder, "load_in_background", None)  # the local model has it
    if state.usable and start is not None:
        start()


def warm(holder: LibraryHolder, warmed: threading.Event) -> None:
    """Open the library, and load what the first search would: the tool bodies' modules
    and the vector codes (the model: ``load_model``, run as the library opens)."""
    try:
        library = holder.get()
        from kb_mcp import render  # noqa: F401  (imported by a call otherwise)
        from kb_mcp.server import budget  # noqa: F401

        if library.settings.embedder != "none":
            library.vectors.warm()
    except Exception:  # the first call opens it again and reports what is wrong
        log.warning("warming the library failed", exc_info=True)
    finally:
        warmed.set()
