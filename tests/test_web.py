"""The web view's pages (issue 12, "`kb-mcp web`"): each page against the real app on a
real library (a folder with a corrected document, code, a file that fails), through
starlette's TestClient; the security rules are in ``test_web_security.py`` and the real
browser in ``test_web_browser.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kb_mcp.library import Library
from kb_mcp.server.audit import AUDIT_FILE, record_call
from kb_mcp.settings import Settings
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import Policy
from kb_mcp.web.layout import Edge, layout

RETENTION = """---
title: Audit log retention policy
date: 2026-01-10
tags: [ops, retention]
---
# Audit log retention policy

Audit logs are kept for 90 days in the archive bucket, then deleted for good.

<script>alert("owned")</script> and [a link](javascript:alert(1)).
"""
ERRATA = """---
date: 2026-02-03
---
# Errata for the audit log retention policy

Effective 3 February: audit logs are kept for 30 days in the archive bucket, not 90 days.
"""
CODE = '''"""The blob store."""


class BlobStore:
    """Keeps blobs in the ArchiveBucket."""

    def put_blob(self, key: str) -> None:
        """Store a blob; see RetentionPolicy."""
'''
FILES = {"retention.md": RETENTION, "errata.md": ERRATA, "blob_store.py": CODE}


def make_library(tmp_path: Path) -> Library:
    """A folder source with a document its errata correct, some code, a broken DOCX."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"this is not a zip file")
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    library.folders.add_folder(folder, "notes")
    library.folders.sync()
    return library


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Library]]:
    library = make_library(tmp_path_factory.mktemp("web"))
    app = build_app(library, Policy("127.0.0.1", None))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client, library
    library.close()


def _doc_key(library: Library, path: str) -> str:
    return library.lookup.read(path).doc


def test_library_page_lists_sources_counts_health_and_failed_files_with_reasons(web) -> None:
    """issue 12: sources with document / chunk counts, sync state, last sync, failed files
    with their reasons, embedding coverage, index health."""
    client, library = web
    page = client.get("/")
    assert page.status_code == 200
    text = page.text
    overview = library.catalog.overview()
    [source] = overview.sources
    assert f"<td>{source.documents:,}</td><td>{source.chunks:,}</td><td>1</td>" in text
    assert source.synced_at in text and "<td>idle</td>" in text
    assert "broken.docx" in text
    [failed] = library.views.failed_files()
    assert failed.path == "broken.docx" and failed.reason
    assert failed.reason.split(":")[0] in text
    assert "keyword_index</td><td>current" in text
    assert "vectors</td><td>off: no embedder configured" in text


def test_search_page_shows_legs_scores_highlights_and_relations(web) -> None:
    """issue 12: legs per result with scores, matched terms highlighted, relations with
    the changer's cite as a link (and any adjustment that moved a result, likewise)."""
    client, library = web
    page = client.get("/search", params={"q": "audit log retention days", "mode": "keyword"})
    assert page.status_code == 200
    text = page.text
    result = library.lookup.search("audit log retention days", mode="keyword")
    assert len(re.findall(r"<article class='hit'>", text)) == len(result.hits) >= 2
    first = result.hits[0]
    assert f"keyword #{first.leg_ranks['keyword']}" in text
    assert "<mark>retention</mark>" in text.lower() or "<mark>Retention</mark>" in text
    corrected = [h for h in result.hits if h.relations]
    assert corrected, "the corrected document should say so"
    relation = next(r for h in corrected for r in h.relations if r.startswith("corrected by"))
    errata = _doc_key(library, "errata.md")
    assert relation.startswith(f"corrected by {errata}#L")
    cite = relation.removeprefix("corrected by ")
    start, end = cite.split("#L")[1].split("-L")
    link = f"<a href='/doc/{errata}?lines={start}-{end}#L{start}-L{end}'>{cite}</a>"
    assert f"relations: corrected by {link}" in text  # the changer's cite is a link
    for hit in result.hits:
        for adjustment in hit.adjustments:  # a move by the relation pass, if any
            assert f"adjusted: {adjustment.reason.split(' ')[0]}" in text
    # The cited link goes to the document page at the hit's lines.
    href = f"/doc/{first.doc}?lines={first.start_line}-{first.end_line}"
    assert href + f"#L{first.start_line}-L{first.end_line}" in text


def test_search_page_empty_answer_says_why(web) -> None:
    """issue 12: an empty answer's reason is shown."""
    client, library = web
    result = library.lookup.search("zeppelin quasar", mode="keyword")
    assert not result.hits and result.reason
    page = client.get("/search", params={"q": "zeppelin quasar", "mode": "keyword"})
    assert page.status_code == 200
    assert "0 result(s)" in page.text
    assert f"id='reason'>{result.reason}" in page.text.replace("&#x27;", "'")


def test_search_page_source_scope_and_blank_query_shows_the_form(web) -> None:
    client, _library = web
    blank = client.get("/search")
    assert blank.status_code == 200 and "<form action='/search'" in blank.text
    assert "result(s)" not in blank.text
    scoped = client.get("/search", params={"q": "blob", "source": "notes"})
    assert scoped.status_code == 200 and "BlobStore" in scoped.text
    unknown = client.get("/search", params={"q": "blob", "source": "nope"})
    assert unknown.status_code == 404 and "no source named" in unknown.text


