"""A documentation site as a source (issue 25): added, searched, cited and kept fresh.

Every test crawls a real HTTP server on loopback (``tests/web_site.py``): the quiverq
docs site (site chrome, a sitemap, robots.txt, redirects, a canonical duplicate, a PDF,
text and Markdown pages, a 500), or Debian's packaged valgrind manual served from disk.
Loopback needs ``--allow-private-network`` (``private_networks=()``); the limits and
refusals are tests/test_fetch_limits.py's, the hostile site tests/test_adversarial_web.py's.
"""

from __future__ import annotations

import dataclasses
import html
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_site import DocsSite, Page, Redirect, Site, disk_site, docs_site, serve_site

from kb_mcp.errors import NotFound
from kb_mcp.ingest.fetch.crawl import CrawlSpec
from kb_mcp.ingest.fetch.mirror import Mirror
from kb_mcp.library import Library
from kb_mcp.render import overview_text
from kb_mcp.settings import Settings, Store
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import Policy

VALGRIND = Path("/usr/share/doc/valgrind/html")
LOCAL = "http://127.0.0.1:8765"  # the web view's own address, as its guard expects


@pytest.fixture
def docs() -> Iterator[tuple[DocsSite, Site]]:
    site = docs_site()
    site.slow_gate.set()  # the slow page answers at once here; its hold is a limits test
    with serve_site(site.routes) as served:
        yield site, served


@pytest.fixture
def library(home: Path) -> Iterator[Library]:
    opened = Library(Settings(home=home, embedder="none"))
    try:
        yield opened
    finally:
        opened.close()


@dataclass(frozen=True)
class Crawled:
    """One crawl of the quiverq site, shared by the tests that only read what it stored."""

    site: DocsSite
    served: Site
    library: Library
    home: Path


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    site = docs_site()
    site.slow_gate.set()
    home = tmp_path_factory.mktemp("crawled")
    with serve_site(site.routes) as served:
        opened = Library(Settings(home=home, embedder="none"))
        try:
            add_and_sync(opened, spec_for(served))
            yield Crawled(site, served, opened, home)
        finally:
            opened.close()


def spec_for(served: Site, path: str = "/docs/", **bounds: object) -> CrawlSpec:
    return CrawlSpec(served.url + path, path, rate=100, private_networks=(), **bounds)


def add_and_sync(library: Library, spec: CrawlSpec, name: str = "quiverq") -> None:
    library.folders.add_web(spec, name)
    library.folders.sync(name, fetch=True)


def top_hit(library: Library, query: str):
    result = library.lookup.search(query, mode="keyword")
    assert result.hits, f"nothing found for {query!r}"
    return result.hits[0]


def test_a_docs_site_is_added_searched_and_cited_by_page_url(crawled: Crawled) -> None:
    site, served, library = crawled.site, crawled.served, crawled.library

    for path in site.expected:
        hit = top_hit(library, site.facts[path])
        assert hit.path == served.url + path, (path, hit.path)
        cited = library.lookup.read(hit.cite)
        assert cited.path == served.url + path
        assert site.facts[path].lower() in " ".join(cited.text.split()).lower()
        assert (cited.start_line, cited.end_line) == (hit.start_line, hit.end_line)
    assert library.lookup.read(served.url + "/docs/faq.html").path.endswith("/docs/faq.html")
    by_url = library.lookup.read(f"{served.url}/docs/faq.html#L3-L5")  # a cite as a URL
    assert (by_url.start_line, by_url.end_line) == (3, 5)
    assert library.lookup.read(f"{served.url}/docs/faq.html#deadlocks").start_line == 1
    [source] = [s for s in library.catalog.overview().sources if s.name == "quiverq"]
    assert (source.kind, source.root, source.error) == ("web", served.url + "/docs/", None)
    assert source.documents == len(site.expected) + 1  # and the slow page, released here


def test_pages_that_could_not_be_fetched_are_listed_with_their_reason(crawled: Crawled) -> None:
    left_out = crawled.library.folders.left_out("quiverq")
    assert [(f.path, f.reason) for f in left_out.failed] == [
        (crawled.served.url + "/docs/broken.html", "HTTP 500")
    ]


def test_what_the_crawl_left_out_is_listed_with_why(crawled: Crawled) -> None:
    left_out = crawled.library.folders.left_out("quiverq", skipped=True)
    assert {group.reason: group.count for group in left_out.skipped} == {
        "disallowed by robots.txt": 1
    }


