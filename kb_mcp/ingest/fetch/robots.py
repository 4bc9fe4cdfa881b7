"""robots.txt, as RFC 9309 reads it, through the standard library's parser.

What a missing or failing robots.txt means is the RFC's: a 4xx answer (none there) allows
everything; a 5xx answer or no answer at all disallows everything ("unreachable": the
site may be down, and it cannot say what it allows). Only the first 500 KiB are read,
the size the RFC lets a crawler stop at. The crawl waits ``Crawl-delay`` (or
``Request-rate``) between requests to the site when the file asks for more than the
crawl's own rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.robotparser import RobotFileParser

from kb_mcp.errors import KbError, Unreadable
from kb_mcp.ingest.decode import decode_bytes
from kb_mcp.ingest.fetch.net import USER_AGENT, Fetcher

MAX_BYTES = 500 * 1024
AGENT = USER_AGENT.split("/")[0]  # the product token rules name: "kb-mcp"


@dataclass(slots=True)
class Robots:
    """What the site's robots.txt allows ``AGENT``; ``unreachable``: why it allows nothing."""

    parser: RobotFileParser | None = None
    unreachable: str | None = None
    sitemaps: list[str] = field(default_factory=list)

    def allows(self, url: str) -> bool:
        if self.unreachable is not None:
            return False
        return self.parser is None or self.parser.can_fetch(AGENT, url)

    def delay(self) -> float:
        """Seconds the site asks between requests (0: it does not say)."""
        if self.parser is None:
            return 0.0
        delay = self.parser.crawl_delay(AGENT)
        if delay:
            return float(delay)
        rate = self.parser.request_rate(AGENT)
        return rate.seconds / rate.requests if rate and rate.requests else 0.0


def load(fetcher: Fetcher, origin: str) -> Robots:
    """The robots.txt of ``origin`` (``scheme://host[:port]``)."""
    try:
        response = fetcher.probe(origin + "/robots.txt", MAX_BYTES, truncate=True)
    except KbError as exc:
        return Robots(unreachable=f"robots.txt could not be read ({exc.message})")
    if 400 <= response.status < 500:
        return Robots()
    if response.status >= 500:
        return Robots(unreachable=f"robots.txt answered HTTP {response.status}")
    if response.status != 200:
        return Robots()
    try:
        text = decode_bytes(response.body)
    except Unreadable:  # not text: no rule can be read from it, so none applies
        text = ""
    parser = RobotFileParser()
    parser.parse(text.splitlines())
    return Robots(parser, sitemaps=list(parser.site_maps() or ()))
