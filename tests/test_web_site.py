"""The loopback documentation sites of tests/web_site.py answer as the crawler tests assume.

Driven with urllib.request and http.client only, so a fault here is the fixture's, not the
crawler's: conditional GETs (304), redirects and loops, gated slow pages (before the
headers and mid-body), lazily streamed huge pages, the gzip bomb, the request log, the
quiverq site's own consistency (facts, chrome, sitemap, robots) and disk_site on a real
folder.
"""

from __future__ import annotations

import gzip
import http.client
import threading
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest
from web_site import (
    QUIVERQ,
    GzipBomb,
    Huge,
    Page,
    Slow,
    Status,
    disk_site,
    docs_site,
    hostile_site,
    internal_site,
    serve_site,
)

VALGRIND = Path("/usr/share/doc/valgrind/html")


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a GET (HTTP errors are answers too)."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_page_answers_304_to_its_validators_and_200_after_an_edit() -> None:
    page = Page(b"<p>first</p>")
    with serve_site({"/p.html": page}) as site:
        status, headers, body = get(site.url + "/p.html")
        assert (status, body, headers["ETag"]) == (200, b"<p>first</p>", page.etag)
        etag, modified = headers["ETag"], headers["Last-Modified"]

        assert get(site.url + "/p.html", **{"If-None-Match": etag})[0] == 304
        assert get(site.url + "/p.html", **{"If-Modified-Since": modified})[0] == 304
        site.routes["/p.html"] = page.edited(b"<p>second</p>")
        status, headers, body = get(site.url + "/p.html", **{"If-None-Match": etag})
        assert (status, body) == (200, b"<p>second</p>") and headers["ETag"] != etag
        assert get(site.url + "/p.html", **{"If-Modified-Since": modified})[0] == 200

        records = site.requests
    assert [(r.status, r.body_bytes) for r in records] == [
        (200, 12),
        (304, 0),
        (304, 0),
        (200, 13),
        (200, 13),
    ]
    assert records[1].headers["if-none-match"] == etag


def test_redirects_are_followed_and_a_loop_never_ends() -> None:
    docs = docs_site()
    with serve_site(docs.routes) as site:
        response = urllib.request.urlopen(site.url + "/docs/old-guide.html", timeout=30)
        assert response.url == site.url + "/docs/guide.html"
        assert b"featherweight acknowledgement" in response.read()
        site.clear_requests()

        site.routes.update(hostile_site(site.port))
        with pytest.raises(urllib.error.HTTPError, match="infinite loop"):
            urllib.request.urlopen(site.url + "/loop/a", timeout=30)
        assert site.requested()[:3] == ["/loop/a", "/loop/b", "/loop/a"]
        assert get(site.url + "/redirect/file")[1]["Location"] == "file:///etc/passwd"


def test_a_gated_page_is_answered_only_after_the_test_opens_the_gate() -> None:
    docs = docs_site()
    answers: list[bytes] = []
    with serve_site(docs.routes) as site:
        client = threading.Thread(target=lambda: answers.append(get(site.url + docs.slow_path)[2]))
        client.start()
        assert docs.slow_arrived.wait(30)
        assert answers == []  # held: nothing sent yet
        assert [(r.target, r.status, r.finished) for r in site.requests] == [
            (docs.slow_path, 0, False)
        ]
        docs.slow_gate.set()
        client.join(30)
    assert b"all in the tenant called moraine" in answers[0]


def test_a_page_held_mid_body_has_sent_its_headers_and_half_its_body() -> None:
    slow = Slow(b"0123456789" * 10, mid_body=True)
    with serve_site({"/half": slow}) as site:
        connection = http.client.HTTPConnection(site.host, site.port, timeout=30)
        connection.request("GET", "/half")
        response = connection.getresponse()
        assert response.headers["Content-Length"] == "100"
        assert response.read(50) == b"0123456789" * 5
        held = site.requests[0]
        assert (held.status, held.body_bytes, held.complete, held.finished) == (
            200,
            50,
            False,
            False,
        )
        slow.gate.set()
        assert response.read() == b"0123456789" * 5
        assert site.requests[0].body_bytes == 100 and site.requests[0].complete