def test_robots_txt_and_the_prefix_keep_pages_out(crawled: Crawled) -> None:
    site, served, library = crawled.site, crawled.served, crawled.library

    requested = {r.path for r in served.requests}  # the module's crawl alone
    assert requested.isdisjoint(site.never_fetched)
    assert served.requested()[0] == "/robots.txt"  # asked before any page
    for path in site.never_fetched:
        hits = library.lookup.search(site.facts[path], mode="keyword", top_k=50).hits
        assert not [hit.path for hit in hits if hit.path.endswith(path)]


def test_site_chrome_is_not_stored_and_code_blocks_survive_whole(crawled: Crawled) -> None:
    site, served, library = crawled.site, crawled.served, crawled.library
    stored = "\n".join(p.read_text() for p in (crawled.home / "web" / "quiverq").glob("*.md"))
    assert [phrase for phrase in site.chrome if phrase in stored] == []
    for path, code in site.code.items():
        text = library.lookup.read(served.url + path).text
        assert f"\n{code.strip()}\n" in text, path


def test_links_in_stored_pages_lead_to_the_site(crawled: Crawled) -> None:
    """Stored apart from its site, a page's relative link would lead nowhere."""
    import re

    stored = "\n".join(p.read_text() for p in (crawled.home / "web" / "quiverq").glob("*.md"))
    targets = re.findall(r"\]\(([^()\s]+)\)", stored)
    assert targets and all(re.match(r"^[a-z]+:", t) for t in targets), targets[:5]
    assert f"]({crawled.served.url}/docs/" in stored


def test_a_page_reached_by_a_redirect_or_a_canonical_duplicate_is_stored_once(
    crawled: Crawled,
) -> None:
    site, served, library = crawled.site, crawled.served, crawled.library

    result = library.lookup.search(site.facts["/docs/guide.html"], mode="keyword", top_k=20)
    guide_docs = {hit.doc for hit in result.hits if hit.path and "guide" in hit.path}
    assert len(guide_docs) == 1
    manifest = json.loads((library.home / "web" / "quiverq.json").read_text())
    urls = {page["url"] for page in manifest["pages"]}
    assert served.url + "/docs/guide.html" in urls
    assert not any("utm_source" in u or "old-guide" in u or "broken" in u for u in urls)


def test_a_second_sync_with_nothing_changed_transfers_no_page_bodies(
    docs: tuple[DocsSite, Site], library: Library
) -> None:
    site, served = docs
    add_and_sync(library, spec_for(served))
    served.clear_requests()

    [report] = library.folders.sync("quiverq", fetch=True)

    pages = [r for r in served.requests if r.path in site.expected]
    assert all(r.status == 304 and r.body_bytes == 0 for r in pages), pages
    assert (report.added, report.updated, report.removed) == (0, 0, 0)
    assert report.crawl is not None and report.crawl.not_modified == len(site.expected)
    assert report.crawl.fetched == 1  # the slow page: it sends no ETag or Last-Modified


def test_a_changed_page_is_read_again_and_a_removed_one_leaves_the_index(
    docs: tuple[DocsSite, Site], library: Library
) -> None:
    site, served = docs
    add_and_sync(library, spec_for(served))
    faq = site.routes["/docs/faq.html"]
    assert isinstance(faq, Page)
    edited = faq.body.replace(b"marmalade deadlock", b"gooseberry livelock")
    site.routes["/docs/faq.html"] = dataclasses.replace(
        faq, body=edited, last_modified=datetime.now(UTC)
    )
    del site.routes["/docs/brokers.html"]  # 404 from now on

    [report] = library.folders.sync("quiverq", fetch=True)

    assert (report.updated, report.removed) == (1, 1)
    assert top_hit(library, "gooseberry livelock").path == served.url + "/docs/faq.html"
    assert not library.lookup.search("marmalade deadlock", mode="keyword").hits
    assert not library.lookup.grep("replicates it to two followers").matches
    with pytest.raises(NotFound):
        library.lookup.read(served.url + "/docs/brokers.html")
    [archived] = (library.home / "web" / "quiverq.archive").glob("*brokers*")
    assert site.facts["/docs/brokers.html"] in " ".join(archived.read_text().split())


