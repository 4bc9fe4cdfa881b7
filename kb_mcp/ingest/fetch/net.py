"""One guarded HTTP request: the only place kb-mcp opens a network connection.

A crawl follows links someone else wrote, so a page could point it at the user's own
network (``http://192.168.1.1/``, a cloud metadata address, ``localhost``). Every request
therefore resolves the host itself and refuses the request when any address the name
resolves to is not public (``ipaddress``'s ``is_global``: loopback, private, link-local,
shared, reserved and multicast ranges are not), unless the user allowed private networks
(all of them, or the ones named). The connection is then made to the address that was
checked, not to the name again, so a second DNS answer cannot swap it (DNS rebinding);
the Host header and the TLS certificate check still use the name. Redirects are followed
here, one hop at a time, each hop checked the same way. Proxy settings in the environment
are not used: a proxy would resolve names where this check cannot see.

Limits per response: its size (``max_bytes``, decompressed; a gzip body that inflates
past it stops there), its time (``timeout`` for the whole exchange: a watchdog shuts the
socket at the deadline, however slowly the server trickles), the number of redirects
and the size of headers (http.client's own: 100 headers, 64 KiB a line).
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import ipaddress
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from kb_mcp import __version__
from kb_mcp.errors import InvalidInput, Refused, Unavailable
from kb_mcp.ingest.fetch import url as urls

USER_AGENT = f"kb-mcp/{__version__} (documentation fetcher)"
MAX_REDIRECTS = 5
READ_CHUNK = 64 * 1024

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


class Blocked(Refused):
    """A request to an address the network policy does not allow."""


class FetchFailed(Unavailable):
    """A request that got no usable answer: connection, TLS, timeout, protocol, limits."""


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Which addresses requests may reach: public ones always; non-public ones when
    ``allow_private`` (every one) or when inside one of ``networks``."""

    allow_private: bool = False
    networks: tuple[Network, ...] = ()

    @classmethod
    def from_flag(cls, value: Sequence[str] | None) -> NetworkPolicy:
        """``--allow-private-network`` given bare (``[]``: all), with networks (CIDR or
        addresses), or not at all (None)."""
        if value is None:
            return cls()
        if not value:
            return cls(allow_private=True)
        try:
            networks = tuple(ipaddress.ip_network(v, strict=False) for v in value)
        except ValueError as exc:
            raise InvalidInput(f"--allow-network: {exc}") from exc
        return cls(networks=networks)

    def allows(self, address: Address) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
        if address.is_global and not address.is_multicast:
            return True
        return self.allow_private or any(address in n for n in self.networks)

    def describe(self) -> list[str]:
        """For the manifest: what the user allowed (``[]``: nothing beyond public)."""
        return ["all"] if self.allow_private else [str(n) for n in self.networks]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def checked_address(host: str, port: int, policy: NetworkPolicy, resolve: Resolver) -> str:
    """The address to connect to for ``host``: all it resolves to must be allowed (a name
    answering one public and one private address could be served either)."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [str(literal)]
    else:
        try:
            found = list(resolve(host, port))
        except socket.gaierror as exc:
            raise FetchFailed(f"cannot resolve {host}: no such host name") from exc
        except (OSError, UnicodeError) as exc:
            raise FetchFailed(f"cannot resolve {host}: {exc}") from exc
    if not found:
        raise FetchFailed(f"{host} resolves to no address")
    for text in found:
        address = ipaddress.ip_address(text.split("%")[0])
        if not policy.allows(address):
            raise Blocked(
                f"{host} resolves to {address}, a {_kind(address)} address; requests "
                "there need --allow-private-network",
                hint="kb-mcp add URL --allow-private-network (every private network) or "
                "--allow-network CIDR (that one)",
            )
    return found[0]


def _kind(address: Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for name in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    return "non-public"


@dataclass(frozen=True, slots=True)
class Response:
    """A final answer (after redirects). ``url``: the normalized URL that answered;
    ``redirects``: the URLs before it. ``body`` is empty for a 304 and for statuses whose
    body the caller does not read."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes = b""
    redirects: tuple[str, ...] = ()

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip("\"'")
        return None


