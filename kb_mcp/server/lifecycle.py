"""The session's order: ``initialize`` first, then the server's background work.

Two things hang on the handshake, both seen through FastMCP's public middleware hooks:

- A request before ``initialize`` gets an error that says so. The SDK answers it with a
  bare "Invalid request parameters" (its pinned compatibility code, -32602, kept here)
  and drops a notification in silence, so that is logged.
- The background work (folder sync, watcher, linking, embedding; ``server/background``)
  starts once the client has the ``initialize`` answer, which its
  ``notifications/initialized`` proves (or any later request, from a client that skips
  the notification): importing and syncing beside the handshake would delay the answer
  on which a client's start-up waits (issue 10).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from fastmcp.server.middleware import Middleware
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

log = logging.getLogger("kb_mcp.server")


class Lifecycle(Middleware):
    """Clear errors before ``initialize``; ``on_ready(first_call)`` once, after its answer
    (``first_call`` is set once a tool call has been answered)."""

    def __init__(self, on_ready: Callable[[threading.Event], None]) -> None:
        self.initialized = False
        self.first_call = threading.Event()  # set once a tool call has been answered
        self._on_ready = on_ready
        self._ready = threading.Event()

    def _start(self) -> None:
        if self.initialized and not self._ready.is_set():
            self._ready.set()
            self._on_ready(self.first_call)

    async def on_initialize(self, context: Any, call_next: Any) -> Any:
        result = await call_next(context)
        self.initialized = True
        return result

    async def on_notification(self, context: Any, call_next: Any) -> Any:
        if context.method == "notifications/initialized":
            self.initialized = True  # not every handshake passes through on_initialize
            self._start()
        elif not self.initialized:
            log.warning("dropped notification %s: it came before initialize", context.method)
        return await call_next(context)

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        try:
            return await call_next(context)
        finally:
            self.first_call.set()

    async def on_request(self, context: Any, call_next: Any) -> Any:
        if context.method != "initialize":
            self._start()
        try:
            result = await call_next(context)
        except MCPError as exc:
            if self.initialized or context.method == "initialize" or exc.code != INVALID_PARAMS:
                raise
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"the session is not initialized: send initialize (then "
                f"notifications/initialized) before {context.method}",
            ) from exc
        if not self.initialized:  # the session accepted it, so the handshake is done
            self.initialized = True
            self._start()
        return result