def test_document_page_highlights_cited_lines_and_links_relations(web) -> None:
    """issue 12: rendered Markdown and numbered lines with the cited range highlighted,
    metadata, frontmatter, relations linking to the other document, entities."""
    client, library = web
    old, errata = _doc_key(library, "retention.md"), _doc_key(library, "errata.md")
    page = client.get(f"/doc/{old}", params={"lines": "6-8"})
    assert page.status_code == 200
    text = page.text
    assert "<h1>Audit log retention policy</h1>" in text
    cited = text[text.index("<div class='cited' id='L6-L8'>") :]
    cited = cited[: cited.index("</div></div>") + 12]
    assert cited.count("class='line'") == 3 and "id='L6'" in cited and "id='L8'" in cited
    assert "<td>title</td><td>Audit log retention policy</td>" in text
    assert "<td>tags</td><td>ops, retention</td>" in text
    link = f"<a class='relation' href='/doc/{errata}'>corrected by {errata}</a>"
    assert f"{link} “Errata for the audit log retention policy”" in text
    assert "<h2>Entities</h2><p class='entities'>" in text
    # Markdown rendered, raw HTML and javascript: links never live.
    rendered = text.split("<div class='rendered'>")[1].split("<h2 id='lines'>")[0]
    assert rendered.startswith("<h1>Audit log retention policy</h1>")  # frontmatter apart
    assert "<script>" not in text and 'href="javascript' not in text
    assert "&lt;script&gt;" in text


def test_document_page_accepts_a_cite_string(web) -> None:
    client, library = web
    old = _doc_key(library, "retention.md")
    page = client.get(f"/doc/{old}%23L6-L7")
    assert page.status_code == 200 and "id='L6-L7'" in page.text


def test_document_page_unknown_id_and_bad_lines_are_clear_errors(web) -> None:
    """issue 12: bad input gives an error page with the right status, never a traceback."""
    client, library = web
    missing = client.get("/doc/no-such-doc")
    assert missing.status_code == 404
    assert "no document &#x27;no-such-doc&#x27; in this library" in missing.text
    old = _doc_key(library, "retention.md")
    bad = client.get(f"/doc/{old}", params={"lines": "x-y"})
    assert bad.status_code == 400 and "write lines=12-40" in bad.text
    backwards = client.get(f"/doc/{old}", params={"lines": "9-3"})
    assert backwards.status_code == 400 and "ends before it starts" in backwards.text
    past = client.get(f"/doc/{old}", params={"lines": "900-901"})
    assert past.status_code == 200  # a cited range past the end highlights nothing
    assert "Traceback" not in missing.text + bad.text


def test_search_bad_mode_and_huge_query_are_400_with_the_reason(web) -> None:
    client, _library = web
    bad_mode = client.get("/search", params={"q": "blob", "mode": "psychic"})
    assert bad_mode.status_code == 400
    assert "unknown search mode &#x27;psychic&#x27;; use one of: auto" in bad_mode.text
    huge = client.get("/search", params={"q": "blob " * 2000})
    assert huge.status_code == 400 and "at most 4,000 are accepted" in huge.text


def test_entities_page_shows_mentions_neighbours_and_an_svg_neighbourhood(web) -> None:
    """issue 12: entities: search, mentions, neighbours, and a picture of the graph."""
    client, library = web
    [view] = library.entities.find("BlobStore", 1, drawn=1)
    page = client.get("/entities", params={"q": "BlobStore"})
    assert page.status_code == 200
    text = page.text
    assert view.name in text
    for cite in view.cites:
        assert cite in text
    for neighbour in view.neighbours:
        assert neighbour.name in text
    svg = text[text.index("<svg") : text.index("</svg>")]
    assert svg.count("<circle") == 1 + len(view.neighbours) > 1
    assert svg.count("<line") == len(view.neighbours) + len(view.links)
    none = client.get("/entities", params={"q": "qqqqzzzz"})
    assert none.status_code == 200 and "no entity matches" in none.text


