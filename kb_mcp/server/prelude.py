"""What ``kb-mcp serve`` does before the MCP stack is imported: fds, and ``initialize``.

Importing FastMCP and the MCP SDK costs 1.2-2.5 s of CPU (measured with ``python -X
importtime`` on these 2 cores: ~200 pydantic models of two protocol revisions in
``mcp_types``, FastMCP's settings, auth and HTTP transports), far over the 0.5 s in
which an agent should see ``initialize`` answered (issue 10). So the server starts in
two steps. This module imports only the standard library:

1. ``protect_stdout`` / ``protect_stdin`` (see ``server/stdio.py`` for why).
2. ``StackLoader`` imports the MCP stack and builds the server in a thread, once the
   fast path starts it.
3. Meanwhile ``answer_initialize`` reads stdin up to the first line; when it is a
   well-formed ``initialize`` request it is answered at once with the same result the
   full server gives (``initialize_result``; ``tests/test_server_prelude.py`` compares
   the two, so a FastMCP upgrade that changes its capabilities fails a test, not a
   client). Its instructions come from ``server/instructions.py``, which adds only the
   settings and apsw (one read-only query) to the imports.
4. ``server/fastpath.py`` then answers ``tools/list`` and plain ``tools/call``s until the
   full server is ready, keeping every other line for it.
5. The ``initialize`` line and the lines kept are handed to the full server
   (``serve_stdio``'s ``pending``), which runs the handshake itself, so its session
   state is its own; its reply to that one request is dropped as already sent.

Anything other than a well-formed ``initialize`` as the first line (a ``server/discover``
probe, a malformed request, end of input) is left entirely to the full server, which
answers it once it is ready: the early answers are an optimisation whose bytes tests
pin to FastMCP's, never a second protocol implementation.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kb_mcp import __version__

if TYPE_CHECKING:
    from kb_mcp.settings import Settings

SERVER_NAME = "kb-mcp"
# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS, repeated so the handshake needs no
# import of the SDK; a test keeps the two equal. A request for any other version gets
# the newest of these, as the SDK's ``_negotiate_initialize`` does.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# What FastMCP announces for a server with tools only (``create_initialization_options``
# of ``build_server``'s server); a test keeps the two equal.
CAPABILITIES: dict[str, Any] = {
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": False, "listChanged": True},
    "tools": {"listChanged": True},
}
FIRST_LINE_MAX_BYTES = 1024 * 1024  # an initialize is small; past this the full server decides


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


@dataclass(frozen=True, slots=True)
class EarlyStart:
    """What the prelude read and did: bytes for the full server, and the id answered."""

    pending: bytes
    answered: bool = False
    answered_id: str | int | None = None


def initialize_result(params: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The ``initialize`` result the full server gives for these (valid) params."""
    from kb_mcp.server.instructions import server_instructions  # stdlib, apsw: cheap

    requested = params.get("protocolVersion")
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "protocolVersion": version,
        "capabilities": CAPABILITIES,
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
        "instructions": server_instructions(settings.home, settings),
    }


def early_initialize(line: bytes) -> tuple[str | int, dict[str, Any]] | None:
    """``(id, params)`` when ``line`` is a well-formed ``initialize`` request, else None.

    Deliberately strict: whatever is unusual goes to the full server, which has the
    SDK's validation and our error messages.
    """
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "method", "params"}:
        return None
    request_id, params = message["id"], message["params"]
    if message["jsonrpc"] != "2.0" or message["method"] != "initialize":
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if not isinstance(params, dict) or not _valid_params(params):
        return None
    return request_id, params


def _valid_params(params: dict[str, Any]) -> bool:
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


def answer_initialize(stdin_fd: int, wire_fd: int, settings: Settings) -> EarlyStart:
    """Read up to the first line; answer it on ``wire_fd`` if it is an ``initialize``."""
    pending = bytearray()
    while b"\n" not in pending and len(pending) < FIRST_LINE_MAX_BYTES:
        chunk = os.read(stdin_fd, 65536)
        if not chunk:
            return EarlyStart(bytes(pending))
        pending += chunk
    line = bytes(pending).split(b"\n", 1)[0]
    found = early_initialize(line)
    if found is None:
        return EarlyStart(bytes(pending))
    request_id, params = found
    reply = {"jsonrpc": "2.0", "id": request_id, "result": initialize_result(params, settings)}
    write_all(wire_fd, (json.dumps(reply, separators=(",", ":")) + "\n").encode())
    return EarlyStart(bytes(pending), answered=True, answered_id=request_id)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` on ``fd`` (``os.write`` may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StackLoader:
    """Runs ``build`` (imports of the MCP stack, the server built) in a thread, once
    ``start`` is called (the fast path decides when: ``server/fastpath.py``)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._result: Any = None
        self._error: BaseException | None = None
        self._started = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-mcp-import", daemon=True)

    def start(self) -> StackLoader:
        """Start the build (a second call does nothing)."""
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def started(self) -> bool:
        return self._started

    def done(self) -> bool:
        """Whether ``build`` has finished (``result`` will not wait)."""
        return self._done.is_set()

    def result(self) -> Any:
        """What ``build`` returned, starting it if need be; its exception is raised here."""
        self.start()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def _run(self) -> None:
        try:
            self._result = self._build()
        except BaseException as exc:  # handed to the main thread by ``result``
            self._error = exc
        finally:
            self._done.set()
