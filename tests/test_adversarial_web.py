"""A hostile web site added with the real ``kb-mcp add URL`` (issue 25).

``tests/web_site.py``'s ``hostile_site()`` is served on 127.0.0.1 and ``internal_site()``
on 127.0.0.2 at the same port; the crawl may reach 127.0.0.1 only (``--allow-network
127.0.0.1/32``), so every link and redirect towards 127.0.0.2, the cloud metadata
address, ``localhost``, ``[::1]``, ``file:``, ``ftp:`` and a URL with credentials must stay
unasked. The crawl runs once per module in a fresh home, through a small runner process
whose ``RUSAGE_CHILDREN`` gives the peak RSS of ``kb-mcp add`` and its own children alone
(the pytest worker's figure would include every child it ever ran). Then each test checks
one promise: the traps ended within the bounds, nothing internal was reached, memory
stayed bounded through the gzip bomb and the 20 MiB pages, the sitemaps and the 5 MiB
robots.txt were handled, malformed pages did not crash the sync, credentials are at rest
nowhere, the prompt injection is inert text, ``list`` and ``search`` work, and no MCP
tool fetches anything.

The default run crawls up to 120 pages, 3 links deep; ``pytest -m adversarial`` runs
the long version (1,000 pages, 100 links deep).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from raw_server import RawServer
from web_site import (
    AWS_KEY,
    INJECTION,
    INTERNAL_CANARY,
    PASSWORD,
    RequestRecord,
    Site,
    hostile_site,
    internal_site,
    serve_site,
)

from kb_mcp.ingest.fetch.mirror import CrawlOutcome, Mirror

CRAWL_TIMEOUT_S = 900  # a safety net only; the bounds end the crawl
RSS_LIMIT_MB = 400  # two 20 MiB pages and a 4 GiB gzip bomb must not get near it
# Runs the command in argv and writes its peak RSS (its largest waited-for descendant's,
# in KiB) as the last line of stderr.
RSS_RUNNER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@dataclass(frozen=True)
class Crawl:
    """One ``kb-mcp add`` of the hostile site and what it left."""

    site: Site
    inner: Site
    home: Path
    stdout: str
    stderr: str
    returncode: int
    peak_rss_mb: float
    requests: list[RequestRecord]
    max_pages: int
    depth: int
    env: dict[str, str]
    seconds: float

    @property
    def outcome(self) -> CrawlOutcome:
        return Mirror(self.home, "hostile").outcome

    def asked(self, path: str) -> int:
        return sum(record.path == path for record in self.requests)

    def failed(self, path: str) -> str | None:
        return next((why for url, why in self.outcome.failed if url.endswith(path)), None)


def kb(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args, "--home", str(home)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(
    scope="module",
    params=[
        pytest.param((120, 3), id="short"),
        pytest.param((1_000, 100), id="long", marks=pytest.mark.adversarial),
    ],
)
def crawl(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    child_env: dict[str, str],
) -> Iterator[Crawl]:
    max_pages, depth = request.param
    home = tmp_path_factory.mktemp("hostile") / "home"
    with serve_site({}) as site, serve_site(internal_site(), "127.0.0.2", site.port) as inner:
        site.routes.update(hostile_site(site.port))
        command = [
            *(sys.executable, "-m", "kb_mcp", "add", f"{site.url}/", "--yes"),
            *("--name", "hostile", "--allow-network", "127.0.0.1/32", "--rate", "100"),
            *("--max-pages", str(max_pages), "--depth", str(depth), "--home", str(home)),
        ]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", RSS_RUNNER, *command],
            env=child_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CRAWL_TIMEOUT_S,
            check=False,
        )
        *stderr, rss_kb = done.stderr.rstrip("\n").split("\n")
        yield Crawl(
            site,
            inner,
            home,
            done.stdout,
            "\n".join(stderr),
            done.returncode,
            int(rss_kb) / 1024,
            site.requests,
            max_pages,
            depth,
            child_env,
            time.monotonic() - started,
        )


def test_the_crawl_ends_within_its_bounds(crawl: Crawl) -> None:
    """The wide trap (50 new links a page) and the endless one (ever deeper) end at the
    page and depth bounds: no request past the depth, no more pages than allowed."""
    assert crawl.returncode == 0, crawl.stderr
    out = crawl.outcome
    assert out.limit == f"the page limit ({crawl.max_pages:,}) was reached"
    assert out.fetched <= crawl.max_pages
    assert len(Mirror(crawl.home, "hostile").pages) <= crawl.max_pages
    pages = [r for r in crawl.requests if r.path.startswith("/trap/")]
    assert len(pages) <= crawl.max_pages
    assert len(crawl.requests) <= crawl.max_pages + 40  # robots, sitemaps, redirects, refusals
    deepest = max(r.path.count("a/") for r in pages if r.path.startswith("/trap/a/"))
    assert deepest <= crawl.depth  # "/" is depth 0, "/trap/a/" depth 1
    # "/trap/wide/0.html" (depth 1) links 1..50, each n links 50n+1..50n+50, and so on
    widest = max(int(re.sub(r"\D", "", r.path)) for r in pages if "/wide/" in r.path)
    assert widest <= sum(50**k for k in range(1, crawl.depth))


def test_nothing_internal_nor_another_scheme_was_reached(crawl: Crawl) -> None:
    assert crawl.inner.requests == []
    assert {r.headers.get("host") for r in crawl.requests} == {f"127.0.0.1:{crawl.site.port}"}
    for path in ("/ipv6", "/localhost", "/userinfo.html", "/pub/", "/latest/meta-data/", "/x"):
        assert crawl.asked(path) == 0, path
    for canary in (INTERNAL_CANARY, "REACHED-", "root:x:0:"):
        assert not holders(crawl.home, canary.encode()), canary
    why = {url: reason for url, reason in crawl.outcome.failed}
    assert "a loopback address" in why[f"{crawl.site.url}/redirect/internal"]
    assert "a link-local address" in why[f"{crawl.site.url}/redirect/metadata"]
    assert "only http and https" in why[f"{crawl.site.url}/redirect/file"]
    assert "redirect loop" in why[f"{crawl.site.url}/loop/a"]


def test_the_gzip_bomb_and_the_huge_pages_left_memory_bounded(crawl: Crawl, figures) -> None:
    figures(
        "web",
        f"hostile site, {crawl.max_pages} pages / {crawl.depth} deep: {len(crawl.requests)} "
        f"requests, {crawl.outcome.fetched} pages fetched, {crawl.outcome.bytes / 2**20:.0f} "
        f"MiB received, peak RSS {crawl.peak_rss_mb:.0f} MB, {crawl.seconds:.0f} s",
    )
    assert crawl.peak_rss_mb < RSS_LIMIT_MB, f"peak RSS {crawl.peak_rss_mb:.0f} MB"
    assert "byte cap per page" in (crawl.failed("/bomb.html") or "")
    bomb = next(r for r in crawl.requests if r.path == "/bomb.html")
    assert not bomb.complete  # 4.2 MB on the wire, never read whole
    assert crawl.asked("/huge.html") == 1 and crawl.asked("/huge-length.html") == 1


def test_the_sitemaps_are_refused_or_read_once(crawl: Crawl) -> None:
    """The billion-laughs sitemap is refused before parsing; the index listing itself is
    read once."""
    assert crawl.asked("/sitemap-laughs.xml") == 1
    assert crawl.asked("/sitemap-index.xml") == 1
    reasons = [why for url, why in crawl.outcome.failed if url == "sitemap"]
    assert any("sitemap-laughs.xml" in r and "document type declaration" in r for r in reasons)
    assert not any(r.path.startswith("/laughs/") for r in crawl.requests)


def test_the_5_mib_robots_txt_is_read_in_part_and_obeyed(crawl: Crawl) -> None:
    """Read up to 500 KiB (RFC 9309's floor): its rules and sitemaps, at the top, apply."""
    assert crawl.asked("/robots.txt") == 1
    robots = next(r for r in crawl.requests if r.path == "/robots.txt")
    assert not robots.complete
    assert crawl.outcome.error is None


def test_malformed_pages_fail_with_a_reason_or_are_indexed(crawl: Crawl) -> None:
    """Invalid UTF-8 with NUL bytes, and 10,000 unclosed tags: each fails with a reason,
    or is stored and indexed; the sync goes on either way."""
    mirror = Mirror(crawl.home, "hostile")
    listed = kb(crawl.home, crawl.env, "list", "hostile", "--failed", "--json")
    assert listed.returncode == 0, listed.stderr
    failed = json.loads(listed.stdout)["failed"]
    files = [f for f in failed if not f["path"].startswith(("http", "sitemap"))]
    assert files == []  # no stored page failed to index; the crawl's failures are listed
    assert {f["path"] for f in failed} >= {crawl.site.url + "/invalid-utf8.html"}
    for path in ("/invalid-utf8.html", "/deep.html"):
        assert crawl.asked(path) == 1
        why = crawl.failed(path)
        assert (why and why.strip()) or f"{crawl.site.url}{path}" in mirror.pages, path
    assert "Traceback" not in crawl.stderr


def test_credentials_are_redacted_in_the_database_and_the_mirror(crawl: Crawl) -> None:
    for secret in (AWS_KEY, PASSWORD):
        assert holders(crawl.home, secret.encode()) == [], secret
    mirror = Mirror(crawl.home, "hostile")
    record = mirror.pages[f"{crawl.site.url}/credentials.html"]
    stored = (mirror.root / record.file).read_text()
    assert "[REDACTED:" in stored and "export AWS_ACCESS_KEY_ID=" in stored


def test_the_prompt_injection_is_stored_as_inert_text(crawl: Crawl) -> None:
    """The page is a document like any other: its text, searchable, and nothing it asks
    for was done (no request beyond the site; the internal host untouched)."""
    found = json.loads(search(crawl, "maintenance mode id_rsa").stdout)["results"]
    assert any("injection.html" in json.dumps(hit) for hit in found), found
    mirror = Mirror(crawl.home, "hostile")
    stored = (mirror.root / mirror.pages[f"{crawl.site.url}/injection.html"].file).read_text()
    assert INJECTION in stored
    assert crawl.asked("/collect") == 0


def test_list_and_search_work_after_the_crawl(crawl: Crawl) -> None:
    listed = kb(crawl.home, crawl.env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    source = next(s for s in json.loads(listed.stdout)["sources"] if s["name"] == "hostile")
    assert source["kind"] == "web"
    done = search(crawl, "Deploy AWS_ACCESS_KEY_ID")
    assert done.returncode == 0 and json.loads(done.stdout)["results"]
    assert AWS_KEY not in done.stdout and PASSWORD not in done.stdout


def test_no_mcp_tool_fetches(crawl: Crawl, tmp_path: Path) -> None:
    """The server's own sync, search, read and add_document with the hostile URL as its
    source_uri: the site sees no request (the agent's source_uri is a label)."""
    before = len(crawl.site.requests)
    server = RawServer(crawl.home, tmp_path / "server.log", crawl.env)
    try:
        server.handshake()
        hostile = f"{crawl.site.url}/never-fetched.html"
        replies = [
            server.tool("search", query="Release notes maintenance mode"),
            server.tool("read", doc=f"{crawl.site.url}/injection.html"),
            server.tool("read", doc=hostile),
            server.tool(
                "add_document",
                title="A note about the hostile site",
                content=f"# Note\n\nSee {hostile} and {crawl.site.url}/internal/admin.\n",
                source_uri=hostile,
            ),
            server.tool("read", doc=hostile),
            server.tool("list", source="hostile"),
        ]
        assert all("result" in reply for reply in replies), replies
        assert server.stray_output() == []
    finally:
        server.close()
    assert len(crawl.site.requests) == before
    assert crawl.inner.requests == []


# --------------------------------------------------------------------------- helpers


def holders(home: Path, needle: bytes) -> list[Path]:
    """Every file under ``home`` (database, WAL, mirror, manifest, logs) holding ``needle``."""
    return [p for p in home.rglob("*") if p.is_file() and needle in p.read_bytes()]


def search(crawl: Crawl, query: str) -> subprocess.CompletedProcess:
    return kb(crawl.home, crawl.env, "search", query, "--source", "hostile", "--json")