@pytest.mark.parametrize("chunked", [True, False])
def test_a_huge_page_streams_a_terabyte_lazily(chunked: bool) -> None:
    """1 TiB could never be built in memory: the first MiB arriving proves streaming."""
    with serve_site({"/huge": Huge(1 << 40, chunked=chunked)}) as site:
        connection = http.client.HTTPConnection(site.host, site.port, timeout=30)
        connection.request("GET", "/huge")
        response = connection.getresponse()
        first = response.read(1 << 20)
        assert first.startswith(b"<p>quiverq filler paragraph") and len(first) == 1 << 20
        assert response.headers.get("Content-Length") == (None if chunked else str(1 << 40))
        connection.close()
        record = site.wait_for(1)[0]
    assert not record.complete and record.body_bytes < 256 << 20


def test_a_gzip_page_is_compressed_only_for_clients_that_accept_gzip() -> None:
    docs = docs_site()
    with serve_site(docs.routes) as site:
        _, headers, plain = get(site.url + docs.gzip_path)
        assert "Content-Encoding" not in headers and b"defaults to 47 seconds" in plain
        _, headers, packed = get(site.url + docs.gzip_path, **{"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip" and gzip.decompress(packed) == plain
        assert site.requests[1].body_bytes == len(packed) < len(plain)


def test_the_gzip_bomb_goes_only_to_clients_that_accept_gzip() -> None:
    with serve_site({"/bomb": GzipBomb()}) as site:
        status, headers, body = get(site.url + "/bomb")
        assert status == 200 and "Content-Encoding" not in headers and len(body) < 200

        connection = http.client.HTTPConnection(site.host, site.port, timeout=30)
        connection.request("GET", "/bomb", headers={"Accept-Encoding": "gzip"})
        response = connection.getresponse()
        assert response.headers["Content-Encoding"] == "gzip"
        assert int(response.headers["Content-Length"]) < 5_000_000
        inflated = zlib.decompressobj(31).decompress(response.read(64 * 1024))
        connection.close()
    assert len(inflated) > 32 << 20 and inflated.strip(b" ") == b""


def test_the_request_log_shows_order_status_bytes_and_headers() -> None:
    routes = {
        "/busy": Status(503, retry_after="120"),
        "/slow-down": Status(429, retry_after="7"),
    }
    with serve_site(routes) as site:
        assert get(site.url + "/robots.txt", **{"User-Agent": "kb-mcp-test"})[0] == 404
        status, headers, _ = get(site.url + "/busy")
        assert (status, headers["Retry-After"]) == (503, "120")
        assert get(site.url + "/slow-down")[1]["Retry-After"] == "7"
        records = site.requests
        site.clear_requests()
        assert site.requests == []
    assert [(r.target, r.status, r.arrival) for r in records] == [
        ("/robots.txt", 404, 1),
        ("/busy", 503, 2),
        ("/slow-down", 429, 3),
    ]
    assert records[0].headers["user-agent"] == "kb-mcp-test"
    assert records[0].headers["host"] == f"127.0.0.1:{site.port}"


def test_the_internal_host_and_ipv6_loopback_are_separate_servers_on_the_same_port() -> None:
    with serve_site({}) as site, serve_site(internal_site(), "127.0.0.2", site.port) as inner:
        site.routes.update(hostile_site(site.port))
        index = get(site.url + "/")[2].decode()
        assert f'href="http://127.0.0.2:{site.port}/internal/admin"' in index
        assert b"INTERNAL-ONLY-CANARY" in get(f"http://127.0.0.2:{site.port}/x")[2]
        assert [r.target for r in inner.requests] == ["/x"]
        with serve_site(hostile_site(site.port), "::1", site.port) as six:
            assert get(f"{six.url}/ipv6")[2] == b"<html><body><p>REACHED-IPV6</p></body></html>"


def test_the_quiverq_site_is_consistent() -> None:
    """Each fact on its one page, chrome on every page but never in content, robots and
    sitemap as documented, the sitemap-only page linked from nowhere."""
    docs = docs_site()
    with serve_site(docs.routes) as site:
        bodies = {path: get(site.url + path)[2] for path in docs.expected}
        robots = get(site.url + "/robots.txt")[2].decode()
        sitemap = get(site.url + "/sitemap.xml")[2].decode()
        canonical = get(site.url + "/docs/guide.html?utm_source=x")[2]
        assert get(site.url + "/docs/broken.html")[0] == 500
        assert not any(r.path in docs.never_fetched for r in site.requests)
    assert len(docs.expected) == 16
    assert f"Sitemap: {site.url}/sitemap.xml" in robots and "Disallow: /docs/private/" in robots
    assert f"<loc>{site.url}{docs.sitemap_only}</loc>" in sitemap
    assert "/private/" not in sitemap and "slow.html" not in sitemap
    assert b'<link rel="canonical" href="/docs/guide.html">' in canonical
    assert bodies["/docs/manual.pdf"].startswith(b"%PDF")
    for path, fact in docs.facts.items():
        holders = [p for p, body in bodies.items() if fact.encode() in body]
        assert holders == ([] if path.endswith(".pdf") or path not in bodies else [path])
    fragments = "".join(file.read_text() for file in QUIVERQ.rglob("*.html"))
    for phrase in docs.chrome:
        assert phrase not in fragments and phrase.encode() in bodies["/docs/faq.html"]
    linked = [p for p, body in bodies.items() if docs.sitemap_only.encode() in body]
    assert linked == [docs.sitemap_only]  # its own canonical link only
    code = docs.code["/docs/quickstart.html"]
    assert code.startswith('import quiverq\n\napp = quiverq.App("heron")\n')
    assert "    if legs < 1 or legs > 4:\n" in code


def test_disk_site_serves_a_real_folder(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text("<h1>On disk</h1>")
    with serve_site(disk_site(tmp_path, "/site/")) as site:
        status, headers, body = get(site.url + "/site/guide/")
        assert (status, headers["Content-Type"], body) == (200, "text/html", b"<h1>On disk</h1>")
        assert get(site.url + "/site/guide/", **{"If-None-Match": headers["ETag"]})[0] == 304
        assert get(site.url + "/site/missing.html")[0] == 404
        connection = http.client.HTTPConnection(site.host, site.port, timeout=30)
        connection.request("GET", "/site/%2e%2e/%2e%2e/etc/passwd")
        assert connection.getresponse().status == 404


@pytest.mark.skipif(not VALGRIND.is_dir(), reason="Debian's valgrind manual is not installed")
def test_disk_site_serves_the_valgrind_manual() -> None:
    with serve_site(disk_site(VALGRIND, "/valgrind/")) as site:
        status, _, body = get(site.url + "/valgrind/")
        assert status == 200 and body == (VALGRIND / "index.html").read_bytes()
        assert get(site.url + "/valgrind/FAQ.html")[2] == (VALGRIND / "FAQ.html").read_bytes()


def test_teardown_never_waits_for_a_held_page() -> None:
    """A test that fails with the gate shut must still end: the client is cut off."""
    slow = Slow(b"never sent")
    failures: list[str] = []

    def fetch(url: str) -> None:
        try:
            urllib.request.urlopen(url, timeout=30).read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            failures.append(type(error).__name__)

    with serve_site({"/held": slow}) as site:
        client = threading.Thread(target=fetch, args=(site.url + "/held",))
        client.start()
        assert slow.arrived.wait(30)
    client.join(30)
    assert not client.is_alive() and len(failures) == 1
