"""Every limit and refusal of ``kb-mcp add https://…`` (issue 25), against real loopback sites.

Each test serves a small site with ``tests/web_site.py`` and checks two things: what the
crawl says (its ``CrawlOutcome``, the exception, the CLI's message) and, through the
server's ``site.requests``, what was and was not asked for. A refusal the user meets
(a URL, an address) is checked through the real ``kb-mcp add`` in a subprocess, with
nothing registered after it; the rest calls ``crawl()`` directly with a ``FakeClock``, so
the pacing (``rate``, ``Crawl-delay``, ``Retry-After``) is read from the sleeps it records
and no test waits for real. The one real wait is the time limit's: a page held on a gate
that is opened only after the timeout fired, so no machine is too slow or too fast for it.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import subprocess
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from web_site import (
    Generated,
    GzipBomb,
    Huge,
    MiB,
    Page,
    Redirect,
    Route,
    Site,
    Slow,
    Status,
    huge_headers_page,
    internal_site,
    redirect_loop,
    serve_site,
)

from kb_mcp.errors import InvalidInput
from kb_mcp.ingest.fetch import url as urls
from kb_mcp.ingest.fetch.crawl import MAX_HTML_BYTES, MAX_WAIT_S, CrawlSpec, crawl
from kb_mcp.ingest.fetch.mirror import CrawlOutcome, Mirror
from kb_mcp.ingest.fetch.net import MAX_REDIRECTS, Blocked, Fetcher, NetworkPolicy

# --------------------------------------------------------------------------- helpers


class FakeClock:
    """The crawl's clock: ``monotonic()`` reads ``now``; ``sleep()`` records the wait and
    moves ``now`` on, so pacing is checked without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def page(title: str, *links: str, canonical: str | None = None, extra: str = "") -> Page:
    """An HTML page with its own words (pages never share content by accident)."""
    head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    body = (
        f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head><body><main>"
        f"<h1>{title}</h1><p>The {title} page explains the {title} feature.</p>{extra}"
        f"<ul>{anchors}</ul></main></body></html>"
    )
    return Page(body.encode())


def stamped(routes: dict[str, Route], clock: FakeClock, stamps: list[tuple[float, str]]) -> None:
    """Wrap every route so each request records the fake clock's time when it arrived (the
    crawl is blocked in that request meanwhile, so the reading is exact)."""
    for key, route in list(routes.items()):

        def render(target: str, base: str, route: Route = route) -> Route:
            stamps.append((clock.now, target))
            return route

        routes[key] = Generated(render)


def flaky(first: Route, then: Route, times: int = 1) -> Generated:
    """``first`` for the first ``times`` requests, ``then`` after."""
    count = itertools.count()
    return Generated(lambda target, base: first if next(count) < times else then)


def run_crawl(
    home: Path, site: Site, start: str = "/docs/", clock: FakeClock | None = None, **bounds: Any
) -> tuple[CrawlOutcome, Mirror]:
    """Crawl ``site`` from ``start`` into the mirror ``site`` of ``home`` (private networks
    allowed unless ``private_networks`` says otherwise); the outcome and the mirror as the
    disk holds it afterwards."""
    bounds.setdefault("private_networks", ())
    bounds.setdefault("prefix", urls.default_prefix(start))
    spec = CrawlSpec(site.url + start, **bounds)
    out = crawl(spec, Mirror(home, "site"), clock=clock or FakeClock())
    return out, Mirror(home, "site")


def stored(mirror: Mirror) -> set[str]:
    """The path (and query) of every page the mirror holds, each checked on disk."""
    paths = set()
    for url, record in mirror.pages.items():
        assert (mirror.root / record.file).is_file(), url
        parts = urlsplit(url)
        paths.add(parts.path + (f"?{parts.query}" if parts.query else ""))
    assert {p.name for p in mirror.root.glob("*")} == {r.file for r in mirror.pages.values()}
    return paths


def reasons(out: CrawlOutcome) -> dict[str, str]:
    """Failed page path → reason."""
    return {urlsplit(url).path if "://" in url else url: why for url, why in out.failed}


