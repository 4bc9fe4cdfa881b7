"""The web view's bounds (issue 20 items 6 and 7): a page's size does not grow with the
document it shows, and the server does not keep a connection that never completes its
request. Real documents of several MB in a real folder source, through the real app;
the connection limits against a real ``kb-mcp web`` process on loopback.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from starlette.testclient import TestClient
from test_web_security import web_process

from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import Policy
from kb_mcp.web.markup import markdown_html

# Whatever the document: 128 KB of numbered lines, 256 KB of rendered Markdown, the rest.
PAGE_CAP = 450 * 1024
SENTENCE = "The archive bucket keeps each blob for ninety days, then the sweeper deletes it."
LONG_URL = "/" + "a" * 10_000


def big_markdown(lines: int) -> str:
    body = "\n".join(f"Line {n}: {SENTENCE}" for n in range(3, lines))
    return f"# Retention log\n\n{body}\nTHE LAST LINE of the log\n"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Library]]:
    """A folder with a 4 MB Markdown log, a 1.5 MB one-line file, a note whose one link
    reference is used 5,000 times, and a 300 KB log to walk page by page."""
    root = tmp_path_factory.mktemp("weblimits")
    folder = root / "notes"
    folder.mkdir()
    (folder / "big.md").write_text(big_markdown(45_000), encoding="utf-8")
    (folder / "small.md").write_text(big_markdown(3_000), encoding="utf-8")
    (folder / "minified.txt").write_text("var x=1;" * 190_000 + "\n", encoding="utf-8")
    uses = " ".join(["[the sweeper][r]"] * 5_000)
    (folder / "refs.md").write_text(f"# Refs\n\n[r]: {LONG_URL}\n\n{uses}\n", encoding="utf-8")
    library = Library(Settings(home=root / "home", embedder="none"))
    library.folders.add_folder(folder, "notes")
    library.folders.sync()
    assert (folder / "big.md").stat().st_size > 4_000_000
    app = build_app(library, Policy("127.0.0.1", None))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client, library
    library.close()


def _get(client: TestClient, href: str) -> str:
    page = client.get(unescape(href).split("#")[0])
    assert page.status_code == 200, page.text[:500]
    assert len(page.content) <= PAGE_CAP, f"{href}: {len(page.content):,} bytes"
    return page.text


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"<div class='line' id='L(\d+)'>", text)]


def _link(text: str, rel: str) -> str | None:
    found = re.search(rf"<a rel='{rel}' href='([^']+)'>", text)
    return found[1] if found else None


def test_document_page_of_a_4_mb_file_is_bounded_and_its_links_reach_the_last_line(
    big,
) -> None:
    """issue 20 item 6: the page of a multi-MB document holds one page of its lines (a
    few hundred KB at most, not the whole file), says which, and its last-page link
    leads to the page holding the last line."""
    client, library = big
    doc = library.lookup.read("big.md", 1, 1).doc
    total = library.lookup.read("big.md", 1, 1).total_lines
    first = _get(client, f"/doc/{doc}")
    shown = _numbers(first)
    assert shown[0] == 1 and 500 < len(shown) < total
    assert shown == list(range(1, len(shown) + 1))
    assert f"lines 1-{len(shown):,} of {total:,}" in first
    assert _link(first, "prev") is None
    following = _get(client, _link(first, "next") or "")
    assert _numbers(following)[0] == len(shown) + 1
    last_href = _link(first, "last")
    assert last_href is not None
    last = _get(client, last_href)
    assert _numbers(last)[-1] == total and "THE LAST LINE of the log" in last
    assert _link(last, "next") is None and _link(last, "prev") is not None


def test_walking_next_links_shows_every_line_once_in_order(big) -> None:
    """issue 20 item 6: page after page, the next links cover the document, each line
    once, and previous leads back to the page before."""
    client, library = big
    doc = library.lookup.read("small.md", 1, 1).doc
    total = library.lookup.read("small.md", 1, 1).total_lines
    seen: list[int] = []
    starts: list[str] = []
    href: str | None = f"/doc/{doc}"
    for _ in range(50):  # bounded: ~300 KB of lines is a handful of pages
        if href is None:
            break
        text = _get(client, href)
        starts.append(href)
        seen += _numbers(text)
        if len(starts) == 2:
            back = _get(client, _link(text, "prev") or "")
            assert _numbers(back)[0] == 1
        href = _link(text, "next")
    assert href is None and len(starts) > 2
    assert seen == list(range(1, total + 1))


def test_a_cited_range_deep_in_a_large_file_is_on_the_page_that_holds_it(big) -> None:
    """issue 20 item 6: ``?lines=30000-30040`` (a search hit's cite) opens the page that
    holds those lines, wrapped in the anchor the link scrolls to; paging on keeps the mark."""
    client, library = big
    doc = library.lookup.read("big.md", 1, 1).doc
    text = _get(client, f"/doc/{doc}?lines=30000-30040")
    numbers = _numbers(text)
    assert numbers[0] <= 30_000 and numbers[-1] >= 30_040
    cited = text[text.index("<div class='cited' id='L30000-L30040'>") :]
    assert cited.count("class='line'", 0, cited.index("</div></div>") + 12) == 41
    assert "lines=30000-30040" in (_link(text, "next") or "")
    # The cite form of the same link (``doc#L30000-L30040``, as search results give it).
    assert "id='L30000-L30040'" in _get(client, f"/doc/{doc}%23L30000-L30040")


def test_a_line_longer_than_a_page_is_cut_and_says_so(big) -> None:
    """issue 20 item 6: a 1.5 MB single line (minified code) is shown cut, with its
    length and how to find text in the rest, within the same bound."""
    client, library = big
    doc = library.lookup.read("minified.txt", 1, 1).doc
    text = _get(client, f"/doc/{doc}")
    assert _numbers(text)[0] == 1
    assert "line 1 has 1,520,000 characters; the first" in text


def test_rendered_markdown_is_bounded_when_one_reference_is_used_thousands_of_times(
    big,
) -> None:
    """issue 20 item 6: a link reference with a 10 KB URL used 5,000 times would render
    as 50 MB of HTML; the rendered part stops at its bound and says so, the lines show."""
    client, library = big
    doc = library.lookup.read("refs.md", 1, 1).doc
    text = _get(client, f"/doc/{doc}")
    assert "rendered would be over" in text
    assert "[the sweeper][r]" in text  # the line itself, as text
    assert text.count(LONG_URL) <= 1


def test_markdown_rendered_a_token_at_a_time_is_what_markdown_it_renders() -> None:
    """The bounded renderer is markdown-it's own rules, token by token: same HTML."""
    text = (
        "# Title\n\nSome *emphasis*, `code`, a [link](https://example.org/a) and\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nprint('x')\n```\n\n> quoted\n\n- one\n- two\n"
        "\n<script>alert(1)</script>\n"
    )
    reference = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    assert markdown_html(text, 1_000_000) == reference.render(text)
    assert markdown_html(text, 100) is None


def test_search_page_of_the_large_files_is_bounded(big) -> None:
    """issue 20 item 6: search results are cut as the search tool cuts them."""
    client, _library = big
    for q in ("archive bucket sweeper", "var", "sweeper"):
        page = client.get("/search", params={"q": q, "mode": "keyword"})
        assert page.status_code == 200 and len(page.content) <= PAGE_CAP


# --- connections (item 7): a real ``kb-mcp web`` on loopback -------------------------

HEAD_START = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a request head never finished


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].strip("/"))


