"""Bind, print the URL, serve until Ctrl-C.

The socket is bound here (port 0: the kernel picks a free one) before uvicorn starts, so
the printed URL is the real one and no other process can take the port in between.
Uvicorn's access log is off: it would write every query (and a token) to the terminal.
"""

from __future__ import annotations

import secrets
import socket
import sys
import threading
import webbrowser
from typing import TYPE_CHECKING, TextIO

from kb_mcp.errors import InvalidInput
from kb_mcp.web.guard import TOKEN_PARAM, Policy, is_loopback

if TYPE_CHECKING:
    from kb_mcp.library import Library

DEFAULT_HOST = "127.0.0.1"
MAX_PORT = 65_535
SHUTDOWN_WAIT_S = 5  # Ctrl-C waits this long for pages being built, then cancels them


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``InvalidInput`` names what failed."""
    if not 0 <= port <= MAX_PORT:
        raise InvalidInput(
            f"port {port} is not a TCP port", hint="pass --port 1-65535, or 0 for any free one"
        )
    try:
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another --port (0 = any free one) or --host",
        ) from exc
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int, token: str | None) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return f"http://{shown}:{port}/" + (f"?{TOKEN_PARAM}={token}" if token else "")


def run_web(
    library: Library,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    client_timeout: int,
    max_connections: int,
    open_browser: bool = False,
    out: TextIO = sys.stdout,
) -> None:
    """Serve the web view of ``library`` until interrupted; the URL goes to ``out`` first.

    Beyond loopback a random token is made for this run and must be in the URL (then a
    cookie); on loopback Host / Origin checks are the guard (``web/guard.py``). A client
    that keeps the server waiting ``client_timeout`` seconds, to send a request or to
    read its answer, is disconnected; past ``max_connections`` open
    connections a new one is answered 503 (``web/connections.py``); the CLI's defaults
    are ``limits.WEB_CLIENT_TIMEOUT_S`` and ``limits.WEB_MAX_CONNECTIONS``.
    """
    import uvicorn

    from kb_mcp.web.app import build_app, warm
    from kb_mcp.web.connections import bounded_protocol

    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    sock = bind(host, port)
    warm(library)
    url = url_of(host, sock.getsockname()[1], token)
    app = build_app(library, Policy(host, token))
    print(f"kb-mcp web: serving {library.home} at {url}  (Ctrl-C stops)", file=out, flush=True)
    if not is_loopback(host):
        print("kb-mcp web: bound beyond loopback; the URL's token is required", file=out)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(
        app,
        http=bounded_protocol(client_timeout, max_connections),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=SHUTDOWN_WAIT_S,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