def home_holds(home: Path, needle: bytes) -> list[Path]:
    """Every file under ``home`` whose bytes contain ``needle``."""
    return [p for p in home.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def kb(
    kb_cli: Callable[..., subprocess.CompletedProcess],
) -> Callable[..., subprocess.CompletedProcess]:
    """``python -m kb_mcp <args> --home <home>``, stdin closed (conftest's ``kb_cli``)."""
    return kb_cli


def assert_nothing_registered(home: Path, kb: Callable[..., subprocess.CompletedProcess]) -> None:
    """No source in ``list``, no registry entry, no mirror folder."""
    listed = kb("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s for s in json.loads(listed.stdout)["sources"] if s["kind"] == "web"] == []
    registry = home / "sources.json"
    assert not registry.exists() or json.loads(registry.read_text()) in ([], {"sources": []})
    assert not (home / "web").exists()


# --------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://127.0.0.1:{port}/docs/", "gopher://127.0.0.1:{port}/docs/"],
)
def test_only_http_and_https_are_fetched(home: Path, kb, url: str) -> None:
    with serve_site({"/docs/": page("Start")}) as site:
        done = kb("add", url.format(port=site.port), "--yes", "--allow-private-network")
        assert site.requests == []
    assert done.returncode != 0
    assert "only http and https URLs are fetched" in done.stderr
    assert_nothing_registered(home, kb)
    with pytest.raises(InvalidInput, match="only http and https"):
        CrawlSpec(url.format(port=1), "/", private_networks=()).check()


def test_credentials_in_the_url_are_refused_and_never_shown_or_stored(home: Path, kb) -> None:
    secret = "hunter2-quiverq-secret"
    with serve_site({"/docs/": page("Start")}) as site:
        url = f"http://deploy:{secret}@127.0.0.1:{site.port}/docs/"
        done = kb("add", url, "--yes", "--allow-private-network")
        assert site.requests == []
    assert done.returncode != 0
    assert "URL holds credentials" in done.stderr
    assert secret not in done.stdout + done.stderr
    assert_nothing_registered(home, kb)
    assert home_holds(home, secret.encode()) == []


def test_a_link_with_credentials_is_not_followed_nor_its_secret_stored(home: Path) -> None:
    secret = "s3cret-in-a-link-4417"
    with serve_site({}) as site:
        site.routes["/docs/"] = page(
            "Start", f"http://user:{secret}@127.0.0.1:{site.port}/docs/behind.html"
        )
        site.routes["/docs/behind.html"] = page("Behind")
        _out, mirror = run_crawl(home, site)
        assert "/docs/behind.html" not in site.requested()
    assert stored(mirror) == {"/docs/"}
    assert home_holds(home, secret.encode()) == []


# --------------------------------------------------------------------------- addresses


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_refused_without_allow_private_network(home: Path, kb, host: str) -> None:
    """``localhost`` is refused after DNS: the name is not on any list, its address is."""
    with serve_site({"/docs/": page("Start")}) as site:
        done = kb("add", f"http://{host}:{site.port}/docs/", "--yes")
        assert site.requests == []
    assert done.returncode != 0
    assert f"{host} resolves to 127.0.0.1, a loopback address" in done.stderr
    assert "--allow-private-network" in done.stderr
    assert_nothing_registered(home, kb)
    spec = CrawlSpec(f"http://{host}:{site.port}/docs/", "/docs/")
    with pytest.raises(Blocked, match="loopback"):
        crawl(spec, Mirror(home, "site"), clock=FakeClock())


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped IPv6
        "http://2130706433:{port}/",  # 127.0.0.1 as one number, as resolvers read it
        "http://0x7f.1:{port}/",
        "http://127.1:{port}/",
        "http://0.0.0.0:{port}/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://100.64.0.1/",  # shared address space (carrier-grade NAT)
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
    ],
)
def test_every_spelling_of_a_non_public_address_is_refused(home: Path, url: str) -> None:
    with serve_site({"/": page("Start")}) as site:
        spec = CrawlSpec(url.format(port=site.port), "/")
        with pytest.raises(Blocked, match="requests there need --allow-private-network"):
            crawl(spec, Mirror(home, "site"), clock=FakeClock())
        assert site.requests == []
    assert not (home / "web").exists()