def test_a_site_that_is_down_keeps_its_last_good_copy_and_list_says_why(
    home: Path, library: Library
) -> None:
    site = docs_site()
    site.slow_gate.set()
    with serve_site(site.routes) as served:
        add_and_sync(library, spec_for(served))
        url = served.url
    # The server is gone: its port refuses connections.

    [report] = library.folders.sync("quiverq", fetch=True)

    assert report.crawl is not None and report.crawl.error
    assert report.removed == 0
    assert top_hit(library, site.facts["/docs/faq.html"]).path == url + "/docs/faq.html"
    [source] = [s for s in library.catalog.overview().sources if s.name == "quiverq"]
    assert source.sync_state == "error"
    assert "robots.txt" in source.error and "allows nothing" in source.error
    assert f"  error: {source.error}" in overview_text(library.catalog.overview())
    assert len(Mirror(home, "quiverq").pages) == len(site.expected) + 1  # and the slow page
    # The web view's library page says the same: the source, its site, why it failed.
    with TestClient(build_app(library, Policy("127.0.0.1", None)), base_url=LOCAL) as client:
        page = client.get("/").text
    assert source.root.startswith(url + "/docs/")  # a web source's root is its site
    assert "quiverq" in page and html.escape(source.root) in page
    assert html.escape(source.error) in page


def test_only_a_fetching_sync_reaches_the_network(
    docs: tuple[DocsSite, Site], library: Library
) -> None:
    """The server's syncs (and every tool) read the mirror; a person's command fetches."""
    _, served = docs
    add_and_sync(library, spec_for(served))
    served.clear_requests()

    library.folders.sync()  # what the server's background sync calls
    library.lookup.search("quiverq worker lease", mode="keyword")

    assert served.requests == []


def test_removing_a_web_source_deletes_its_mirror(
    docs: tuple[DocsSite, Site], library: Library, home: Path
) -> None:
    _, served = docs
    add_and_sync(library, spec_for(served))
    assert (home / "web" / "quiverq").is_dir()

    library.folders.remove_source("quiverq")

    assert not (home / "web" / "quiverq").exists()
    assert not (home / "web" / "quiverq.json").exists()
    assert not library.lookup.search("marmalade deadlock", mode="keyword").hits


def test_a_single_page_is_a_source_of_its_own(
    docs: tuple[DocsSite, Site], library: Library
) -> None:
    _, served = docs
    add_and_sync(library, spec_for(served, "/docs/faq.html"), name="faq")

    [source] = [s for s in library.catalog.overview().sources if s.name == "faq"]
    assert source.documents == 1
    pages = {r.path for r in served.requests} - {"/robots.txt", "/sitemap.xml"}
    assert pages == {"/docs/faq.html"}


@pytest.mark.skipif(not VALGRIND.is_dir(), reason="Debian's valgrind manual is not installed")
def test_a_real_documentation_site_nobody_here_wrote(library: Library, home: Path) -> None:
    """Debian's packaged valgrind manual (DocBook HTML, 40 pages), served from disk."""
    with serve_site(disk_site(VALGRIND, prefix="/manual/")) as served:
        add_and_sync(library, spec_for(served, "/manual/"), name="valgrind")

    hit = top_hit(library, "cache simulation with callgrind")
    assert hit.path.startswith(served.url + "/manual/")
    [source] = [s for s in library.catalog.overview().sources if s.name == "valgrind"]
    assert source.documents >= 30 and source.failed == 0
    stored = "\n".join(p.read_text() for p in (home / "web" / "valgrind").glob("*.md"))
    assert "Next" not in {line.strip() for line in stored.splitlines()}  # no pager bars


