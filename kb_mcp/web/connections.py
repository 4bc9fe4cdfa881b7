"""What one client may hold of the web server: deadlines to send its request and to read
its answer, and a cap on open connections (issue 20 item 7: 150 connections trickling a
header byte at a time stayed open for 40 s; nothing would ever have closed them).

Uvicorn has neither. Its keep-alive timeout starts only after a response and stops at the
next byte received; ``limit_concurrency`` answers 503 only once a request's head is
complete, so a connection that never completes one is never counted against it. Both are
added here at the one seam uvicorn offers for it, its public ``http=`` option: the class
below is uvicorn's h11 protocol with

- **a request deadline**: from the moment a connection opens, or its previous response
  ends, the whole request (head, and any body) must arrive within ``client_timeout``
  seconds, or the connection is closed. The deadline is not moved by each byte received,
  so trickling bytes does not keep a connection (slowloris). While the page is being
  built the clock is stopped: a slow page is never cut.
- **a reading deadline**: a client that stops reading its answer (the transport asks us
  to pause writing: its buffers are full) for ``client_timeout`` seconds is cut off, its
  unsent answer dropped. Otherwise a client that pipelines requests and never reads
  holds its connection, and the answers it never takes, for good.
- **a connection cap**: past ``max_connections`` open connections a new one is answered
  ``503`` and closed at once, before anything is read from it.

h11 is used rather than httptools (uvicorn's "auto" choice when installed): the web
view serves one person, and this is the protocol whose states the deadline reads
(``conn.their_state``, h11's public API).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# The states in which the client still owes us (part of) a request.
_RECEIVING = (h11.IDLE, h11.SEND_BODY)
_REFUSED = b"kb-mcp web: too many open connections; try again later\n"
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_REFUSED), _REFUSED)
)


class BoundedH11Protocol(H11Protocol):
    """Uvicorn's h11 protocol with the deadlines and the connection cap (their values set
    on the subclass ``bounded_protocol`` makes)."""

    client_timeout: float = 10.0
    max_connections: int = 64
    _deadline: asyncio.TimerHandle | None = None  # the request's
    _stalled: asyncio.TimerHandle | None = None  # the client not reading since

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(_REFUSAL)
            transport.close()
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.client_timeout, self.transport.abort)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        if self._stalled is not None:
            self._stalled.cancel()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Start the clock when the client owes a request, stop it once it has sent one."""
        if self.transport.is_closing():
            self._stop()
        elif self.conn.their_state in _RECEIVING:
            if self._deadline is None:
                self._deadline = self.loop.call_later(self.client_timeout, self._expire)
        else:
            self._stop()

    def _stop(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        """Past the deadline: abort, not close, which would first wait to flush whatever
        an earlier answer left unsent to a client that may not be reading either."""
        self._deadline = None
        if self.conn.their_state in _RECEIVING:
            self.transport.abort()


def bounded_protocol(client_timeout: float, max_connections: int) -> type[H11Protocol]:
    """The protocol class for uvicorn's ``http=`` option, with these bounds."""
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"client_timeout": client_timeout, "max_connections": max_connections},
    )