def test_a_name_resolving_to_an_allowed_and_an_internal_address_is_refused(
    home: Path, two_hosts
) -> None:
    """Every address a name answers must be allowed: the crawl cannot know which one a
    second lookup (or another client) would use. The name is resolved by the crawl's own
    resolver seam, standing in for a DNS answer."""
    site, inner = two_hosts
    site.routes["/docs/"] = page("Start")
    answers = {"docs.test": ["127.0.0.1"], "split.test": ["127.0.0.1", "127.0.0.2"]}
    fetcher = Fetcher(
        NetworkPolicy(networks=(ipaddress.ip_network("127.0.0.1/32"),)),
        resolve=lambda host, port: answers[host],
    )
    good = CrawlSpec(f"http://docs.test:{site.port}/docs/", "/docs/")
    crawl(good, Mirror(home, "good"), fetcher=fetcher, clock=FakeClock())
    assert [r.headers["host"] for r in site.requests if r.path == "/docs/"] == [
        f"docs.test:{site.port}"
    ]
    split = CrawlSpec(f"http://split.test:{site.port}/docs/", "/docs/")
    with pytest.raises(Blocked, match=r"split\.test resolves to 127\.0\.0\.2"):
        crawl(split, Mirror(home, "split"), fetcher=fetcher, clock=FakeClock())
    assert inner.requests == []


def test_the_refusal_hint_names_flags_the_cli_has(kb) -> None:
    """The hint tells the user what to type: every flag it names must exist, and the one
    that takes a network must be the one that takes a value."""
    with serve_site({}) as site:
        done = kb("add", f"{site.url}/docs/", "--yes")
        assert site.requests == []
    assert "--allow-network CIDR" in done.stderr, done.stderr
    flags = {word.strip(",.()") for word in done.stderr.split() if word.startswith("--")}
    usage = kb("add", "--help").stdout
    assert flags and all(flag in usage for flag in flags), (flags, done.stderr)


def test_allow_private_network_allows_loopback(home: Path, kb) -> None:
    with serve_site(
        {"/docs/": page("Start", "/docs/next.html"), "/docs/next.html": page("Next")}
    ) as site:
        done = kb("add", f"{site.url}/docs/", "--yes", "--allow-private-network", "--rate", "100")
        assert done.returncode == 0, done.stderr
        assert {"/docs/", "/docs/next.html"} <= set(site.requested())
    assert "fetched 2 pages" in done.stdout
    assert stored(Mirror(home, f"127.0.0.1-{site.port}")) == {"/docs/", "/docs/next.html"}


@pytest.fixture
def two_hosts() -> Iterator[tuple[Site, Site]]:
    """A site on 127.0.0.1 and ``internal_site()`` on 127.0.0.2, on the same port."""
    with serve_site({}) as site, serve_site(internal_site(), "127.0.0.2", site.port) as inner:
        yield site, inner


def test_allow_network_refuses_a_start_url_outside_it(home: Path, kb, two_hosts) -> None:
    site, inner = two_hosts
    done = kb(
        "add", f"http://127.0.0.2:{site.port}/docs/", "--yes", "--allow-network", "127.0.0.1/32"
    )
    assert done.returncode != 0
    assert "127.0.0.2 resolves to 127.0.0.2, a loopback address" in done.stderr
    assert inner.requests == [] and site.requests == []
    assert_nothing_registered(home, kb)


def test_allow_network_allows_its_address_but_no_link_or_redirect_elsewhere(
    home: Path, two_hosts
) -> None:
    """``--allow-network 127.0.0.1/32``: the site is crawled; a link to 127.0.0.2 is never
    asked for, a redirect there or to the cloud metadata address is refused before any
    connection, and the internal server sees nothing."""
    site, inner = two_hosts
    port = site.port
    site.routes |= {
        "/docs/": page(
            "Start",
            f"http://127.0.0.2:{port}/docs/admin.html",
            "/docs/to-internal.html",
            "/docs/to-metadata.html",
            "/docs/fine.html",
        ),
        "/docs/to-internal.html": Redirect(f"http://127.0.0.2:{port}/docs/admin.html", 302),
        "/docs/to-metadata.html": Redirect("http://169.254.169.254/latest/meta-data/", 302),
        "/docs/fine.html": page("Fine"),
    }
    out, mirror = run_crawl(home, site, private_networks=("127.0.0.1/32",))
    assert inner.requests == []
    assert stored(mirror) == {"/docs/", "/docs/fine.html"}
    why = reasons(out)
    assert "127.0.0.2 resolves to 127.0.0.2, a loopback address" in why["/docs/to-internal.html"]
    assert "a link-local address" in why["/docs/to-metadata.html"]
    assert "/docs/admin.html" not in site.requested()


