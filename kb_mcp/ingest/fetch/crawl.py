"""The crawl: bring a web source's mirror up to date with the site, politely and bounded.

Breadth first from the start URL, plus the pages the site's sitemap lists and the pages
the mirror already holds (each is asked again, so a page that vanished is noticed even
when nothing links to it any more). A page is stored when it is in the source's scope
(``url.Scope``: its origin, under its prefix, the include / exclude globs), robots.txt
allows it, and it is within the depth, page and byte bounds. Redirects and a page's
``<link rel=canonical>`` (in scope) give the URL it is stored under, so a page reached by
two URLs is stored once.

Freshness: a page the mirror holds is asked with ``If-None-Match`` / ``If-Modified-Since``,
and not asked at all when the sitemap's ``lastmod`` says it has not changed since it was
fetched. A 404 or 410 removes the page (its document is archived by the sync); any other
failure keeps the last good copy. When the site cannot be reached (the start page, or
robots.txt per RFC 9309, fails), nothing is removed and the outcome says so.

Politeness: one request at a time, at most ``rate`` a second (revalidations, which most
often cost the site no body, ten times that; slower when robots.txt asks through
``Crawl-delay``, for every request), ``Retry-After`` waited for (up to ``MAX_WAIT_S``; a longer wait
ends the crawl with the copy kept).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import urlsplit

from kb_mcp.errors import InvalidInput, Unreadable
from kb_mcp.ingest.fetch import robots as robots_txt
from kb_mcp.ingest.fetch import sitemap
from kb_mcp.ingest.fetch import url as urls
from kb_mcp.ingest.fetch.extract import HTML_TYPES, extract, media_type
from kb_mcp.ingest.fetch.mirror import CrawlOutcome, Mirror, PageRecord
from kb_mcp.ingest.fetch.net import (
    Blocked,
    Fetcher,
    FetchFailed,
    NetworkPolicy,
    Response,
    checked_address,
)

MAX_WAIT_S = 60.0  # the longest Retry-After waited for
RETRIES = 2  # per page, after a 429 / 503 with Retry-After
CHECKPOINT_PAGES = 25  # the manifest is saved this often, so a killed crawl resumes
# Revalidations go this many times the rate: a 304 costs the site a status line and
# headers, no page, so a re-sync of a site without a sitemap asks every page at this pace
# (a ``Crawl-delay`` in robots.txt still holds for every request).
REVALIDATION_SPEEDUP = 10
# An HTML page read at most: reading one takes about 13 times its size in memory, and no
# documentation page is this big (PDFs are bounded by ``max_page_bytes``).
MAX_HTML_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CrawlSpec:
    """A web source's bounds, as the user gave them (``kb-mcp add URL``)."""

    url: str
    prefix: str
    depth: int = 5
    max_pages: int = 1_000
    max_bytes: int = 200 * 1024 * 1024  # bodies received, over the whole crawl
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    rate: float = 2.0  # requests a second to the site
    timeout: float = 30.0  # per request, whole exchange
    max_page_bytes: int = 20 * 1024 * 1024
    private_networks: tuple[str, ...] | None = None  # --allow-private-network

    def check(self) -> None:
        """``InvalidInput`` naming the first bound that is not usable."""
        urls.check(self.url)
        if not self.prefix.startswith("/"):
            raise InvalidInput(f"--prefix must be a path starting with /, not {self.prefix!r}")
        if self.depth < 0:
            raise InvalidInput(f"--depth is {self.depth}; it must be 0 (the page alone) or more")
        if self.max_pages < 1:
            raise InvalidInput(f"--max-pages is {self.max_pages}; it must be 1 or more")
        if self.max_bytes < 1 or self.max_page_bytes < 1:
            raise InvalidInput("--max-mb must be 1 or more")
        if not 0 < self.rate <= 100:
            raise InvalidInput(f"--rate is {self.rate:g}; it must be above 0 and at most 100")
        if not 0 < self.timeout <= 600:
            raise InvalidInput(f"--timeout is {self.timeout:g}; it must be in (0, 600] seconds")
        NetworkPolicy.from_flag(self.private_networks)

    def scope(self) -> urls.Scope:
        start = urls.normalize(self.url)
        return urls.Scope(urls.origin(start), self.prefix, self.include, self.exclude)