@dataclass(slots=True)
class Fetcher:
    """Guarded GETs with the crawl's limits; ``transferred`` counts body bytes received."""

    policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    timeout: float = 30.0
    max_bytes: int = 20 * 1024 * 1024
    resolve: Resolver = system_resolver
    tls: ssl.SSLContext = field(default_factory=ssl.create_default_context)
    truncate: bool = False  # past ``max_bytes``, keep what came instead of failing
    # (media type, URL) → whether a 2xx body is read at all: a type the caller cannot use
    # (an image, a video) is not downloaded only to be thrown away. None: every body.
    reads: Callable[[str, str], bool] | None = None
    transferred: int = 0
    requests: int = 0

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """GET ``url`` following redirects (each checked); the final response. Statuses
        other than 2xx are answers too (the caller decides); the body is read for 2xx
        only. Raises ``Blocked``, ``InvalidInput`` (a redirect to a URL that may not be
        fetched) or ``FetchFailed``."""
        chain: list[str] = []
        current = urls.normalize(url)
        while True:
            status, head, body = self._exchange(current, headers or {})
            location = head.get("location")
            if status in (301, 302, 303, 307, 308) and location:
                chain.append(current)
                if len(chain) > MAX_REDIRECTS:
                    raise FetchFailed(f"more than {MAX_REDIRECTS} redirects from {chain[0]}")
                try:
                    target = urls.normalize(urljoin(current, location))
                except InvalidInput as exc:
                    # the reason first: the crawl sums refusals by their first clause
                    raise InvalidInput(
                        f"a redirect to a refused URL: {exc.message} (from {current})"
                    ) from exc
                if target in chain:
                    raise FetchFailed(f"redirect loop: {' → '.join([*chain, target])}")
                current = target
                continue
            return Response(current, status, head, body, tuple(chain))

    def probe(self, url: str, max_bytes: int, *, truncate: bool = False) -> Response:
        """GET ``url`` reading any body up to ``max_bytes`` (robots.txt, a sitemap: files
        about the site, not pages, so not ``reads``'s to judge), counted in this fetcher."""
        other = dataclasses.replace(
            self, max_bytes=max_bytes, truncate=truncate, reads=None, transferred=0, requests=0
        )
        try:
            return other.get(url)
        finally:
            self.requests += other.requests
            self.transferred += other.transferred

    def _exchange(self, url: str, extra: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or urls.DEFAULT_PORTS[parts.scheme]
        address = checked_address(host, port, self.policy, self.resolve)
        deadline = time.monotonic() + self.timeout
        conn = _connection(parts.scheme, host, port, address, self.timeout, self.tls)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.requests += 1
        watchdog: _Watchdog | None = None
        try:
            conn.putrequest("GET", target, skip_accept_encoding=True)
            for name, value in {
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/markdown,text/plain,"
                "application/pdf;q=0.9,*/*;q=0.1",
                "Accept-Encoding": "gzip",
                "Connection": "close",
                **extra,
            }.items():
                conn.putheader(name, value)
            conn.endheaders()  # connected (within ``timeout``) and the request sent
            # The whole exchange's deadline, however the server trickles its headers or
            # body: past it the socket is shut, which ends any read waiting on it.
            watchdog = _Watchdog(conn.sock, deadline - time.monotonic())
            try:
                response = conn.getresponse()
                head = {k.lower(): v for k, v in response.getheaders()}
                body = b""
                media = head.get("content-type", "").split(";")[0].strip().lower()
                wanted = self.reads is None or self.reads(media, url)
                if 200 <= response.status < 300 and wanted:
                    body = self._read_body(response, head)
            finally:
                watchdog.cancel()
            if watchdog.fired:
                raise FetchFailed(f"not answered in {self.timeout:g} s")
            return response.status, head, body
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            if (watchdog is not None and watchdog.fired) or isinstance(exc, TimeoutError):
                raise FetchFailed(f"not answered in {self.timeout:g} s") from exc
            raise FetchFailed(_plain(exc)) from exc
        finally:
            conn.close()

    def _read_body(self, response: http.client.HTTPResponse, head: dict[str, str]) -> bytes:
        """The body, decompressed, bounded by ``max_bytes`` (the deadline is the
        watchdog's)."""
        length = head.get("content-length", "")
        too_long = length.isdigit() and int(length) > self.max_bytes
        if too_long and not self.truncate and "gzip" not in head.get("content-encoding", ""):
            raise FetchFailed(f"{int(length):,} bytes, over the {self.max_bytes:,}-byte cap")
        gzip = head.get("content-encoding", "").strip().lower() in ("gzip", "x-gzip")
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
        parts: list[bytes] = []
        size = 0
        while chunk := response.read1(READ_CHUNK):
            self.transferred += len(chunk)
            if inflate is not None:
                chunk = inflate.decompress(chunk, self.max_bytes + 1 - size)
            size += len(chunk)
            if size > self.max_bytes and self.truncate:
                parts.append(chunk[: len(chunk) - (size - self.max_bytes)])
                break
            if size > self.max_bytes:
                raise FetchFailed(f"over the {self.max_bytes:,}-byte cap per page")
            parts.append(chunk)
        return b"".join(parts)


def _plain(exc: BaseException) -> str:
    """What went wrong with a request, in words rather than Python's."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the site's TLS certificate was refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "the site closed the connection"
    if isinstance(exc, http.client.HTTPException):
        return f"not a valid HTTP answer ({type(exc).__name__}: {exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return f"{type(exc).__name__}: {exc}"


class _Watchdog:
    """Shuts ``sock`` after ``seconds`` unless cancelled first."""

    def __init__(self, sock: socket.socket | None, seconds: float) -> None:
        self.fired = False
        self._sock = sock
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _connection(
    scheme: str, host: str, port: int, address: str, timeout: float, tls: ssl.SSLContext
) -> http.client.HTTPConnection:
    """A connection to ``host`` made to ``address`` (the checked one)."""
    if scheme == "https":
        return _PinnedHTTPS(host, port, address, timeout, tls)
    return _PinnedHTTP(host, port, address, timeout)


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(
        self, host: str, port: int, address: str, timeout: float, tls: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=tls)
        self._address = address
        self._tls = tls

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
