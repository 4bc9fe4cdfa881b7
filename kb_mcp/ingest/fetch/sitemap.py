"""Sitemaps (sitemaps.org): the pages a site lists, with when each last changed.

A crawl reads the sitemaps robots.txt names, else ``/sitemap.xml``, and a sitemap index one
level down. A page's ``lastmod`` lets a re-sync skip asking for a page not changed since
it was fetched. Sitemaps are untrusted XML: a document type declaration (where entity
expansion attacks live) is refused before parsing, a file is read up to ``MAX_BYTES``
(gzip included, inflated within the same bound) and ``MAX_URLS`` pages are kept.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

from kb_mcp.errors import KbError
from kb_mcp.ingest.fetch import url as urls
from kb_mcp.ingest.fetch.net import Fetcher

MAX_BYTES = 10 * 1024 * 1024
MAX_URLS = 50_000
MAX_FILES = 20  # sitemap files read per crawl (an index and what it lists)


def load(
    fetcher: Fetcher, locations: list[str], wait: Callable[[], None] = lambda: None
) -> tuple[dict[str, str | None], list[str]]:
    """Pages the sitemaps at ``locations`` list (normalized URL → lastmod as an ISO UTC
    timestamp, or None), and what went wrong reading them (a crawl goes on without).
    ``wait`` is called before each request (the crawl's pace: sitemaps are requests to
    the site like any other)."""
    pages: dict[str, str | None] = {}
    problems: list[str] = []
    queue = [(loc, 0) for loc in locations]
    seen: set[str] = set()
    while queue and len(seen) < MAX_FILES and len(pages) < MAX_URLS:
        location, level = queue.pop(0)
        try:
            location = urls.normalize(location)
        except KbError as exc:
            problems.append(f"sitemap {location}: {exc.message}")
            continue
        if location in seen:
            continue
        seen.add(location)
        wait()
        try:
            root = _parse(_body(fetcher, location))
        except (KbError, ValueError, ElementTree.ParseError) as exc:
            problems.append(f"sitemap {location}: {getattr(exc, 'message', exc)}")
            continue
        if root is None:
            continue
        kind = _local(root.tag)
        for entry in root:
            loc = _child_text(entry, "loc")
            if not loc:
                continue
            if kind == "sitemapindex":
                if level == 0:
                    queue.append((loc, 1))
                continue
            page = urls.resolve(location, loc)
            if page is not None and len(pages) < MAX_URLS:
                pages[page] = _lastmod(_child_text(entry, "lastmod"))
    return pages, problems


def _body(fetcher: Fetcher, location: str) -> bytes:
    response = fetcher.probe(location, MAX_BYTES)
    if response.status != 200:
        return b""
    body = response.body
    if body[:2] == b"\x1f\x8b":  # a .xml.gz file sent as it is
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        body = inflate.decompress(body, MAX_BYTES + 1)
        if len(body) > MAX_BYTES:
            raise ValueError(f"inflates past {MAX_BYTES:,} bytes")
    return body


def _parse(body: bytes) -> ElementTree.Element | None:
    if not body.strip():
        return None
    if b"<!DOCTYPE" in body[:4096].upper() or b"<!ENTITY" in body.upper():
        raise ValueError("a document type declaration; refused (entity expansion)")
    return ElementTree.fromstring(body)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(entry: ElementTree.Element, name: str) -> str | None:
    for child in entry:
        if _local(child.tag) == name and child.text:
            return child.text.strip()
    return None


def _lastmod(text: str | None) -> str | None:
    """A W3C datetime (``2026-11-02T10:00:00+01:00``) as UTC ISO, the time after which a
    fetch is known to hold that version; None when absent or unreadable. A bare date
    (``2026-11-02``) names a day in the site's time zone: the version is known only after
    that day has ended everywhere (UTC+14), so a page changed later the same day is
    still asked for."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if len(text.strip()) == 10:  # a date alone
        when = when.replace(tzinfo=UTC) + timedelta(days=1, hours=14)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")