def preflight(spec: CrawlSpec, fetcher: Fetcher | None = None) -> None:
    """Raise before anything is registered or asked: a bound that is not usable
    (``InvalidInput``), a start URL whose host is not allowed (``Blocked``, after DNS) or
    does not resolve (``FetchFailed``)."""
    spec.check()
    fetcher = fetcher or Fetcher(NetworkPolicy.from_flag(spec.private_networks))
    parts = urlsplit(urls.normalize(spec.url))
    port = parts.port or urls.DEFAULT_PORTS[parts.scheme]
    checked_address(parts.hostname or "", port, fetcher.policy, fetcher.resolve)


def settle_start(spec: CrawlSpec, fetcher: Fetcher | None = None) -> CrawlSpec:
    """``spec`` starting where its URL redirects to (``http://h/docs`` → ``https://h/docs/``,
    a site's root → its latest version), asked once when the source is added: the crawl
    keeps to its start's origin and prefix, which the URL typed may not share with the
    pages. The prefix stays when the new start is under it (``/docs/`` →
    ``/docs/index.html``) or the user gave it; else it is the new start's path."""
    fetcher = fetcher or Fetcher(NetworkPolicy.from_flag(spec.private_networks), spec.timeout)
    probe = dataclasses.replace(fetcher, reads=lambda declared, url: False)
    try:
        final = probe.get(spec.url).url
    except FetchFailed as exc:
        raise FetchFailed(f"{spec.url}: {exc.message}", hint=exc.hint) from exc
    if final == urls.normalize(spec.url):
        return spec
    own_prefix = spec.prefix != urls.default_prefix(urls.normalize(spec.url))
    under = urlsplit(final).path.startswith(spec.prefix)
    prefix = spec.prefix if own_prefix or under else urls.default_prefix(final)
    return dataclasses.replace(spec, url=final, prefix=prefix)


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)


Progress = Callable[[int, int, str], None]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class _Pace:
    """One request at a time, ``interval`` seconds apart at least; a revalidation (a
    conditional request, most often answered 304 with no body) ``revalidate`` apart."""

    clock: Clock
    interval: float
    revalidate: float
    next_at: float = 0.0

    def wait(self, extra: float = 0.0, *, conditional: bool = False) -> None:
        now = self.clock.monotonic()
        delay = max(self.next_at - now, extra)
        if delay > 0:
            self.clock.sleep(delay)
        step = self.revalidate if conditional else self.interval
        self.next_at = self.clock.monotonic() + step