def _slow(port: int) -> socket.socket:
    """A connection that starts a request and does not finish its head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(HEAD_START)
    return sock


def _exchange(port: int, request: bytes) -> bytes:
    """``request`` sent, the answer read until the server closes the connection (so the
    server has let go of it when this returns)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b"" or _closed_by_server(sock)
    except (ConnectionResetError, BrokenPipeError):
        return True


def _trickle_until_closed(
    socks: list[socket.socket], opened: list[float], limit_s: float
) -> list[float]:
    """Send one more header byte on each open socket every 0.1 s until the server closes
    it; the seconds each one lasted since ``opened`` (its time before it connected; inf
    when still open after ``limit_s``). Counted from the opening, not from the start of
    the trickle: the server's deadline runs from then, and on a loaded machine the page
    fetched between may take longer than the whole deadline."""
    started = time.monotonic()
    lasted = [float("inf")] * len(socks)
    while time.monotonic() - started < limit_s and float("inf") in lasted:
        open_ = [s for s, t in zip(socks, lasted, strict=True) if t == float("inf")]
        readable, _, _ = select.select(open_, [], [], 0.1)
        for sock in open_:
            i = socks.index(sock)
            if sock in readable:
                if _closed_by_server(sock):
                    lasted[i] = time.monotonic() - opened[i]
                continue
            try:
                sock.send(b"X")
            except OSError:
                lasted[i] = time.monotonic() - opened[i]
    return lasted


