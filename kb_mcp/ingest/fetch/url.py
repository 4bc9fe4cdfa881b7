"""What a crawl may ask for, and the one form each page's URL is kept under.

A URL is refused before any request when it is not http(s), has no host, or carries
credentials (``https://user:secret@host/``): a credential would be sent to the site, kept in
the manifest and shown in every citation. ``normalize`` gives a page one form (scheme and
host in lower case, the default port and the fragment dropped, ``.`` and ``..`` resolved),
so two links to the same page are fetched once.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, urljoin, urlsplit, urlunsplit

from kb_mcp.errors import InvalidInput

SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_CHARS = 2048  # what browsers and servers commonly accept; longer is a trap


def check(url: str) -> SplitResult:
    """The parts of ``url`` when a crawl may request it; ``InvalidInput`` saying why not."""
    if len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"URL is {len(url)} characters, over {MAX_URL_CHARS}")
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise InvalidInput("URL holds spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"not a valid URL: {exc}") from exc
    if parts.scheme.lower() not in SCHEMES:
        scheme = parts.scheme or "none"
        raise InvalidInput(f"only http and https URLs are fetched, not {scheme!r}")
    if not parts.hostname:
        raise InvalidInput("URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(
            "URL holds credentials (user:password@); they are never sent or stored",
            hint="give the site's public URL; kb-mcp fetches only what needs no login",
        )
    if port == 0:
        raise InvalidInput("URL has port 0")
    return parts


def normalize(url: str) -> str:
    """``url`` (checked) in one form: no fragment, lower-case scheme and host, no default
    port, the path's dot segments resolved and its percent-escapes in one spelling."""
    parts = check(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    port = parts.port
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = posixpath.normpath(parts.path or "/")
    path = "/" + path.lstrip("/")  # normpath keeps a leading "//"
    if parts.path.endswith("/") and path != "/":
        path += "/"
    path = quote(path, safe="/%:@!$&'()*+,;=-._~")  # non-ASCII escaped, escapes kept
    query = quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return urlunsplit((scheme, netloc, path, query, ""))


def resolve(base: str, link: str) -> str | None:
    """The normalized absolute URL a link on the page ``base`` points at; None when it is
    not a page a crawl may fetch (another scheme, credentials, malformed)."""
    try:
        return normalize(urljoin(base, link.strip()))
    except (InvalidInput, ValueError):
        return None


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a normalized URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def default_prefix(url: str) -> str:
    """The crawl's default bound: the start URL's own path. ``https://h/docs/`` crawls what
    is under ``/docs/``; ``https://h/rfc/rfc9309.html`` is that page alone."""
    return urlsplit(url).path or "/"


@dataclass(frozen=True, slots=True)
class Scope:
    """The pages a crawl may store: one origin, paths under ``prefix``, ``include`` globs
    (any; none means all) and no ``exclude`` glob, matched against the path and query."""

    origin: str
    prefix: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def holds(self, url: str) -> bool:
        if origin(url) != self.origin:
            return False
        parts = urlsplit(url)
        if not parts.path.startswith(self.prefix):
            return False
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        if self.include and not any(fnmatch.fnmatchcase(target, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(target, g) for g in self.exclude)