def crawl(
    spec: CrawlSpec,
    mirror: Mirror,
    *,
    fetcher: Fetcher | None = None,
    clock: Clock | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> CrawlOutcome:
    """Crawl the site into ``mirror`` (saved as it goes); the outcome, also kept there.
    Raises what ``preflight`` raises before any request."""
    fetcher = fetcher or Fetcher(
        NetworkPolicy.from_flag(spec.private_networks),
        spec.timeout,
        spec.max_page_bytes,
        reads=lambda declared, url: media_type(declared, url) is not None,
    )
    preflight(spec, fetcher)
    clock = clock or SystemClock()
    run = _Crawl(spec, mirror, fetcher, clock, progress, should_stop)
    return run.run()


class _Crawl:
    def __init__(
        self,
        spec: CrawlSpec,
        mirror: Mirror,
        fetcher: Fetcher,
        clock: Clock,
        progress: Progress | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.spec, self.mirror, self.fetcher, self.clock = spec, mirror, fetcher, clock
        self.progress, self.should_stop = progress, should_stop
        self.start = urls.normalize(spec.url)
        self.scope = spec.scope()
        self.out = CrawlOutcome(started=utc_now())
        self.seen: set[str] = set()  # URLs asked for (or settled) in this crawl
        self.kept: set[str] = set()  # pages the mirror holds after this crawl
        self.frontier: deque[tuple[str, int]] = deque()
        self.listed: dict[str, str | None] = {}
        self.robots = robots_txt.Robots()
        self.digests: dict[str, str] = {}  # content → the URL it is kept under

    def run(self) -> CrawlOutcome:
        try:
            self._crawl()
        finally:
            self.out.finished = utc_now()
            self.out.requests = self.fetcher.requests
            self.out.bytes = self.fetcher.transferred
            self.mirror.outcome = self.out
            self.mirror.save()
        return self.out

    def _crawl(self) -> None:
        pace = _Pace(self.clock, 1.0 / self.spec.rate, 1.0 / self.spec.rate)  # robots, sitemaps
        pace.wait()
        self.robots = robots = robots_txt.load(self.fetcher, self.scope.origin)
        if robots.unreachable is not None:
            self.out.error = (
                f"{robots.unreachable}: a site whose robots.txt fails allows nothing "
                "(RFC 9309), so nothing was fetched; the copy fetched before is kept"
            )
            return
        delay = robots.delay()  # the site's own word holds for every request
        pace.interval = max(1.0 / self.spec.rate, delay)
        pace.revalidate = max(1.0 / (self.spec.rate * REVALIDATION_SPEEDUP), delay)
        if self.spec.depth > 0:
            locations = [s for s in robots.sitemaps if urls.resolve(self.start, s)]
            own = [s for s in locations if urls.origin(urls.normalize(s)) == self.scope.origin]
            self.listed, problems = sitemap.load(
                self.fetcher, own or [self.scope.origin + "/sitemap.xml"], pace.wait
            )
            self.out.failed.extend([["sitemap", p] for p in problems][:20])
        self.frontier.append((self.start, 0))
        self.frontier.extend((u, 1) for u in self.listed if self.scope.holds(u))
        self.frontier.extend((r.url, r.depth) for r in list(self.mirror.pages.values()))
        done = 0
        while self.frontier:
            if self.should_stop and self.should_stop():
                self.out.limit = "stopped before the end"
                return
            url, depth = self.frontier.popleft()
            if url in self.seen:
                continue
            self.seen.add(url)
            if url != self.start and not self._may_store(url):
                continue
            if limit := self._bound_reached():
                self.out.limit = limit
                break
            stop = self._visit(url, depth, robots, pace)
            done += 1
            if self.progress:
                self.progress(done, done + len(self.frontier), url)
            if done % CHECKPOINT_PAGES == 0:
                self.mirror.outcome = self.out
                self.mirror.save()
            if stop:
                return
        if self.progress and done:
            self.progress(done, done, "")  # the frontier's estimate is settled
        if self.out.limit is None:  # complete: what it no longer reaches goes
            for url in [u for u in self.mirror.pages if u not in self.kept]:
                self.mirror.archive(url)
                self.out.removed += 1
            self.mirror.drop_strays()

    def _may_store(self, url: str) -> bool:
        if not self.scope.holds(url):
            self._skip("outside the source's prefix or globs")
            return False
        return True

    def _skip(self, reason: str) -> None:
        self.out.skipped[reason] = self.out.skipped.get(reason, 0) + 1

    def _bound_reached(self) -> str | None:
        if len(self.kept) >= self.spec.max_pages:
            return f"the page limit ({self.spec.max_pages:,}) was reached"
        if self.fetcher.transferred >= self.spec.max_bytes:
            return f"the byte limit ({self.spec.max_bytes:,}) was reached"
        return None

    def _follow(self, links: list[str], depth: int) -> None:
        if depth < self.spec.depth:
            self.frontier.extend((link, depth + 1) for link in links if link not in self.seen)

    def _visit(self, url: str, depth: int, robots: robots_txt.Robots, pace: _Pace) -> bool:
        """Ask for one page; True when the crawl must stop (the site is down)."""
        if not robots.allows(url):
            self._skip("disallowed by robots.txt")
            return False
        alias_of = self.mirror.aliases.get(url)
        if alias_of is not None and alias_of != url and self.mirror.has_file(alias_of):
            self.frontier.appendleft((alias_of, depth))  # the page itself is asked instead
            return False
        record = self.mirror.pages.get(url)
        held = self.mirror.has_file(url)
        lastmod = self.listed.get(url)
        if record is not None and held and lastmod is not None and record.fetched_at >= lastmod:
            self.out.not_modified += 1  # the sitemap says it has not changed: not asked
            self._keep(record, depth)
            return False
        headers = {}
        if record is not None and held:
            if record.etag:
                headers["If-None-Match"] = record.etag
            if record.last_modified:
                headers["If-Modified-Since"] = record.last_modified
        try:
            response = self._get(url, headers, pace)
        except (Blocked, InvalidInput) as exc:
            self._skip("refused: " + _first_clause(exc.message))
            self.out.failed.append([url, exc.message])
            return False
        except FetchFailed as exc:
            self.out.failed.append([url, exc.message])
            if record is not None:
                self.kept.add(url)  # the last good copy stays
            if url == self.start:
                self.out.error = f"{url}: {exc.message}; the copy fetched before is kept"
                return True
            return False
        if response is None:  # asked to wait too long
            if record is not None:
                self.kept.add(url)
            return True
        return self._answer(url, depth, record, response)

    def _get(self, url: str, headers: dict[str, str], pace: _Pace) -> Response | None:
        wait = 0.0
        for _ in range(RETRIES + 1):
            pace.wait(wait, conditional=bool(headers))
            response = self.fetcher.get(url, headers)
            if response.status not in (429, 503) or "retry-after" not in response.headers:
                return response
            wait = _retry_after(response.headers["retry-after"])
            if wait > MAX_WAIT_S:
                self.out.limit = (
                    f"the site asked to wait {wait:.0f} s (Retry-After) at {url}; "
                    "the copy fetched before is kept"
                )
                return None
        return response

    def _answer(self, url: str, depth: int, record: PageRecord | None, res: Response) -> bool:
        if res.status == 304 and record is not None:
            record.fetched_at = utc_now()
            self.out.not_modified += 1
            self._keep(record, depth)
            return False
        if res.status in (404, 410):
            if record is not None:
                self.mirror.archive(url)
                self.out.removed += 1
            return False
        if res.status != 200:
            self.out.failed.append([url, f"HTTP {res.status}"])
            if record is not None:
                self.kept.add(url)
            if url == self.start:
                self.out.error = f"{url} answered HTTP {res.status}; the copy before is kept"
                return True
            return False
        stored_as = self._stored_url(url, res)
        if stored_as is None:
            if record is not None and url not in self.kept:
                self.mirror.remove(url)  # it is now another page's (or out of scope)
            return False
        kind = media_type(res.media_type, stored_as)
        if kind is None:
            self._skip(f"content type {res.media_type or 'missing'}")
            return False
        if kind in HTML_TYPES and len(res.body) > MAX_HTML_BYTES:
            self.out.failed.append([stored_as, f"an HTML page over {MAX_HTML_BYTES:,} bytes"])
            return False
        try:
            page = extract(res.body, kind, stored_as, res.charset)
        except Unreadable as exc:
            self.out.failed.append([stored_as, exc.message])
            if record is not None:
                self.kept.add(url)
            return False
        if page.canonical and page.canonical != stored_as and self._takes(page.canonical):
            self.seen.add(page.canonical)
            stored_as = page.canonical
        if stored_as != url:
            self._alias(url, stored_as)
        if stored_as in self.kept:
            return False  # the same page under another URL, stored already
        links = [link for link in page.links if self.scope.holds(link)]
        if not self.scope.holds(stored_as):  # the start, outside its own globs or prefix
            self._skip("the start page, read for its links only")
            self._follow(links, depth)
            return False
        digest = hashlib.sha256(page.data or (page.text or "").encode("utf-8")).hexdigest()
        if self.digests.get(digest, stored_as) != stored_as:  # served at two URLs
            self._skip("the same content as another page")
            self._alias(stored_as, self.digests[digest])
            self._follow(links, depth)
            return False
        new = PageRecord(
            stored_as,
            "",
            depth,
            utc_now(),
            res.headers.get("etag"),
            res.headers.get("last-modified"),
            links,
            digest,
        )
        self.mirror.write(new, page)
        self.kept.add(stored_as)
        self.digests[digest] = stored_as
        self.out.fetched += 1
        self._follow(links, depth)
        return False

    def _stored_url(self, url: str, res: Response) -> str | None:
        """The URL a 200 answer is stored under: where redirects ended, when in scope."""
        final = res.url
        if final == url:
            return url
        if not self._takes(final):
            self._skip("redirected outside the source")
            return None
        self._alias(url, final)
        if final in self.kept:
            return None
        self.seen.add(final)
        return final

    def _alias(self, url: str, page: str) -> None:
        """``url`` answers with the page stored as ``page``: it is not a page of its own."""
        if url in self.mirror.pages:
            self.mirror.remove(url)
        self.mirror.aliases[url] = page

    def _takes(self, url: str) -> bool:
        """Whether ``url`` may hold a page of this source."""
        return self.scope.holds(url) and self.robots.allows(url)

    def _keep(self, record: PageRecord, depth: int) -> None:
        self.kept.add(record.url)
        self.digests.setdefault(record.digest, record.url)
        record.depth = min(record.depth, depth)
        self._follow(record.links, depth)


def _retry_after(value: str) -> float:
    """Seconds a ``Retry-After`` asks for (a number or an HTTP date); 1 when unreadable."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 1.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _first_clause(message: str) -> str:
    return message.split(";")[0].split(":")[0][:60]
