"""The web view on a PostgreSQL library (issue 24: "every tool, the CLI, the web view and
the bench run unchanged on either"): each page of ``tests/test_web.py``'s library, built
once on SQLite and once on the test PostgreSQL server, is the same page.

Only what is each library's own differs (where it is: the home or the store's URL; the
folder's path; the times of its sync and its documents), so those are written as
placeholders before pages are compared.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from starlette.testclient import TestClient
from test_web import FILES

from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import Policy

TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def _library(root: Path, store: Store) -> Library:
    folder = root / "notes"
    folder.mkdir(parents=True)
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"this is not a zip file")
    settings = dataclasses.replace(Settings(home=root / "home", embedder="none"), store=store)
    library = Library(settings)
    library.folders.add_folder(folder, "notes")
    library.folders.sync()
    return library


def _pages(library: Library, root: Path) -> dict[str, tuple[int, str]]:
    retention = library.lookup.read("retention.md")
    paths = [
        "/",
        "/search?q=audit+log+retention+days&mode=keyword",
        "/search?q=blob&source=notes",
        "/search?q=zeppelin+quasar",
        f"/doc/{retention.doc}?lines=3-5",
        "/doc/none-such",
        "/entities",
        "/entities?q=ArchiveBucket",
        "/audit",
    ]
    app = build_app(library, Policy("127.0.0.1", None))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        answers = {path: client.get(path) for path in paths}
    where = library.catalog.overview().store or str(root / "home")
    return {path: (a.status_code, _placeheld(a.text, root, where)) for path, a in answers.items()}


def _placeheld(page: str, root: Path, where: str) -> str:
    """The page with what is each library's own as placeholders: where it is (the home's
    file, or the shared store), its folders, and the times it synced and stored (two
    libraries built one after the other differ there)."""
    page = page.replace(where, "<library>").replace(str(root), "<root>")
    return TIME.sub("<time>", page)


def test_every_page_is_the_same_on_both_stores(tmp_path: Path, postgres_url: str) -> None:
    sqlite = _library(tmp_path / "sqlite", Store())
    postgres = _library(tmp_path / "postgres", Store(postgres_url))
    try:
        want = _pages(sqlite, tmp_path / "sqlite")
        got = _pages(postgres, tmp_path / "postgres")
    finally:
        sqlite.close()
        postgres.close()
    assert [status for status, _ in want.values()] == [200] * 5 + [404] + [200] * 3
    assert "ArchiveBucket" in want["/entities?q=ArchiveBucket"][1]  # the pages hold answers
    for path in want:
        assert got[path] == want[path], path
