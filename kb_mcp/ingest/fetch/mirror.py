"""A web source's fetched pages on disk: the source's truth, as a folder is a folder source's.

``<home>/web/<name>/`` holds one file per page: Markdown (HTML, Markdown and text pages,
with a frontmatter naming the page's URL and title) or the PDF as it came. The sync reads
the folder through the one ingestion path; the database stays a rebuildable index.
``<home>/web/<name>.json`` is the manifest, beside the folder so no walk reads it: per page
its URL, file, validators (ETag, Last-Modified) for the next conditional request, the
links it holds (a page answered 304 is not parsed again, so its links must be kept), and
the last crawl's outcome, which ``list`` shows. A page the site no longer serves leaves
the folder for ``<home>/web/<name>.archive/``: out of the index, its last copy kept.

Text is redacted before it is written (the same redaction as every source): a credential
on a public page is never at rest here. Files and the manifest are written atomically; a
crawl killed between the two leaves a file the manifest does not name, which the next
complete crawl deletes, or a record whose file is gone, which is fetched again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kb_mcp.errors import InvalidInput
from kb_mcp.fsutil import atomic_write
from kb_mcp.home import WEB_DIR
from kb_mcp.ingest.fetch.extract import Page
from kb_mcp.ingest.pipeline import redact_text
from kb_mcp.text.frontmatter import render_frontmatter

_SLUG_PART = re.compile(r"[^A-Za-z0-9]+")
SLUG_CHARS = 80


@dataclass(slots=True)
class PageRecord:
    url: str
    file: str
    depth: int
    fetched_at: str  # when last fetched or found unchanged (ISO UTC)
    etag: str | None = None
    last_modified: str | None = None
    links: list[str] = field(default_factory=list)
    digest: str = ""  # of the stored content: one page served at two URLs is kept once


@dataclass(slots=True)
class CrawlOutcome:
    """What the last crawl did, for ``list`` and ``sync``'s report."""

    started: str = ""
    finished: str = ""
    fetched: int = 0  # page bodies received (new or changed)
    not_modified: int = 0  # 304 answers, or unchanged by the sitemap's lastmod
    removed: int = 0
    requests: int = 0
    bytes: int = 0
    error: str | None = None  # the site could not be crawled: the last good copy stays
    limit: str | None = None  # a bound that stopped the crawl early
    failed: list[list[str]] = field(default_factory=list)  # [url, reason]
    skipped: dict[str, int] = field(default_factory=dict)  # reason → pages


class Mirror:
    """The folder and manifest of the web source ``name`` in ``home``."""

    def __init__(self, home: Path, name: str) -> None:
        self.root = home / WEB_DIR / name
        self.manifest_path = home / WEB_DIR / f"{name}.json"
        self.archive_root = home / WEB_DIR / f"{name}.archive"
        self.pages: dict[str, PageRecord] = {}
        # Another URL of a stored page (a redirect, a canonical duplicate, the same
        # content) → the page's URL: a re-crawl does not ask for it again.
        self.aliases: dict[str, str] = {}
        self.outcome = CrawlOutcome()
        if self.manifest_path.is_file():
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            self.pages = {p["url"]: PageRecord(**p) for p in data.get("pages", [])}
            self.aliases = dict(data.get("aliases", {}))
            self.outcome = CrawlOutcome(**data.get("last_crawl", {}))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise InvalidInput(
                f"cannot read the web source's manifest {self.manifest_path}: {exc}",
                hint="delete it; the next `kb-mcp sync` fetches every page again",
            ) from exc

    def save(self) -> None:
        data: dict[str, Any] = {
            "pages": [asdict(p) for p in sorted(self.pages.values(), key=lambda p: p.url)],
            "aliases": {a: u for a, u in sorted(self.aliases.items()) if u in self.pages},
            "last_crawl": asdict(self.outcome),
        }
        atomic_write(self.manifest_path, json.dumps(data, indent=1).encode("utf-8"))

    def url_of(self) -> dict[str, str]:
        """File name → page URL, for citations."""
        return {p.file: p.url for p in self.pages.values()}

    def has_file(self, url: str) -> bool:
        record = self.pages.get(url)
        return record is not None and (self.root / record.file).is_file()

    def write(self, record: PageRecord, page: Page) -> None:
        """Store ``page`` as ``record`` says (its file chosen here when new)."""
        old = self.pages.get(record.url)
        record.file = (
            old.file
            if old and old.file.endswith(page.suffix)
            else _file_name(record.url, page.suffix)
        )
        if page.data is not None:
            data = page.data
        else:
            title = redact_text(page.title or "")
            meta: dict[str, Any] = ({"title": title} if title else {}) | {"source_uri": record.url}
            data = render_frontmatter(meta, redact_text(page.text or "")).encode("utf-8")
        atomic_write(self.root / record.file, data)
        if old is not None and old.file != record.file:
            (self.root / old.file).unlink(missing_ok=True)
        self.pages[record.url] = record

    def remove(self, url: str) -> None:
        record = self.pages.pop(url, None)
        if record is not None:
            (self.root / record.file).unlink(missing_ok=True)

    def archive(self, url: str) -> None:
        """Take a page the site no longer serves out of the mirror (so out of the index),
        keeping its last copy under ``<home>/web/<name>.archive/``."""
        record = self.pages.pop(url, None)
        if record is not None and (self.root / record.file).is_file():
            self.archive_root.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / record.file, self.archive_root / record.file)

    def drop_strays(self) -> int:
        """Delete files the manifest does not name (a write the manifest missed)."""
        named = {p.file for p in self.pages.values()}
        strays = [p for p in self.root.glob("*") if p.is_file() and p.name not in named]
        for path in strays:
            path.unlink(missing_ok=True)
        return len(strays)

    def delete(self) -> None:
        """The whole mirror and its manifest (the source was removed)."""
        for path in self.root.glob("*"):
            if path.is_file():
                path.unlink(missing_ok=True)
        if self.root.is_dir():
            self.root.rmdir()
        if self.archive_root.is_dir():
            shutil.rmtree(self.archive_root)
        self.manifest_path.unlink(missing_ok=True)


def _file_name(url: str, suffix: str) -> str:
    """A readable, unique, flat file name for ``url``: its path as a slug, and a hash of
    the whole URL (two URLs never share a name; no name is a folder a walk would prune or
    a name the walk refuses as a secret's file)."""
    parts = urlsplit(url)
    slug = _SLUG_PART.sub("-", parts.path).strip("-").lower()[-SLUG_CHARS:].strip("-")
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:10]
    return f"{slug or 'index'}-{digest}{suffix}"