def test_entities_picture_links_neighbours_mentioned_together(tmp_path: Path) -> None:
    """issue 12: the neighbourhood picture draws the edges between neighbours too (from
    ``entity_relations``), not only a star: co-mentioned neighbours are joined, others not."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "store.md").write_text(
        "# Storage\n\n## Writes\n\nThe BlobStore hands each blob to the ArchiveBucket and "
        "the RetentionPolicy.\n\n## Reads\n\nThe BlobStore reads through the CacheLayer.\n",
        encoding="utf-8",
    )
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        library.folders.sync()
        [view] = library.entities.find("BlobStore", 1, drawn=1)
        undrawn = library.entities.find("BlobStore", 1)
        app = build_app(library, Policy("127.0.0.1", None))
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            text = client.get("/entities", params={"q": "BlobStore"}).text
    pairs = {frozenset((link.a, link.b)) for link in view.links}
    keys = {n.key for n in view.neighbours}
    assert all(pair <= keys for pair in pairs)
    assert frozenset(("archivebucket", "retentionpolicy")) in pairs  # one chunk
    assert frozenset(("archivebucket", "cachelayer")) not in pairs  # two sections apart
    svg = text[text.index("<svg") : text.index("</svg>")]
    assert svg.count("<line") == len(view.neighbours) + len(view.links) > len(view.neighbours)
    assert [v.links for v in undrawn] == [()]  # only a drawn entity pays for its links


def test_entity_lookup_follows_a_change_despite_the_kept_names(tmp_path: Path) -> None:
    """issue 12: the names a fuzzy lookup compares with are kept per data version
    (``LibraryState.memo``); a name synced after a lookup is found by the next one."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Store\n\nThe BlobStore keeps blobs.\n", encoding="utf-8")
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        library.folders.sync()
        assert [v.name for v in library.entities.find("BlobStore", 1)] == ["BlobStore"]
        assert "QuarantineVault" not in [
            v.name for v in library.entities.find("QuarantineVault", 5)
        ]
        (folder / "b.md").write_text("# Vault\n\nThe QuarantineVault holds blobs.\n", "utf-8")
        library.folders.sync()
        found = [v.name for v in library.entities.find("QuarantineVlt", 5)]
    assert "QuarantineVault" in found  # fuzzily, so through the kept names


def test_audit_page_shows_tool_duration_outcome_newest_first(web) -> None:
    """issue 12: the audit log: tool, duration, outcome; never arguments."""
    client, library = web
    record_call(library.home, "search", 12.5, "ok")
    record_call(library.home, "read", 3.25, "error:not_found")
    with open(library.home / AUDIT_FILE, "a", encoding="utf-8") as handle:
        handle.write('{"torn": \n')  # a torn line is skipped, not an error
    page = client.get("/audit")
    assert page.status_code == 200
    rows = re.findall(
        r"<tr><td>[^<]*</td><td>(\w+)</td><td>([\d.,]+) ms</td><td>([^<]+)<", page.text
    )
    assert rows[:2] == [("read", "3.2", "error:not_found"), ("search", "12.5", "ok")] or rows[
        :2
    ] == [("read", "3.3", "error:not_found"), ("search", "12.5", "ok")]
    log = library.views.audit_log()
    assert [e.tool for e in log.recent[:2]] == ["read", "search"]
    assert {t.tool: (t.calls, t.errors) for t in log.tools} == {"read": (1, 1), "search": (1, 0)}
    assert "<td>read</td><td>1</td><td>1</td><td>3.2 ms</td>" in page.text
    assert json.loads((library.home / AUDIT_FILE).read_text().splitlines()[0])["tool"]


def test_static_stylesheet_and_unknown_page(web) -> None:
    client, _library = web
    css = client.get("/static/web.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert ".cited" in css.text
    missing = client.get("/nowhere")
    assert missing.status_code == 404 and "no such page" in missing.text


def test_layout_keeps_the_centre_pinned_and_is_deterministic() -> None:
    """The SVG layout: node 0 at the centre, every node inside the box, same input →
    same picture, linked nodes closer than unlinked ones on average."""
    edges = [Edge(0, i, 1.0) for i in range(1, 6)] + [Edge(1, 2, 3.0)]
    first = layout(8, edges)
    assert first == layout(8, edges)
    assert first[0] == (0.5, 0.5)
    assert all(0 <= x <= 1 and 0 <= y <= 1 for x, y in first)

    def dist(a: int, b: int) -> float:
        return ((first[a][0] - first[b][0]) ** 2 + (first[a][1] - first[b][1]) ** 2) ** 0.5

    linked = sum(dist(0, i) for i in range(1, 6)) / 5
    unlinked = (dist(0, 6) + dist(0, 7)) / 2
    assert linked < unlinked


def test_library_page_counts_follow_a_write_by_another_connection(tmp_path: Path) -> None:
    """The library page's counts are kept per data version (``LibraryState.memo``): a reload
    with nothing changed reuses them, and a document added through another connection
    (another process, as a running server's) shows at the next reload."""
    library = make_library(tmp_path)
    try:
        with TestClient(
            build_app(library, Policy("127.0.0.1", None)), base_url="http://127.0.0.1"
        ) as client:
            before = library.catalog.overview().documents
            assert f"<strong>{before:,}</strong> documents" in client.get("/").text
            with Library(Settings(home=library.home, embedder="none")) as other:
                other.writing.add_document(
                    "Late note", "Written elsewhere.", "test://late", by_agent=False
                )
            page = client.get("/").text
            assert f"<strong>{before + 1:,}</strong> documents" in page
            assert "<td>agent</td>" in page or ">agent<" in page
            (tmp_path / "notes" / "second.docx").write_bytes(b"not a zip either")
            with Library(Settings(home=library.home, embedder="none")) as other:
                other.folders.sync()
            assert "second.docx" in client.get("/").text
    finally:
        library.close()