def test_the_cli_adds_a_site_and_lists_it(
    docs: tuple[DocsSite, Site], home: Path, kb_cli: Callable[..., subprocess.CompletedProcess]
) -> None:
    site, served = docs
    kb = kb_cli

    refused = kb("add", served.url + "/docs/", "--yes", "--embedder", "none")
    assert refused.returncode != 0
    assert "loopback" in refused.stderr and "--allow-private-network" in refused.stderr
    assert (
        not (home / "sources.json").exists() or "quiverq" not in (home / "sources.json").read_text()
    )

    added = kb(
        "add", served.url + "/docs/", "--yes", "--allow-private-network", "--rate", "100",
        "--name", "quiverq", "--embedder", "none",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert f"quiverq: fetched {len(site.expected) + 1} pages" in added.stdout  # + the slow one

    listed = kb("list")
    assert f"quiverq (web, {served.url}/docs/)" in listed.stdout
    synced = kb("sync", "--embedder", "none")
    assert f"{len(site.expected) + 1} unchanged" in synced.stdout

    again = kb("add", served.url + "/docs/", "--yes", "--allow-private-network", "--rate", "100")
    assert again.returncode == 6 and "kb-mcp sync quiverq" in again.stderr
    narrowed = kb(
        "add", served.url + "/docs/", "--yes", "--allow-private-network", "--rate", "100",
        "--exclude", "/docs/api/*", "--embedder", "none",
    )  # fmt: skip
    assert narrowed.returncode == 0, narrowed.stderr
    assert "2 removed" in narrowed.stdout  # the two API pages the new bounds leave out
    assert '"/docs/api/*"' in (home / "sources.json").read_text()


def test_a_docs_site_on_a_postgresql_library(
    docs: tuple[DocsSite, Site], home: Path, postgres_url: str
) -> None:
    """A web source is this machine's, like a folder: its copy is under this home."""
    site, served = docs
    settings = Settings(home=home, embedder="none", store=Store(postgres_url))
    with Library(settings) as library:
        add_and_sync(library, spec_for(served))

        hit = top_hit(library, site.facts["/docs/cli.html"])
        assert hit.path == served.url + "/docs/cli.html"
        [source] = [s for s in library.catalog.overview().sources if s.name == "quiverq"]
        assert (source.kind, source.documents) == ("web", len(site.expected) + 1)
        assert source.host is not None  # a shared library says whose it is


def test_an_interrupted_crawl_resumes_and_a_half_written_mirror_heals(home: Path) -> None:
    """A crawl stopped part-way keeps what it stored (the manifest is saved as it goes);
    the next one asks those pages conditionally and fetches the rest. A file the manifest
    does not name (a write the manifest missed) is deleted, a page whose file is gone is
    fetched again."""
    from kb_mcp.ingest.fetch.crawl import crawl

    site = docs_site()
    site.slow_gate.set()
    with serve_site(site.routes) as served:
        spec = spec_for(served)
        pages = iter(range(6))
        first = crawl(spec, Mirror(home, "q"), should_stop=lambda: next(pages, None) is None)
        kept = Mirror(home, "q")
        assert first.limit == "stopped before the end"
        assert 0 < len(kept.pages) < len(site.expected)
        (kept.root / "stray-0000000000.md").write_text("a write the manifest missed")
        lost = next(iter(kept.pages.values()))
        (kept.root / lost.file).unlink()
        served.clear_requests()

        second = crawl(spec, Mirror(home, "q"))

        done = Mirror(home, "q")
        assert second.limit is None and second.error is None
        assert len(done.pages) == len(site.expected) + 1  # and the slow page
        assert not (done.root / "stray-0000000000.md").exists()
        assert (done.root / done.pages[lost.url].file).is_file()
        again = [r for r in served.requests if served.url + r.path == lost.url]
        assert again and again[0].status == 200  # asked without validators: no file held


def test_a_start_url_that_redirects_is_followed_before_the_crawl_is_bounded(
    docs: tuple[DocsSite, Site], library: Library
) -> None:
    """``http://h/manual`` → ``/docs/``: the crawl's origin and default prefix are the
    pages', not the URL typed (a given prefix stays)."""
    from kb_mcp.ingest.fetch.crawl import settle_start

    site, served = docs
    site.routes["/manual"] = Redirect("/docs/", 301)

    settled = settle_start(spec_for(served, "/manual"))
    kept = settle_start(dataclasses.replace(spec_for(served, "/manual"), prefix="/"))

    assert (settled.url, settled.prefix) == (served.url + "/docs/", "/docs/")
    assert (kept.url, kept.prefix) == (served.url + "/docs/", "/")
    add_and_sync(library, settled, name="manual")
    [source] = [s for s in library.catalog.overview().sources if s.name == "manual"]
    assert source.documents == len(site.expected) + 1


def test_a_start_url_nothing_answers_is_refused_naming_it(library: Library) -> None:
    from kb_mcp.ingest.fetch.crawl import settle_start
    from kb_mcp.ingest.fetch.net import FetchFailed

    with serve_site({}) as served:
        url = served.url
    with pytest.raises(FetchFailed, match="connection refused") as caught:
        settle_start(CrawlSpec(url + "/docs/", "/docs/", private_networks=()))
    assert url in caught.value.message
