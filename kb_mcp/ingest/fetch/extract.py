"""A fetched page's body → what the mirror stores and what the crawl follows.

The text goes through the same readers as a file of that format (``ingest/readers``):
HTML without its site chrome, Markdown and plain text as they are; a PDF is stored as its
bytes and read by the PDF reader at sync, in its bounded process. The links, the page's
``<base>`` and its canonical URL are read from the raw HTML, chrome included: a site's
navigation is how its pages are found, though it is never stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin

from kb_mcp.chunk.markdown import in_fences
from kb_mcp.errors import Unreadable
from kb_mcp.ingest import readers
from kb_mcp.ingest.decode import decode_bytes
from kb_mcp.ingest.fetch import url as urls

# Media types read, and the suffix the mirror stores each under (which picks its reader).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SUFFIXES = {
    **dict.fromkeys(HTML_TYPES, ".md"),
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".md",
    "application/pdf": ".pdf",
}
# A missing or generic media type is judged by the URL's suffix.
_BY_URL_SUFFIX = {
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".rst": "text/plain",
    ".pdf": "application/pdf",
}
_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream"})
MAX_LINKS = 5_000  # links taken from one page


@dataclass(frozen=True, slots=True)
class Page:
    """What one page gives: ``text`` (Markdown) or ``data`` (a PDF's bytes), its title,
    the in-page links (absolute, normalized) and its canonical URL if it names one."""

    suffix: str
    text: str | None
    data: bytes | None
    title: str | None
    links: tuple[str, ...] = ()
    canonical: str | None = None


def media_type(declared: str, url: str) -> str | None:
    """The media type a page is read as, or None when kb-mcp reads no such page."""
    if declared in _GENERIC:
        path = url.split("?")[0].lower()
        declared = next((t for s, t in _BY_URL_SUFFIX.items() if path.endswith(s)), declared)
    return declared if declared in SUFFIXES else None


def extract(body: bytes, kind: str, url: str, charset: str | None = None) -> Page:
    """The page of ``body`` (of media type ``kind``, see ``media_type``) fetched from
    ``url``. Raises ``Unreadable`` as a reader does."""
    suffix = SUFFIXES[kind]
    if kind == "application/pdf":
        if not body.startswith(b"%PDF"):
            raise Unreadable("served as a PDF but is not one")
        return Page(suffix, None, body, None)
    if kind in HTML_TYPES:
        converted = readers.convert_bytes(body, ".html")
        text = decode_bytes(body, declared=charset)
        base, links, canonical = _links(text, url)
        markdown = absolute_links(converted.markdown, base)
        return Page(suffix, markdown, None, converted.title, links, canonical)
    key = ".md" if kind in ("text/markdown", "text/x-markdown") else ".txt"
    converted = readers.convert_bytes(body, key)
    return Page(suffix, converted.markdown, None, converted.title)


class _LinkParser(HTMLParser):
    """``<a href>``, ``<area href>``, ``<base href>`` and ``<link rel=canonical>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.canonical: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v for k, v in attrs if v is not None}
        href = values.get("href")
        if not href:
            return
        if tag in ("a", "area") and len(self.hrefs) < MAX_LINKS:
            if "nofollow" not in values.get("rel", "").lower().split():
                self.hrefs.append(href)
        elif tag == "base" and self.base is None:
            self.base = href
        elif tag == "link" and "canonical" in values.get("rel", "").lower().split():
            self.canonical = self.canonical or href


_MARKDOWN_LINK = re.compile(r"\]\(([^()\s]+)\)")


def absolute_links(markdown: str, base: str) -> str:
    """``markdown`` with its links' relative targets made absolute against ``base`` (the
    page's URL, or its ``<base>``): stored apart from its site, a page's ``install.html``
    leads nowhere, its ``https://h/docs/install.html`` can be followed. Code blocks are
    left as they are."""
    lines = markdown.split("\n")
    for i, (line, code) in enumerate(zip(lines, in_fences(lines), strict=True)):
        if not code and "](" in line:
            lines[i] = _MARKDOWN_LINK.sub(lambda m: f"]({_absolute(base, m[1])})", line)
    return "\n".join(lines)


def _absolute(base: str, target: str) -> str:
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):  # has a scheme already
        return target
    return urljoin(base, target)


def _links(text: str, url: str) -> tuple[str, tuple[str, ...], str | None]:
    parser = _LinkParser()
    parser.feed(text)  # script and style bodies are CDATA to the parser: no links
    parser.close()
    base = urls.resolve(url, parser.base) if parser.base else None
    base = base or url
    links = dict.fromkeys(
        link for href in parser.hrefs if (link := urls.resolve(base, href)) is not None
    )
    canonical = urls.resolve(base, parser.canonical) if parser.canonical else None
    return base, tuple(links), canonical