def _keep_alive_then_trickle(port: int) -> socket.socket:
    """A connection whose first request is answered, then whose next one trickles."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"GET /static/web.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, body = answer.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
    while len(body) < length:
        body += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200") and b"connection: close" not in head.lower()
    sock.sendall(HEAD_START)
    return sock


def test_web_closes_connections_that_trickle_a_request_past_the_client_timeout(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 20 item 7: 150 connections trickling a header byte at a time stayed open
    for 40 s. With ``--client-timeout 1``, each connection that has not sent its whole
    request a second after it opened (or after its previous response) is closed, however
    steadily it trickles; a complete request is answered meanwhile and after."""
    with web_process(tmp_path / "home", child_env, "--client-timeout", "1") as url:
        port = _port(url)
        slow, opened = [], []
        for n in range(21):
            opened.append(time.monotonic())
            slow.append(_slow(port) if n < 20 else _keep_alive_then_trickle(port))
        page = _exchange(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert page.startswith(b"HTTP/1.1 200") and b"<h1>Library</h1>" in page
        lasted = _trickle_until_closed(slow, opened, limit_s=60)
        for sock in slow:
            sock.close()
        assert float("inf") not in lasted, lasted  # every one closed by the server
        assert min(lasted) > 0.5, lasted  # by the deadline, not at once
        again = _exchange(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert again.startswith(b"HTTP/1.1 200")


def test_web_cuts_off_a_client_that_stops_reading_its_answers(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 20 item 7, the same class from the other side: a client that pipelines
    3,000 requests (~10 MB of answers) and reads none of them fills every buffer; the
    server then waits on it. With ``--client-timeout 1`` it cuts the connection off
    (a reset) rather than hold it and its unsent answers for good."""
    with web_process(tmp_path / "home", child_env, "--client-timeout", "1") as url:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", _port(url)))
        with sock:
            sock.sendall(b"GET /static/web.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 3_000)
            sock.sendall(HEAD_START)
            started, cut_after = time.monotonic(), None
            while time.monotonic() - started < 60:  # one header byte every 0.2 s, no reading
                try:
                    sock.send(b"X")
                except OSError:
                    cut_after = time.monotonic() - started
                    break
                time.sleep(0.2)
        assert cut_after is not None, "the server still holds a client that reads nothing"


def test_web_caps_open_connections_with_a_503_and_serves_below_the_cap(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 20 item 7: with ``--max-connections 8``, seven slow connections leave room
    for a normal request (answered); once eight are open, each further connection is
    answered 503 and closed at once (nothing of it is read: a request it sent may meet a
    reset instead), and the eight are kept (their deadline is far)."""
    args = ("--max-connections", "8", "--client-timeout", "120")
    with web_process(tmp_path / "home", child_env, *args) as url:
        port = _port(url)
        slow = [_slow(port) for _ in range(7)]
        request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        page = _exchange(port, request)
        assert page.startswith(b"HTTP/1.1 200") and b"<h1>Library</h1>" in page
        slow.append(_slow(port))  # the eighth: the cap is reached
        for _ in range(4):  # answered at once, before the client says anything
            refused = _exchange(port, b"")
            assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
            assert b"too many open connections" in refused
        # A request sent at once meets the 503, or the reset of the closed socket.
        with contextlib.suppress(ConnectionResetError):
            assert _exchange(port, request).startswith(b"HTTP/1.1 503")
        readable, _, _ = select.select(slow, [], [], 0.5)
        assert readable == []  # the eight are still open: no answer, no close
        for sock in slow:
            sock.close()
