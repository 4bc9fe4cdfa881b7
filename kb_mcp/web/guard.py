"""The rules every web request passes before a page is built, and the headers every
response carries. An ASGI middleware over pure checks.

- **Host** must name a loopback address or the address the server is bound to: a page on
  another site that points its own name at 127.0.0.1 (DNS rebinding) sends its own name as
  Host and is refused (421).
- **Origin**, when the browser sends one, must be this server's own origin (403): no other
  site's page can read ours through fetch.
- **Token**: bound beyond loopback, every request needs the random token of the printed
  URL (``?token=``), kept afterwards in an HttpOnly, SameSite=Strict cookie (401).
- **Read-only**: GET and HEAD only (405). There is no endpoint that writes.
- **Headers**: a CSP with no script at all and ``frame-ancestors 'none'``, nosniff,
  ``Referrer-Policy: no-referrer`` (the token never leaves in a Referer), no caching.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

TOKEN_PARAM = "token"
TOKEN_COOKIE = "kb_web_token"
READ_METHODS = frozenset({"GET", "HEAD"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
CSP = (
    "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name part of a Host header: ``[::1]:8080`` → ``::1``, ``a.b:80`` → ``a.b``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True, slots=True)
class Policy:
    """What this server accepts: the Host names (loopback always; the bound address too),
    and the token when bound beyond loopback (None on loopback)."""

    bound_host: str
    token: str | None

    def host_allowed(self, name: str) -> bool:
        """Loopback, or the bound address; any name when bound to every interface (then
        the token is what keeps a rebinding page out: its origin never got the cookie)."""
        bound = host_name(self.bound_host)
        return is_loopback(name) or name == bound or bound in WILDCARD_HOSTS


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    title: str
    message: str


def check(
    policy: Policy, method: str, headers: dict[str, str], query: str
) -> tuple[Refusal | None, bool]:
    """The refusal for this request (None: it may pass), and whether the token came in
    the query (so the response sets the cookie)."""
    if method not in READ_METHODS:
        return Refusal(405, "Method not allowed", "this view is read-only: GET only"), False
    host = headers.get("host", "")
    if not host:
        return Refusal(400, "Bad request", "the request has no Host header"), False
    if not policy.host_allowed(host_name(host)):
        message = f"this server answers for loopback and {policy.bound_host} only, not {host!r}"
        return Refusal(421, "Misdirected request", message), False
    origin = headers.get("origin")
    if origin is not None and origin.lower() != f"http://{host.lower()}":
        return Refusal(403, "Forbidden", f"requests from {origin!r} are not accepted"), False
    if policy.token is None:
        return None, False
    given = parse_qs(query).get(TOKEN_PARAM, [""])[0]
    if given and hmac.compare_digest(given, policy.token):
        return None, True
    cookie = SimpleCookie(headers.get("cookie", ""))
    kept = cookie[TOKEN_COOKIE].value if TOKEN_COOKIE in cookie else ""
    if kept and hmac.compare_digest(kept, policy.token):
        return None, False
    message = "open the URL `kb-mcp web` printed (it holds the access token)"
    return Refusal(401, "Token required", message), False


class Guard:
    """ASGI middleware: ``check`` each HTTP request, add the headers to every response."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        refusal, set_cookie = check(self.policy, scope["method"], headers, query)
        extra = list(SECURITY_HEADERS)
        if set_cookie and self.policy.token:
            cookie = f"{TOKEN_COOKIE}={self.policy.token}; HttpOnly; SameSite=Strict; Path=/"
            extra.append((b"set-cookie", cookie.encode()))
        if refusal is not None:
            await _refuse(send, refusal, extra)
            return

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(send: Send, refusal: Refusal, headers: list[tuple[bytes, bytes]]) -> None:
    body = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{refusal.status} "
        f"{html.escape(refusal.title)}</title></head><body><h1>{refusal.status} "
        f"{html.escape(refusal.title)}</h1><p>{html.escape(refusal.message)}</p></body></html>"
    ).encode()
    extra = [(b"allow", b"GET, HEAD")] if refusal.status == 405 else []
    start = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send(
        {
            "type": "http.response.start",
            "status": refusal.status,
            "headers": start + extra + headers,
        }
    )
    await send({"type": "http.response.body", "body": body})