# --------------------------------------------------------------------------- redirects


def test_a_redirect_to_file_is_refused(home: Path) -> None:
    routes = {
        "/docs/": page("Start", "/docs/passwd.html"),
        "/docs/passwd.html": Redirect("file:///etc/passwd", 302),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        assert site.requested().count("/docs/passwd.html") == 1
    assert stored(mirror) == {"/docs/"}
    assert "a redirect to a refused URL: only http and https" in reasons(out)["/docs/passwd.html"]
    assert out.skipped == {"refused: a redirect to a refused URL": 1}
    assert not home_holds(home, b"root:x:0:0")


def test_a_redirect_loop_ends_with_each_hop_asked_once(home: Path) -> None:
    routes = {"/docs/": page("Start", "/docs/loop/a"), **redirect_loop("/docs/loop/")}
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        asked = site.requested()
    assert asked.count("/docs/loop/a") == 1 and asked.count("/docs/loop/b") == 1
    assert "redirect loop" in reasons(out)["/docs/loop/a"]
    assert stored(mirror) == {"/docs/"}


@pytest.mark.parametrize("hops", [MAX_REDIRECTS, MAX_REDIRECTS + 1])
def test_at_most_five_redirects_are_followed(home: Path, hops: int) -> None:
    routes: dict[str, Route] = {"/docs/": page("Start", "/docs/r0")}
    routes |= {f"/docs/r{n}": Redirect(f"/docs/r{n + 1}", 301) for n in range(hops)}
    routes[f"/docs/r{hops}"] = page("Target")
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        asked = [t for t in site.requested() if t.startswith("/docs/r")]
    if hops <= MAX_REDIRECTS:
        assert stored(mirror) == {"/docs/", f"/docs/r{hops}"}
        assert asked == [f"/docs/r{n}" for n in range(hops + 1)]
    else:
        assert stored(mirror) == {"/docs/"}
        assert f"more than {MAX_REDIRECTS} redirects" in reasons(out)["/docs/r0"]
        assert asked == [f"/docs/r{n}" for n in range(MAX_REDIRECTS + 1)]  # r6 never asked


# --------------------------------------------------------------------------- size and time


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_page_over_the_size_cap_fails_without_being_read_whole(home: Path, chunked: bool) -> None:
    routes = {
        "/docs/": page("Start", "/docs/huge.html", "/docs/after.html"),
        "/docs/huge.html": Huge(20 * MiB, chunked=chunked),
        "/docs/after.html": page("After"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site, max_page_bytes=MiB)
        huge = next(r for r in site.requests if r.target == "/docs/huge.html")
    assert "1,048,576" in reasons(out)["/docs/huge.html"]
    assert stored(mirror) == {"/docs/", "/docs/after.html"}  # the crawl went on
    assert not huge.complete
    assert out.bytes < 2 * MiB + 64 * 1024


def test_an_html_page_over_5_mib_is_not_read_though_under_the_page_cap(home: Path) -> None:
    """Reading HTML takes many times the page in memory: a docs page is never this big."""
    routes = {
        "/docs/": page("Start", "/docs/big.html"),
        "/docs/big.html": Huge(MAX_HTML_BYTES + 1, chunked=False),  # text/html
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
    assert "an HTML page over 5,242,880 bytes" in reasons(out)["/docs/big.html"]
    assert stored(mirror) == {"/docs/"}


def test_a_gzip_bomb_stops_at_the_cap_without_inflating(home: Path) -> None:
    """4 GiB of spaces from 4 MB of gzip: inflation stops at the per-page cap, so the
    crawl's memory stays near the cap (tracemalloc's peak) and the bomb is not read whole."""
    routes = {"/docs/": page("Start", "/docs/bomb.html"), "/docs/bomb.html": GzipBomb()}
    with serve_site(routes) as site:
        tracemalloc.start()
        try:
            out, mirror = run_crawl(home, site, max_page_bytes=4 * MiB)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        bomb = next(r for r in site.requests if r.target == "/docs/bomb.html")
    assert "over the 4,194,304-byte cap" in reasons(out)["/docs/bomb.html"]
    assert stored(mirror) == {"/docs/"}
    assert peak < 32 * MiB, f"peak {peak / MiB:.0f} MiB"
    assert not bomb.complete


@pytest.mark.parametrize("mid_body", [False, True], ids=["before-headers", "mid-body"])
def test_a_page_over_the_time_limit_fails_and_the_crawl_goes_on(home: Path, mid_body: bool) -> None:
    """The page is held on a gate opened only after the crawl gave up on it."""
    slow = Slow(b"<html><body><h1>Slow</h1><p>slow words</p></body></html>" * 50, mid_body=mid_body)
    routes = {
        "/docs/": page("Start", "/docs/slow.html", "/docs/after.html"),
        "/docs/slow.html": slow,
        "/docs/after.html": page("After"),
    }
    with serve_site(routes) as site:
        try:
            out, mirror = run_crawl(home, site, timeout=2.0)
            assert slow.arrived.is_set() and not slow.gate.is_set()
        finally:
            slow.gate.set()
    why = reasons(out)["/docs/slow.html"]
    assert "timed out" in why or "not answered in 2 s" in why, why
    assert stored(mirror) == {"/docs/", "/docs/after.html"}


def test_content_types_kb_mcp_does_not_read_are_skipped_unread(home: Path) -> None:
    noise = bytes(range(256)) * 64
    routes = {
        "/docs/": page("Start", "/docs/logo.png", "/docs/blob", "/docs/data.html", "/docs/movie"),
        "/docs/logo.png": Page(b"<p>WRONG-TYPE-PNG</p>" + noise, "image/png"),
        "/docs/blob": Page(b"<p>WRONG-TYPE-BIN</p>" + noise, "application/octet-stream"),
        "/docs/data.html": Page(b"\x00\x01WRONG-TYPE-DATA" + noise, "application/octet-stream"),
        "/docs/movie": Huge(20 * MiB, content_type="video/mp4"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        movie = next(r for r in site.requests if r.target == "/docs/movie")
    assert stored(mirror) == {"/docs/"}
    assert out.skipped["content type image/png"] == 1
    assert out.skipped["content type application/octet-stream"] == 1
    assert out.skipped["content type video/mp4"] == 1
    assert "/docs/data.html" in reasons(out)  # named .html, but no text: unreadable
    assert not movie.complete, "a type kb-mcp does not read was downloaded whole"
    assert out.bytes < 2 * MiB
    for canary in (b"WRONG-TYPE-PNG", b"WRONG-TYPE-BIN", b"WRONG-TYPE-DATA"):
        assert home_holds(home, canary) == []


@pytest.mark.parametrize("line", [8000, MiB], ids=["many-headers", "one-long-header"])
def test_huge_headers_are_refused_cleanly(home: Path, line: int) -> None:
    routes = {
        "/docs/": page("Start", "/docs/headers.html", "/docs/after.html"),
        "/docs/headers.html": huge_headers_page(MiB, line),
        "/docs/after.html": page("After"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        assert "/docs/headers.html" in site.requested()
    why = reasons(out)["/docs/headers.html"]
    assert "got more than 100 headers" in why or "line" in why.lower(), why
    assert stored(mirror) == {"/docs/", "/docs/after.html"}


# --------------------------------------------------------------------------- robots.txt


def robots(text: str) -> Page:
    return Page(text.encode(), "text/plain")


def test_a_path_robots_txt_disallows_is_never_requested(home: Path) -> None:
    routes = {
        "/robots.txt": robots("User-agent: *\nDisallow: /docs/private/\n"),
        "/docs/": page("Start", "/docs/private/secret.html", "/docs/open.html"),
        "/docs/private/secret.html": page("Secret"),
        "/docs/open.html": page("Open"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        assert "/docs/private/secret.html" not in site.requested()
    assert stored(mirror) == {"/docs/", "/docs/open.html"}
    assert out.skipped["disallowed by robots.txt"] == 1


def test_rules_for_kb_mcp_by_name_apply(home: Path) -> None:
    routes = {
        "/robots.txt": robots(
            "User-agent: kb-mcp\nDisallow: /docs/no-kb/\n\nUser-agent: *\nAllow: /\n"
        ),
        "/docs/": page("Start", "/docs/no-kb/page.html"),
        "/docs/no-kb/page.html": page("Hidden"),
    }
    with serve_site(routes) as site:
        run_crawl(home, site)
        assert "/docs/no-kb/page.html" not in site.requested()


@pytest.mark.parametrize("status", [500, 503])
def test_robots_txt_failing_means_nothing_is_fetched(home: Path, status: int) -> None:
    """RFC 9309 2.3.1.4: a robots.txt that is "unreachable" (5xx) disallows everything."""
    routes = {"/robots.txt": Status(status), "/docs/": page("Start")}
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        assert site.requested() == ["/robots.txt"]
    assert out.error is not None
    assert f"robots.txt answered HTTP {status}" in out.error and "allows nothing" in out.error
    assert stored(mirror) == set()


def test_robots_txt_missing_allows_everything(home: Path) -> None:
    routes = {
        "/robots.txt": Status(404),
        "/docs/": page("Start", "/docs/a.html"),
        "/docs/a.html": page("A"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
    assert out.error is None
    assert stored(mirror) == {"/docs/", "/docs/a.html"}


def test_a_huge_robots_txt_is_read_up_to_500_kib(home: Path) -> None:
    """RFC 9309 2.5: a crawler may stop reading robots.txt at 500 KiB. A rule before that
    applies; one after it is never seen, and the rest of the 5 MiB is not received."""
    filler = b"Disallow: /nothing-here/\n" * (600 * 1024 // 25)
    text = b"User-agent: *\nDisallow: /docs/early/\n" + filler + b"Disallow: /docs/late/\n"
    text += b"# padding\n" * (5 * MiB // 10)
    routes = {
        "/robots.txt": Page(text, "text/plain"),
        "/docs/": page("Start", "/docs/early/a.html", "/docs/late/b.html"),
        "/docs/early/a.html": page("Early"),
        "/docs/late/b.html": page("Late"),
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
        asked = site.requested()
    assert "/docs/early/a.html" not in asked
    assert stored(mirror) == {"/docs/", "/docs/late/b.html"}
    assert out.error is None
    assert out.bytes < 500 * 1024 + 64 * 1024 + 4096


def paced_crawl(
    home: Path, routes: dict[str, Route], **bounds: Any
) -> tuple[CrawlOutcome, FakeClock, list[tuple[float, str]]]:
    """Crawl with a fake clock; every request's arrival on that clock, in order."""
    clock, stamps = FakeClock(), []
    stamped(routes, clock, stamps)
    with serve_site(routes) as site:
        out, _ = run_crawl(home, site, clock=clock, **bounds)
    return out, clock, stamps


def gaps(stamps: list[tuple[float, str]]) -> list[float]:
    return [round(b[0] - a[0], 6) for a, b in itertools.pairwise(stamps)]


def five_pages(robots_text: str | None = None) -> dict[str, Route]:
    routes: dict[str, Route] = {
        "/docs/": page("Start", *(f"/docs/p{n}.html" for n in range(4))),
        **{f"/docs/p{n}.html": page(f"P{n}") for n in range(4)},
    }
    if robots_text is not None:
        routes["/robots.txt"] = robots(robots_text)
    routes["/sitemap.xml"] = Status(404)
    return routes


def test_crawl_delay_is_honoured(home: Path) -> None:
    out, clock, stamps = paced_crawl(home, five_pages("User-agent: *\nCrawl-delay: 3\n"), rate=2)
    pages = [(t, target) for t, target in stamps if target.startswith("/docs/")]
    assert len(pages) == 5 and out.fetched == 5
    assert min(gaps(pages)) >= 3.0, gaps(pages)
    assert clock.sleeps and max(clock.sleeps) <= 3.0


def test_the_rate_spaces_every_request(home: Path) -> None:
    """``rate=2``: requests 0.5 s apart on the crawl's clock (robots.txt and sitemaps are
    requests to the site too)."""
    out, clock, stamps = paced_crawl(home, five_pages("User-agent: *\nAllow: /\n"), rate=2)
    assert out.fetched == 5
    assert min(gaps(stamps)) >= 0.5, stamps
    assert sum(clock.sleeps) == pytest.approx(0.5 * (len(stamps) - 1), abs=1e-6)


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_then_the_page_asked_again(home: Path, status: int) -> None:
    routes = five_pages()
    routes["/docs/p1.html"] = flaky(Status(status, retry_after="7"), page("P1"))
    out, clock, stamps = paced_crawl(home, routes)
    asked = [t for _, t in stamps]
    assert asked.count("/docs/p1.html") == 2
    assert 7.0 in clock.sleeps
    first, second = [t for t, target in stamps if target == "/docs/p1.html"]
    assert second - first >= 7.0
    assert out.fetched == 5 and out.failed == []


def test_retry_after_is_retried_a_bounded_number_of_times(home: Path) -> None:
    routes = five_pages()
    routes["/docs/p1.html"] = Status(429, retry_after="2")
    out, _clock, stamps = paced_crawl(home, routes)
    assert [t for _, t in stamps].count("/docs/p1.html") == 3  # once and two retries
    assert reasons(out)["/docs/p1.html"] == "HTTP 429"
    assert out.fetched == 4


def test_retry_after_beyond_the_longest_wait_stops_the_crawl_keeping_the_mirror(home: Path) -> None:
    routes = five_pages()
    with serve_site(routes) as site:
        run_crawl(home, site)
        before = {url: r.file for url, r in Mirror(home, "site").pages.items()}
        assert len(before) == 5
        site.clear_requests()
        routes["/docs/"] = Status(503, retry_after=str(int(MAX_WAIT_S) * 60))
        clock = FakeClock()
        out, mirror = run_crawl(home, site, clock=clock)
        asked = site.requested()
    assert asked.count("/docs/") == 1 and not any(t.startswith("/docs/p") for t in asked)
    assert out.limit is not None and "asked to wait 3600 s" in out.limit
    assert out.removed == 0 and out.error is None
    assert all(s <= 1.0 for s in clock.sleeps)  # nothing near an hour was waited
    assert {url: r.file for url, r in mirror.pages.items()} == before
    assert len(stored(mirror)) == 5


# --------------------------------------------------------------------------- bounds


def chain(length: int) -> dict[str, Route]:
    """/docs/d0.html → d1 → … (each page links the next one)."""
    return {f"/docs/d{n}.html": page(f"D{n}", f"/docs/d{n + 1}.html") for n in range(length)}


@pytest.mark.parametrize("depth", [0, 2])
def test_depth_bounds_the_links_followed(home: Path, depth: int) -> None:
    with serve_site(chain(8)) as site:
        _out, mirror = run_crawl(home, site, "/docs/d0.html", prefix="/docs/", depth=depth)
        asked = site.requested()
    assert stored(mirror) == {f"/docs/d{n}.html" for n in range(depth + 1)}
    assert f"/docs/d{depth + 1}.html" not in asked
    if depth == 0:
        assert "/sitemap.xml" not in asked  # one page: no sitemap is read


def wide(n: int = 50) -> dict[str, Route]:
    """/docs/ links ``n`` pages of about 10 KB each."""
    filler = "<p>" + "filler words of a long page " * 350 + "</p>"
    routes: dict[str, Route] = {"/docs/": page("Start", *(f"/docs/w{i}.html" for i in range(n)))}
    routes |= {f"/docs/w{i}.html": page(f"W{i}", extra=filler) for i in range(n)}
    return routes


def test_max_pages_bounds_the_pages_asked_for(home: Path) -> None:
    with serve_site(wide()) as site:
        out, mirror = run_crawl(home, site, max_pages=5)
        asked = [t for t in site.requested() if t.startswith("/docs/")]
    assert len(stored(mirror)) == 5 and len(asked) == 5
    assert out.limit == "the page limit (5) was reached"


def test_max_bytes_bounds_what_is_received(home: Path) -> None:
    with serve_site(wide()) as site:
        out, mirror = run_crawl(home, site, max_bytes=25_000)
        asked = [t for t in site.requested() if t.startswith("/docs/")]
    assert out.limit == "the byte limit (25,000) was reached"
    assert 3 <= len(stored(mirror)) <= 4 and len(asked) == len(stored(mirror))
    assert out.bytes < 25_000 + 12_000  # at most one page past the bound


def test_links_off_the_prefix_are_never_requested(home: Path) -> None:
    with serve_site({}) as site:
        site.routes |= {
            "/docs/": page(
                "Start",
                "/blog/post.html",
                "/docs2/other.html",
                "/docsearch.html",
                "../index.html",
                f"http://127.0.0.1:{site.port + 1 if site.port < 65535 else 1}/docs/x.html",
                "/docs/in.html",
            ),
            "/docs/in.html": page("In"),
            "/blog/post.html": page("Blog"),
            "/docs2/other.html": page("Other"),
            "/docsearch.html": page("Search"),
            "/index.html": page("Index"),
        }
        _out, mirror = run_crawl(home, site)
        asked = site.requested()
    assert stored(mirror) == {"/docs/", "/docs/in.html"}
    for path in ("/blog/post.html", "/docs2/other.html", "/docsearch.html", "/index.html"):
        assert path not in asked


def test_include_and_exclude_globs(home: Path) -> None:
    routes = {
        "/docs/": page("Start", "/docs/api/a.html", "/docs/api/old-b.html", "/docs/guide.html"),
        "/docs/api/a.html": page("A"),
        "/docs/api/old-b.html": page("OldB"),
        "/docs/guide.html": page("Guide"),
    }
    with serve_site(routes) as site:
        _out, mirror = run_crawl(
            home, site, include=("/docs/", "/docs/api/*"), exclude=("*/old-*",)
        )
        asked = site.requested()
    assert stored(mirror) == {"/docs/", "/docs/api/a.html"}
    assert "/docs/guide.html" not in asked and "/docs/api/old-b.html" not in asked


# --------------------------------------------------------------------------- one page, one copy


def test_a_page_with_a_canonical_url_is_stored_once(home: Path) -> None:
    same = page("Guide", canonical="/docs/guide.html")
    routes = {
        "/docs/": page(
            "Start", "/docs/guide.html?utm_source=x", "/docs/guide.html", "/docs/print/guide"
        ),
        "/docs/guide.html": same,
        "/docs/print/guide": same,
    }
    with serve_site(routes) as site:
        _out, mirror = run_crawl(home, site)
    assert stored(mirror) == {"/docs/", "/docs/guide.html"}


def test_a_page_reached_through_a_redirect_is_stored_once(home: Path) -> None:
    routes = {
        "/docs/": page("Start", "/docs/old.html", "/docs/new.html"),
        "/docs/old.html": Redirect("/docs/new.html", 301),
        "/docs/new.html": page("New"),
    }
    with serve_site(routes) as site:
        _out, mirror = run_crawl(home, site)
    assert stored(mirror) == {"/docs/", "/docs/new.html"}
    assert len(set(mirror.url_of())) == 2


def test_identical_content_at_two_urls_is_stored_once(home: Path) -> None:
    same = page("Twin")
    routes = {
        "/docs/": page("Start", "/docs/a.html", "/docs/b.html"),
        "/docs/a.html": same,
        "/docs/b.html": same,
    }
    with serve_site(routes) as site:
        out, mirror = run_crawl(home, site)
    assert stored(mirror) == {"/docs/", "/docs/a.html"}
    assert out.skipped["the same content as another page"] == 1


def test_environment_proxies_are_not_used(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would resolve names where the address check cannot see."""
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with serve_site({"/docs/": page("Start")}) as site:
        _out, mirror = run_crawl(home, site)
    assert stored(mirror) == {"/docs/"}
    assert os.environ["http_proxy"]
